// The scalar reference: conversion between float32/float64 and every format
// of the catalog, under every rounding mode and policy. This file is the
// specification; every faster path in lowp must give the same bits.
//
// The rules, in the order they apply to an input x:
//  1. NaN in: the format's canonical quiet NaN with x's sign (ml_dtypes), or
//     with --nan keep-payload the top payload bits of x with the quiet bit set
//     (x86 conversion instructions). Formats without NaN (fp6, fp4, integers)
//     store +0 instead and report kNanReplaced. Unsigned formats have no sign
//     to keep.
//  2. Subnormals in (daz, ftz-daz): a subnormal x (of its own format) is read
//     as a zero of the same sign.
//  3. Rounding: x is rounded to the format's grid as if the exponent range
//     were unbounded above (subnormals below, when the format has them):
//       nearest-even     nearest; ties to the neighbour whose significand on
//                        x's binade grid is even (the code's lowest bit, or
//                        for e8m0 the larger power of two)
//       nearest-away     nearest; ties away from zero
//       toward-zero, toward-positive, toward-negative    directed (IEEE 754)
//       odd              toward zero, then the lowest significand bit set if
//                        inexact (round-to-odd, for exact double rounding)
//       stochastic       away from zero with probability f / 2^32, where f is
//                        the dropped fraction's top 32 bits and the 32 random
//                        bits come from RandomBits(seed, element index): up iff
//                        RandomBits(seed, index) < f
//  4. Overflow: a rounded magnitude above the largest finite value gives
//       saturate   the largest finite value;
//       inf        infinity (formats with infinity: IEEE, the default there);
//       nan        NaN (the default of fn/fnuz formats, as ml_dtypes does).
//     Whatever the policy, a mode that rounds this x toward zero (toward-zero,
//     odd, toward-positive for x < 0, toward-negative for x > 0) gives the
//     largest finite value, as IEEE 754 does. Formats without inf and NaN
//     (fp6, fp4) and all integers always saturate. Infinite inputs stay
//     infinite where the format has infinity, unless saturate (which never
//     yields infinity, as OCP's and PTX's "satfinite"); elsewhere they follow
//     the overflow policy.
//  5. Subnormals out (ftz, ftz-daz): a result that is a nonzero subnormal
//     becomes a zero of the same sign.
//  6. Zero: keeps its sign where the format has -0 (fnuz formats store +0).
//  e8m0fnu, which has neither zero nor negatives: 0, negative values and NaN
//  encode as NaN (0xFF); positive values below 2^-127 encode as 2^-127.
//  Integers: rounded by the same modes, then clamped to [lowest, max].
#ifndef LOWP_FORMATS_REFERENCE_H_
#define LOWP_FORMATS_REFERENCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "formats/format.h"

namespace lowp {

enum class Rounding {
  kNearestEven,
  kNearestAway,
  kTowardZero,
  kTowardPositive,
  kTowardNegative,
  kOdd,
  kStochastic,
};
enum class Overflow { kFormatDefault, kSaturate, kInfinity, kNan };
enum class Subnormals { kKeep, kFlushToZero, kInputsAreZero, kFlushBoth };
enum class NanPolicy { kCanonical, kKeepPayload };

struct ConvertOptions {
  Rounding rounding = Rounding::kNearestEven;
  Overflow overflow = Overflow::kFormatDefault;
  Subnormals subnormals = Subnormals::kKeep;
  NanPolicy nan = NanPolicy::kCanonical;
  uint64_t seed = 0;  // stochastic rounding only
};

// Names as the CLI spells them ("nearest-even", "saturate", "ftz-daz", ...).
absl::string_view RoundingName(Rounding r);
absl::string_view OverflowName(Overflow o);
absl::string_view SubnormalsName(Subnormals s);
absl::string_view NanPolicyName(NanPolicy n);
absl::StatusOr<Rounding> ParseRounding(absl::string_view name);
absl::StatusOr<Overflow> ParseOverflow(absl::string_view name);
absl::StatusOr<Subnormals> ParseSubnormals(absl::string_view name);
absl::StatusOr<NanPolicy> ParseNanPolicy(absl::string_view name);
std::vector<Rounding> AllRoundings();

// InvalidArgument if the options ask for what the format cannot store
// (overflow to infinity without infinity, to NaN without NaN, or anything but
// saturation for an integer format).
absl::Status ValidateOptions(const Format& to, const ConvertOptions& options);
// The overflow policy in force: kFormatDefault resolved for this format.
Overflow EffectiveOverflow(const Format& to, Overflow requested);

// The 32 random bits of stochastic rounding for one element: a counter-based
// hash of (seed, index), so results never depend on thread count, SIMD width
// or target. Two rounds of MurmurHash3's 32-bit finalizer, keyed by the seed:
//   k0 = fmix32(seed_lo ^ 0x9E3779B9), k1 = fmix32(seed_hi + k0)
//   RandomBits = fmix32(fmix32(index_lo ^ k0) + (index_hi ^ k1))
uint32_t RandomBits(uint64_t seed, uint64_t index);
uint32_t Fmix32(uint32_t h);

// An exactly decoded number: value = (-1)^negative * significand * 2^exponent.
struct Unpacked {
  enum class Kind { kZero, kFinite, kInfinity, kNan };
  Kind kind = Kind::kZero;
  bool negative = false;
  bool subnormal = false;    // subnormal in the format it came from
  uint64_t significand = 0;  // kFinite: nonzero
  int exponent = 0;
  uint64_t nan_payload = 0;  // kNan: mantissa bits, left-aligned to bit 63
};

Unpacked UnpackFloat32(float x);
Unpacked UnpackFloat64(double x);
// `code` must fit in format.bits (checked by callers at the API boundary).
Unpacked Unpack(const Format& format, uint32_t code);

// What happened to one element; kernels count these.
enum EncodeEvent : uint32_t {
  kExact = 0,
  kInexact = 1u << 0,    // the result differs from the input value
  kOverflow = 1u << 1,   // rounded magnitude above the largest finite
  kSaturated = 1u << 2,  // ... and stored as the largest finite value
  kFlushed = 1u << 3,    // a nonzero input or result made zero by daz/ftz
  kUnderflow = 1u << 4,  // a nonzero input rounded to zero
  kNanInput = 1u << 5,
  kNanReplaced = 1u << 6,  // NaN into a format without NaN (stored as +0)
};

uint32_t Encode(const Format& to, const Unpacked& x, const ConvertOptions& options,
                uint64_t index = 0, uint32_t* events = nullptr);
uint32_t EncodeFloat32(const Format& to, float x, const ConvertOptions& options = {},
                       uint64_t index = 0, uint32_t* events = nullptr);
uint32_t EncodeFloat64(const Format& to, double x, const ConvertOptions& options = {},
                       uint64_t index = 0, uint32_t* events = nullptr);
// Code of one format to code of another, through the exact value.
uint32_t ConvertCode(const Format& from, uint32_t code, const Format& to,
                     const ConvertOptions& options, uint64_t index = 0, uint32_t* events = nullptr);

// Exact decoding. NaN codes decode with their sign and payload bits as they
// are (a signalling NaN stays signalling, as in ml_dtypes); NaNs of formats
// without payload decode to the quiet NaN with the code's sign.
double DecodeToDouble(const Format& from, uint32_t code);
float DecodeToFloat32(const Format& from, uint32_t code);

bool IsNanCode(const Format& format, uint32_t code);

}  // namespace lowp

#endif  // LOWP_FORMATS_REFERENCE_H_
