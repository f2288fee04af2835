#include "formats/reference.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "formats/option_error.h"

// The common path (a finite input, rounded and encoded) is inlined into the
// public entry points, and the rare special-value paths are kept out of it:
// this halves the cost of a call, which bounds the exhaustive tests.
#define LOWP_HOT [[gnu::always_inline]] inline
#define LOWP_COLD [[gnu::noinline, gnu::cold]]

namespace lowp {
namespace {

constexpr std::pair<Rounding, absl::string_view> kRoundingNames[] = {
    {Rounding::kNearestEven, "nearest-even"},       {Rounding::kNearestAway, "nearest-away"},
    {Rounding::kTowardZero, "toward-zero"},         {Rounding::kTowardPositive, "toward-positive"},
    {Rounding::kTowardNegative, "toward-negative"}, {Rounding::kOdd, "odd"},
    {Rounding::kStochastic, "stochastic"},
};
constexpr std::pair<Overflow, absl::string_view> kOverflowNames[] = {
    {Overflow::kFormatDefault, "default"},
    {Overflow::kSaturate, "saturate"},
    {Overflow::kInfinity, "inf"},
    {Overflow::kNan, "nan"},
};
constexpr std::pair<Subnormals, absl::string_view> kSubnormalNames[] = {
    {Subnormals::kKeep, "keep"},
    {Subnormals::kFlushToZero, "ftz"},
    {Subnormals::kInputsAreZero, "daz"},
    {Subnormals::kFlushBoth, "ftz-daz"},
};
constexpr std::pair<NanPolicy, absl::string_view> kNanNames[] = {
    {NanPolicy::kCanonical, "canonical"},
    {NanPolicy::kKeepPayload, "keep-payload"},
};

template <class Enum, size_t N>
absl::string_view NameOf(const std::pair<Enum, absl::string_view> (&names)[N], Enum value) {
  for (const auto& [v, name] : names) {
    if (v == value) return name;
  }
  return "?";
}

template <class Enum, size_t N>
absl::StatusOr<Enum> Parse(const std::pair<Enum, absl::string_view> (&names)[N],
                           absl::string_view what, absl::string_view text) {
  const std::string key = absl::AsciiStrToLower(text);
  std::vector<absl::string_view> valid;
  for (const auto& [v, name] : names) {
    if (name == key) return v;
    valid.push_back(name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown ", what, " '", text, "'; valid: ", absl::StrJoin(valid, ", ")));
}

int BitWidth(uint64_t v) { return std::bit_width(v); }

// sig / 2^shift rounded to an integer by `mode` (shift <= 0 is exact: the
// caller guarantees that sig << -shift fits). `random` is used only by
// stochastic rounding.
struct Rounded {
  uint64_t n;
  bool inexact;
};
LOWP_HOT Rounded RoundToInteger(uint64_t sig, int shift, bool negative, Rounding mode,
                                uint32_t random) {
  if (shift <= 0) return {sig << -shift, false};
  const uint64_t n = shift >= 64 ? 0 : sig >> shift;
  const uint64_t dropped = shift >= 64 ? sig : sig & ((uint64_t{1} << shift) - 1);
  if (dropped == 0) return {n, false};
  // Where the dropped fraction lies against one half: -1 below, 0 at, 1 above.
  int versus_half = -1;
  if (shift <= 64) {
    const uint64_t half = uint64_t{1} << (shift - 1);
    versus_half = dropped < half ? -1 : (dropped == half ? 0 : 1);
  }
  bool up = false;
  switch (mode) {
    case Rounding::kNearestEven:
      up = versus_half > 0 || (versus_half == 0 && (n & 1) != 0);
      break;
    case Rounding::kNearestAway:
      up = versus_half >= 0;
      break;
    case Rounding::kTowardZero:
      up = false;
      break;
    case Rounding::kTowardPositive:
      up = !negative;
      break;
    case Rounding::kTowardNegative:
      up = negative;
      break;
    case Rounding::kOdd:
      return {n | 1, true};
    case Rounding::kStochastic: {
      // Top 32 bits of the dropped fraction dropped / 2^shift.
      uint64_t fraction32 = 0;
      if (shift <= 32) {
        fraction32 = dropped << (32 - shift);
      } else if (shift - 32 < 64) {
        fraction32 = dropped >> (shift - 32);
      }
      up = random < fraction32;
      break;
    }
  }
  return {n + (up ? 1 : 0), true};
}

bool RoundsTowardZero(Rounding mode, bool negative) {
  return mode == Rounding::kTowardZero || mode == Rounding::kOdd ||
         (mode == Rounding::kTowardPositive && negative) ||
         (mode == Rounding::kTowardNegative && !negative);
}

uint32_t WithSign(const Format& f, bool negative, uint32_t magnitude) {
  return negative ? (magnitude | f.sign_mask()) : magnitude;
}

uint32_t LargestFinite(const Format& f, bool negative) {
  if (!f.is_float()) {
    if (!negative) return f.max_finite_magnitude();
    return f.is_signed ? f.sign_mask() : 0;  // -2^(bits-1) or 0
  }
  if (negative && !f.is_signed) return f.max_finite_magnitude();
  return WithSign(f, negative, f.max_finite_magnitude());
}

uint32_t InfinityCode(const Format& f, bool negative) {
  const uint32_t all_ones_exponent = (uint32_t{1} << f.exponent_bits) - 1;
  return WithSign(f, negative, all_ones_exponent << f.mantissa_bits);
}

LOWP_COLD uint32_t NanCode(const Format& f, bool negative, uint64_t payload, NanPolicy policy,
                           uint32_t& events) {
  switch (f.specials) {
    case SpecialEncoding::kIeee: {
      const int m = f.mantissa_bits;
      uint32_t mantissa = uint32_t{1} << (m - 1);  // the quiet bit
      if (policy == NanPolicy::kKeepPayload) {
        mantissa |= static_cast<uint32_t>(payload >> (64 - m));
      }
      return InfinityCode(f, negative) | mantissa;
    }
    case SpecialEncoding::kFiniteOnly:
      return WithSign(f, negative && f.is_signed, f.magnitude_mask());
    case SpecialEncoding::kNegativeZeroIsNan:
      return f.sign_mask();
    case SpecialEncoding::kNone:
      events |= kNanReplaced;
      return 0;
  }
  return 0;
}

// The result of an overflowing rounded value or an infinite input that the
// format cannot keep as infinity.
LOWP_COLD uint32_t OverflowCode(const Format& f, bool negative, Overflow policy, uint32_t& events) {
  events |= kInexact | kOverflow;
  if (policy == Overflow::kInfinity) return InfinityCode(f, negative);
  if (policy == Overflow::kNan) {
    return NanCode(f, negative, 0, NanPolicy::kCanonical, events);
  }
  events |= kSaturated;
  return LargestFinite(f, negative);
}

uint32_t ZeroCode(const Format& f, bool negative, uint32_t& events) {
  if (f.is_float() && !f.has_zero) {  // e8m0: no zero to store
    return NanCode(f, negative, 0, NanPolicy::kCanonical, events);
  }
  return f.has_negative_zero() && negative ? f.sign_mask() : 0;
}

LOWP_HOT uint32_t EncodeInteger(const Format& f, bool negative, uint64_t sig, int exponent,
                                const ConvertOptions& o, uint32_t random, uint32_t& events) {
  const int64_t lowest = f.is_signed ? -(int64_t{1} << (f.bits - 1)) : 0;
  const int64_t highest =
      f.is_signed ? (int64_t{1} << (f.bits - 1)) - 1 : (int64_t{1} << f.bits) - 1;
  int64_t value = 0;
  if (exponent + BitWidth(sig) - 1 >= f.bits) {  // |x| >= 2^bits: beyond any
    value = negative ? lowest - 1 : highest + 1;
    events |= kInexact;
  } else {
    const Rounded r = RoundToInteger(sig, -exponent, negative, o.rounding, random);
    value = negative ? -static_cast<int64_t>(r.n) : static_cast<int64_t>(r.n);
    if (r.inexact) events |= kInexact;
    if (r.n == 0) events |= kUnderflow;
  }
  if (value > highest || value < lowest) {
    events |= kInexact | kOverflow | kSaturated;
    value = value > highest ? highest : lowest;
  }
  return static_cast<uint32_t>(value) & f.code_mask();
}

LOWP_HOT uint32_t EncodeFiniteFloat(const Format& f, bool negative, uint64_t sig, int exponent,
                                    const ConvertOptions& o, uint32_t random, uint32_t& events) {
  if (negative && !f.is_signed) {  // e8m0: no negative numbers
    events |= kInexact;
    return NanCode(f, negative, 0, NanPolicy::kCanonical, events);
  }
  const int m = f.mantissa_bits;
  const int min_exponent = f.min_normal_exponent();
  // The grid: multiples of 2^quantum, where quantum is the weight of the last
  // mantissa bit in x's binade (or in the subnormal range, which shares the
  // smallest normal binade's step).
  const int top = exponent + BitWidth(sig) - 1;  // floor(log2 |x|)
  int quantum = std::max(top, min_exponent) - m;
  const Rounded r = RoundToInteger(sig, quantum - exponent, negative, o.rounding, random);
  uint64_t n = r.n;
  if (r.inexact) events |= kInexact;
  if ((n >> (m + 1)) != 0) {  // rounded up into the next binade
    n >>= 1;
    ++quantum;
  }
  if (n == 0) {
    if (!f.has_zero) return 0;  // e8m0: the smallest value, 2^-127
    events |= kUnderflow;
    return ZeroCode(f, negative, events);
  }
  if ((n >> m) == 0) {  // subnormal: exponent field 0
    if (o.subnormals == Subnormals::kFlushToZero || o.subnormals == Subnormals::kFlushBoth) {
      events |= kFlushed;
      return ZeroCode(f, negative, events);
    }
    return WithSign(f, negative, static_cast<uint32_t>(n));
  }
  const uint64_t field = static_cast<uint64_t>(quantum + m + f.bias);
  const uint64_t magnitude = (field << m) | (n - (uint64_t{1} << m));
  if (magnitude > f.max_finite_magnitude()) {
    if (RoundsTowardZero(o.rounding, negative)) {
      events |= kInexact | kOverflow | kSaturated;
      return LargestFinite(f, negative);
    }
    return OverflowCode(f, negative, EffectiveOverflow(f, o.overflow), events);
  }
  return WithSign(f, negative, static_cast<uint32_t>(magnitude));
}

// The IEEE 754 binary layout shared by float32 (8, 23) and float64 (11, 52).
template <typename Bits, int kExponentBits, int kMantissaBits>
LOWP_HOT Unpacked UnpackIeee(Bits bits) {
  constexpr Bits kAllOnes = (Bits{1} << kExponentBits) - 1;
  constexpr int kBias = (1 << (kExponentBits - 1)) - 1;
  Unpacked u;
  u.negative = (bits >> (kExponentBits + kMantissaBits)) != 0;
  const Bits field = (bits >> kMantissaBits) & kAllOnes;
  const Bits mantissa = bits & ((Bits{1} << kMantissaBits) - 1);
  if (field == kAllOnes) {
    u.kind = mantissa == 0 ? Unpacked::Kind::kInfinity : Unpacked::Kind::kNan;
    u.nan_payload = uint64_t{mantissa} << (64 - kMantissaBits);
  } else if (field == 0) {
    u.kind = mantissa == 0 ? Unpacked::Kind::kZero : Unpacked::Kind::kFinite;
    u.subnormal = mantissa != 0;
    u.significand = mantissa;
    u.exponent = 1 - kBias - kMantissaBits;
  } else {
    u.kind = Unpacked::Kind::kFinite;
    u.significand = mantissa | (Bits{1} << kMantissaBits);
    u.exponent = static_cast<int>(field) - kBias - kMantissaBits;
  }
  return u;
}

LOWP_HOT Unpacked UnpackFloat32Inline(float x) {
  return UnpackIeee<uint32_t, 8, 23>(std::bit_cast<uint32_t>(x));
}

LOWP_HOT uint32_t EncodeUnpacked(const Format& to, const Unpacked& x, const ConvertOptions& o,
                                 uint64_t index, uint32_t& events) {
  if (x.kind == Unpacked::Kind::kFinite) [[likely]] {
    if (x.subnormal &&
        (o.subnormals == Subnormals::kInputsAreZero || o.subnormals == Subnormals::kFlushBoth)) {
      events |= kFlushed | kInexact;
      return ZeroCode(to, x.negative, events);
    }
    const uint32_t random = o.rounding == Rounding::kStochastic ? RandomBits(o.seed, index) : 0;
    if (!to.is_float()) {
      return EncodeInteger(to, x.negative, x.significand, x.exponent, o, random, events);
    }
    return EncodeFiniteFloat(to, x.negative, x.significand, x.exponent, o, random, events);
  }
  switch (x.kind) {
    case Unpacked::Kind::kNan:
      events |= kNanInput;
      return NanCode(to, x.negative && to.is_signed, x.nan_payload, o.nan, events);
    case Unpacked::Kind::kInfinity: {
      const Overflow policy = EffectiveOverflow(to, o.overflow);
      if (to.has_infinity() && policy != Overflow::kSaturate) {
        return InfinityCode(to, x.negative);
      }
      if (x.negative && to.is_float() && !to.is_signed) {  // e8m0
        return NanCode(to, false, 0, NanPolicy::kCanonical, events);
      }
      return OverflowCode(to, x.negative, policy, events);
    }
    case Unpacked::Kind::kZero:
      return ZeroCode(to, x.negative, events);
    case Unpacked::Kind::kFinite:
      break;
  }
  return 0;  // unreachable: kFinite is handled above
}

}  // namespace

absl::string_view RoundingName(Rounding r) { return NameOf(kRoundingNames, r); }
absl::string_view OverflowName(Overflow o) { return NameOf(kOverflowNames, o); }
absl::string_view SubnormalsName(Subnormals s) { return NameOf(kSubnormalNames, s); }
absl::string_view NanPolicyName(NanPolicy n) { return NameOf(kNanNames, n); }

absl::StatusOr<Rounding> ParseRounding(absl::string_view name) {
  return Parse(kRoundingNames, "rounding mode", name);
}
absl::StatusOr<Overflow> ParseOverflow(absl::string_view name) {
  return Parse(kOverflowNames, "overflow policy", name);
}
absl::StatusOr<Subnormals> ParseSubnormals(absl::string_view name) {
  return Parse(kSubnormalNames, "subnormal policy", name);
}
absl::StatusOr<NanPolicy> ParseNanPolicy(absl::string_view name) {
  return Parse(kNanNames, "NaN policy", name);
}

std::vector<Rounding> AllRoundings() {
  std::vector<Rounding> all;
  for (const auto& [r, name] : kRoundingNames) all.push_back(r);
  return all;
}

Overflow EffectiveOverflow(const Format& to, Overflow requested) {
  if (!to.has_nan()) return Overflow::kSaturate;  // fp6, fp4, integers
  // An impossible request (refused by ValidateOptions) falls back to the
  // format's convention rather than produce a code that is not infinity.
  if (requested == Overflow::kFormatDefault ||
      (requested == Overflow::kInfinity && !to.has_infinity())) {
    return to.has_infinity() ? Overflow::kInfinity : Overflow::kNan;
  }
  return requested;
}

absl::Status ValidateOptions(const Format& to, const ConvertOptions& options) {
  const Overflow o = options.overflow;
  if (o == Overflow::kInfinity && !to.has_infinity()) {
    return OptionError("overflow inf", absl::StrCat("format ", to.name,
                                                    " has no infinity (use saturate",
                                                    to.has_nan() ? " or nan)" : ")"));
  }
  if (o == Overflow::kNan && !to.has_nan()) {
    return OptionError("overflow nan",
                       absl::StrCat("format ", to.name, " has no NaN; it always saturates (use saturate)"));
  }
  return absl::OkStatus();
}

uint32_t Fmix32(uint32_t h) {
  h ^= h >> 16;
  h *= 0x85EBCA6Bu;
  h ^= h >> 13;
  h *= 0xC2B2AE35u;
  h ^= h >> 16;
  return h;
}

uint32_t RandomBits(uint64_t seed, uint64_t index) {
  const uint32_t k0 = Fmix32(static_cast<uint32_t>(seed) ^ 0x9E3779B9u);
  const uint32_t k1 = Fmix32(static_cast<uint32_t>(seed >> 32) + k0);
  const uint32_t h = Fmix32(static_cast<uint32_t>(index) ^ k0);
  return Fmix32(h + (static_cast<uint32_t>(index >> 32) ^ k1));
}

Unpacked UnpackFloat32(float x) { return UnpackFloat32Inline(x); }

Unpacked UnpackFloat64(double x) {
  return UnpackIeee<uint64_t, 11, 52>(std::bit_cast<uint64_t>(x));
}

Unpacked Unpack(const Format& f, uint32_t code) {
  Unpacked u;
  if (!f.is_float()) {
    int64_t value = code;
    if (f.is_signed && (code & f.sign_mask()) != 0) {
      value -= int64_t{1} << f.bits;
    }
    u.negative = value < 0;
    u.kind = value == 0 ? Unpacked::Kind::kZero : Unpacked::Kind::kFinite;
    u.significand = static_cast<uint64_t>(value < 0 ? -value : value);
    return u;
  }
  const int m = f.mantissa_bits;
  const uint32_t magnitude = code & f.magnitude_mask();
  const uint32_t field = magnitude >> m;
  const uint32_t mantissa = magnitude & ((uint32_t{1} << m) - 1);
  const uint32_t all_ones_exponent = (uint32_t{1} << f.exponent_bits) - 1;
  u.negative = (code & f.sign_mask()) != 0;
  const bool is_nan =
      (f.specials == SpecialEncoding::kNegativeZeroIsNan && code == f.sign_mask()) ||
      (f.specials == SpecialEncoding::kFiniteOnly && magnitude == f.magnitude_mask()) ||
      (f.specials == SpecialEncoding::kIeee && field == all_ones_exponent && mantissa != 0);
  if (is_nan) {
    u.kind = Unpacked::Kind::kNan;
    if (f.specials == SpecialEncoding::kIeee) {
      u.nan_payload = uint64_t{mantissa} << (64 - m);
    }
  } else if (f.specials == SpecialEncoding::kIeee && field == all_ones_exponent) {
    u.kind = Unpacked::Kind::kInfinity;
  } else if (field == 0 && f.has_zero) {
    u.kind = mantissa == 0 ? Unpacked::Kind::kZero : Unpacked::Kind::kFinite;
    u.subnormal = mantissa != 0;
    u.significand = mantissa;
    u.exponent = f.min_normal_exponent() - m;
  } else {
    u.kind = Unpacked::Kind::kFinite;
    u.significand = (uint64_t{1} << m) | mantissa;
    u.exponent = static_cast<int>(field) - f.bias - m;
  }
  return u;
}

uint32_t Encode(const Format& to, const Unpacked& x, const ConvertOptions& o, uint64_t index,
                uint32_t* events) {
  uint32_t happened = kExact;
  const uint32_t code = EncodeUnpacked(to, x, o, index, happened);
  if (events != nullptr) *events = happened;
  return code;
}

uint32_t EncodeFloat32(const Format& to, float x, const ConvertOptions& o, uint64_t index,
                       uint32_t* events) {
  uint32_t happened = kExact;
  const uint32_t code = EncodeUnpacked(to, UnpackFloat32Inline(x), o, index, happened);
  if (events != nullptr) *events = happened;
  return code;
}

uint32_t EncodeFloat64(const Format& to, double x, const ConvertOptions& o, uint64_t index,
                       uint32_t* events) {
  return Encode(to, UnpackFloat64(x), o, index, events);
}

uint32_t ConvertCode(const Format& from, uint32_t code, const Format& to, const ConvertOptions& o,
                     uint64_t index, uint32_t* events) {
  return Encode(to, Unpack(from, code), o, index, events);
}

double DecodeToDouble(const Format& from, uint32_t code) {
  const Unpacked u = Unpack(from, code);
  const uint64_t sign = u.negative ? uint64_t{1} << 63 : 0;
  switch (u.kind) {
    case Unpacked::Kind::kZero:
      return std::bit_cast<double>(sign);
    case Unpacked::Kind::kInfinity:
      return std::bit_cast<double>(sign | 0x7FF0000000000000u);
    case Unpacked::Kind::kNan: {
      const uint64_t payload = u.nan_payload != 0 ? u.nan_payload >> 12 : uint64_t{1} << 51;
      return std::bit_cast<double>(sign | 0x7FF0000000000000u | payload);
    }
    case Unpacked::Kind::kFinite:
      break;
  }
  const double magnitude = std::ldexp(static_cast<double>(u.significand), u.exponent);
  return u.negative ? -magnitude : magnitude;
}

float DecodeToFloat32(const Format& from, uint32_t code) {
  const Unpacked u = Unpack(from, code);
  if (u.kind != Unpacked::Kind::kNan) {
    // Exact: every value of every format is a float32 (MakeFloatFormat).
    return static_cast<float>(DecodeToDouble(from, code));
  }
  const uint32_t sign = u.negative ? 0x80000000u : 0;
  const uint32_t payload =
      u.nan_payload != 0 ? static_cast<uint32_t>(u.nan_payload >> 41) : 0x400000u;
  return std::bit_cast<float>(sign | 0x7F800000u | payload);
}

bool IsNanCode(const Format& format, uint32_t code) {
  return Unpack(format, code).kind == Unpacked::Kind::kNan;
}

// Format's value figures are a code's decoded value: defined beside the
// decoder (formats/format.h declares them).
double Format::max_finite() const { return DecodeToDouble(*this, max_finite_magnitude()); }

double Format::lowest_finite() const {
  if (!is_signed) return is_float() ? DecodeToDouble(*this, 0) : 0.0;
  if (!is_float()) return -std::ldexp(1.0, bits - 1);
  return -max_finite();
}

}  // namespace lowp
