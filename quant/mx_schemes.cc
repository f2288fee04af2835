// OCP Microscaling (MX) v1.0 block formats: mxfp8 (e4m3), mxfp8_e5m2,
// mxfp6_e2m3, mxfp6_e3m2, mxfp4 (e2m1) and mxint8.
//
// Sources of the rules (learnt, not copied):
//  - OCP Microscaling Formats (MX) v1.0, section 5 (block of k = 32 elements,
//    E8M0 scale with exponents -127..127 and 0xFF = NaN, element formats,
//    MXINT8's implicit scale 2^-6) and section 6.3 (the conversion:
//    shared_exp = floor(log2(max |V_i|)) - emax_elem, X = 2^shared_exp,
//    P_i = V_i / X quantized to the element format, normal numbers clamped).
//  - microsoft/microxcaling mx/mx_ops.py _quantize_mx and _shared_exponents
//    (the same floor rule; exponents below -127 clamped to -127, above 127
//    made NaN; the amax = 0 block gets the smallest scale) and mx/formats.py
//    _get_format_params (emax: e4m3 8, e5m2 15, e3m2 4, e2m3 2, e2m1 2,
//    int8 0; int8's largest magnitude 127/64, symmetric: -128 unused).
//  - The round-up scale X = 2^ceil(log2(amax / max_elem)) as pytorch/ao
//    (ScaleCalculationMode CEIL), MLX and CUTLASS (cvt.rp ue8m0) use it: the
//    block maximum never clips.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "kernels/blocks.h"
#include "kernels/convert.h"
#include "kernels/quantize.h"
#include "quant/rounder.h"
#include "quant/scheme_families.h"

namespace lowp::internal {
namespace {

constexpr int64_t kMxBlock = 32;
constexpr int kMxScaleBits = 8;  // E8M0
constexpr int kE8m0MinExponent = -127;
constexpr int kE8m0MaxExponent = 127;
// MXINT8: an int8 code q stands for q * 2^-6; the largest magnitude used is
// 127/64 (the spec's emax for INT8 is 0: 127/64 = 1.984375 < 2^1).
constexpr int kMxInt8FractionBits = 6;
constexpr int32_t kMxInt8Max = 127;

enum class MxScaleRule { kFloor, kRoundUp };

// floor(log2(a)) for a finite a > 0, exact (subnormal a included).
// Read from the bits: a block's scale is found per 32 elements, and libm's
// frexp and ldexp were a fifth of mxfp4's pass.
inline int FloorLog2(float a) {
  const uint32_t bits = std::bit_cast<uint32_t>(a);
  const int field = static_cast<int>(bits >> 23);  // a > 0: no sign bit
  if (field != 0) return field - 127;
  return std::bit_width(bits) - 1 - 149;  // subnormal: mantissa * 2^-149
}

// 2^e for e in E8M0's [-127, 127], exactly (2^-127 is subnormal).
inline float PowerOfTwo(int e) {
  return std::bit_cast<float>(e >= -126 ? static_cast<uint32_t>(e + 127) << 23
                                        : uint32_t{1} << (e + 149));
}

// ceil(log2(a / m)) for finite a > 0 and m > 0. a / m is rounded in double,
// which cannot land on a power of two unless the exact quotient is one: a has
// 24 significant bits and m at most 8, so a quotient that is not a power of
// two differs from one by far more than a double's rounding.
inline int CeilLog2Ratio(float a, double m) {
  int e;
  const double f = std::frexp(static_cast<double>(a) / m, &e);  // [0.5, 1)
  return f == 0.5 ? e - 1 : e;
}

struct MxVariant {
  const char* name;     // canonical scheme name
  const char* alias;    // another accepted base name, or ""
  const char* element;  // catalog format of the elements
};

constexpr MxVariant kVariants[] = {
    {"mxfp8", "mxfp8_e4m3", "fp8_e4m3fn"}, {"mxfp8_e5m2", "", "fp8_e5m2"},
    {"mxfp6_e2m3", "", "fp6_e2m3fn"},      {"mxfp6_e3m2", "", "fp6_e3m2fn"},
    {"mxfp4", "", "fp4_e2m1fn"},           {"mxint8", "", "int8"},
};

// One OCP MX scheme. Rows are cut into blocks of 32 elements (a row's last
// block is short when cols % 32 != 0, treated as padded with zeros). Per block,
// over its finite elements:
//   amax = max |x|
//   floor rule (OCP v1.0 6.3, default):
//     e = floor(log2(amax)) - emax_elem
//     emax_elem = exponent of the element format's largest normal:
//       e4m3 8, e5m2 15, e2m3 2, e3m2 4, e2m1 2, int8 0
//   round-up rule (":scale=round-up"):
//     e = ceil(log2(amax / max_elem)), max_elem the largest element value
//       (448, 57344, 7.5, 28, 6, 127/64): no element clips
//   amax = 0 (all zeros or all non-finite): e = -127
//   e clamped to E8M0's [-127, 127] (an fp32 amax never reaches the upper
//   bound, so the NaN scale 0xFF is never produced); X = 2^e, stored as the
//   E8M0 code e + 127.
//   floating elements: code = RNE(x / X) in the element format, saturating
//     to +-max_elem; value = decode(code) * X.
//   mxint8: q = clamp(RNE(x / X * 2^6), -127, 127) (two's complement, -128
//     unused as in microxcaling's symmetric int8); value = q * 2^-6 * X.
// x / X and decode(code) * X are exact in fp32 (X is a power of two), except
// that with round-up a block max near FLT_MAX can round to an element whose
// value exceeds float32: it comes back as +-FLT_MAX.
// NaN and +-Inf take no part in amax, are stored as code 0 and come back
// unchanged. Counts: clipped = finite x with |x / X| > max_elem; subnormal =
// codes with a zero exponent field and a nonzero mantissa (never for int8).
// Storage: rows * cols * element_bits + rows * ceil(cols / 32) * 8 bits.
class MxScheme : public Scheme {
 public:
  MxScheme(std::string name, Format element, MxScaleRule rule)
      : Scheme(std::move(name)),
        element_(std::move(element)),
        rounder_(SaturatingRounder(element_)),
        rule_(rule),
        is_int_(!element_.is_float()),
        max_elem_(is_int_ ? static_cast<double>(kMxInt8Max) / (1 << kMxInt8FractionBits)
                          : element_.max_finite()),
        emax_elem_(is_int_ ? 0 : element_.max_normal_exponent()) {}

  uint64_t StorageBits(int64_t rows, int64_t cols) const override {
    const uint64_t r = static_cast<uint64_t>(rows);
    return r * static_cast<uint64_t>(cols) * element_.bits +
           r * static_cast<uint64_t>(BlocksPerRow(cols, kMxBlock)) * kMxScaleBits;
  }

  absl::StatusOr<std::unique_ptr<BlockRounder>> BlockRounderFor(
      int64_t rows, int64_t cols, const TensorContext& context) const override {
    (void)context;
    return std::make_unique<MxRounder>(*this, rows, cols);
  }

  // The E8M0 exponent of a block whose finite absmax is `amax`.
  int ScaleExponent(float amax) const {
    if (!(amax > 0)) return kE8m0MinExponent;
    const int e = rule_ == MxScaleRule::kFloor ? FloorLog2(amax) - emax_elem_
                                               : CeilLog2Ratio(amax, max_elem_);
    return std::clamp(e, kE8m0MinExponent, kE8m0MaxExponent);
  }

  void Apply(std::span<const float> in, int64_t cols, const TensorContext& context,
             std::span<float> out, SchemeCounts& counts,
             StoredChunk* stored = nullptr) const override {
    (void)context;
    const size_t n = in.size();
    if (n == 0 || cols <= 0) return;
    const int64_t rows = static_cast<int64_t>(n) / cols;
    const int64_t blocks = BlocksPerRow(cols, kMxBlock);
    // Elements are scaled by 1 / X, then by 2^6 for int8: two exact steps
    // (1 / X alone is at most 2^127; the product of x and 1 / X is exact unless
    // it is below float32's normal range, far below every element's smallest
    // value, where it rounds to the same code 0 either way).
    const float pre = is_int_ ? std::ldexp(1.0f, kMxInt8FractionBits) : 1.0f;
    const float limit = is_int_ ? static_cast<float>(kMxInt8Max) : static_cast<float>(max_elem_);
    const float min_normal = is_int_ ? 0.0f : static_cast<float>(element_.min_normal());

    thread_local std::vector<float> scaled, block_scale;
    thread_local std::vector<uint8_t> bytes;
    scaled.resize(n);
    block_scale.resize(static_cast<size_t>(rows * blocks));
    BlockAbsMax(in, cols, kMxBlock, block_scale);  // amax, then the scale X
    thread_local std::vector<float> multiplier, unscale;
    multiplier.resize(block_scale.size());
    unscale.resize(block_scale.size());
    for (size_t g = 0; g < block_scale.size(); ++g) {
      const int e = ScaleExponent(block_scale[g]);
      block_scale[g] = PowerOfTwo(e);
      multiplier[g] = PowerOfTwo(-e);
      unscale[g] = block_scale[g] / pre;
    }
    const uint64_t clipped =
        ScaleBlocks(in, cols, kMxBlock, multiplier, pre, limit, /*clamp=*/is_int_, scaled);
    if (stored != nullptr) {
      RoundTripSaturating(element_, scaled, out, bytes);
    } else {
      rounder_.Round(scaled, out, {.threads = 1});
    }
    // A decoded element is subnormal exactly when its code is. A value beyond
    // float32 (a block max near FLT_MAX rounded up to the next element value)
    // is returned as +-FLT_MAX.
    const uint64_t subnormal = UnscaleBlocks(in, out, cols, kMxBlock, unscale, min_normal, out);
    counts.clipped += clipped;
    counts.subnormal += subnormal;

    if (stored != nullptr) {  // appended: a tensor pass calls Apply chunk by chunk
      for (size_t i = 0; i < n; ++i) {
        const uint32_t c = CodeAt(element_, bytes, i);
        stored->codes.push_back(is_int_ ? static_cast<int32_t>(static_cast<int8_t>(c & 0xFF))
                                        : static_cast<int32_t>(c));
      }
      stored->scales.insert(stored->scales.end(), block_scale.begin(), block_scale.end());
    }
  }

 private:
  // GPTQ's hold (quant/rounder.h): a block's X is Apply's on the block's
  // values when the column loop reaches it, and each column goes through
  // Apply's steps under it (scale, round saturating, unscale).
  class MxRounder final : public BlockRounder {
   public:
    MxRounder(const MxScheme& scheme, int64_t rows, int64_t cols)
        : BlockRounder(rows, cols, std::min(kMxBlock, cols)),
          scheme_(scheme),
          multiplier_(static_cast<size_t>(rows)),
          unscale_(static_cast<size_t>(rows)) {}

    void Choose(int64_t first, int64_t row0, std::span<const float> values,
                std::span<const float> importance) override {
      (void)importance;
      const StoredChunk stored = scheme_.Stored(values, Width(first), TensorContext{});
      const float pre = scheme_.is_int_ ? std::ldexp(1.0f, kMxInt8FractionBits) : 1.0f;
      for (size_t k = 0; k < stored.scales.size(); ++k) {  // one block per row: X = 2^e
        const float x = stored.scales[k];
        multiplier_[row0 + k] = PowerOfTwo(-FloorLog2(x));
        unscale_[row0 + k] = x / pre;
      }
    }

    void Round(int64_t col, int64_t row0, std::span<const float> in,
               std::span<float> out) override {
      (void)col;
      thread_local std::vector<float> scaled;
      thread_local std::vector<uint8_t> codes;
      scaled.resize(in.size());
      const std::span<const float> multiplier =
          std::span<const float>(multiplier_).subspan(row0, in.size());
      const std::span<const float> unscale =
          std::span<const float>(unscale_).subspan(row0, in.size());
      const bool is_int = scheme_.is_int_;
      const float pre = is_int ? std::ldexp(1.0f, kMxInt8FractionBits) : 1.0f;
      const float limit =
          is_int ? static_cast<float>(kMxInt8Max) : static_cast<float>(scheme_.max_elem_);
      const float min_normal = is_int ? 0.0f : static_cast<float>(scheme_.element_.min_normal());
      (void)ScaleBlocks(in, 1, 1, multiplier, pre, limit, /*clamp=*/is_int, scaled);
      RoundTripSaturating(scheme_.element_, scaled, out, codes);
      (void)UnscaleBlocks(in, out, 1, 1, unscale, min_normal, out);
    }

   private:
    const MxScheme& scheme_;
    std::vector<float> multiplier_, unscale_;  // per row
  };

  Format element_;
  Rounder rounder_;  // element_, saturating
  MxScaleRule rule_;
  bool is_int_;
  double max_elem_;
  int emax_elem_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Scheme>> MakeMxScheme(absl::string_view base,
                                                     const SchemeOptions& options) {
  const MxVariant* variant = nullptr;
  for (const MxVariant& v : kVariants) {
    if (base == v.name || (v.alias[0] != '\0' && base == v.alias)) variant = &v;
  }
  if (variant == nullptr) return absl::NotFoundError(absl::StrCat("not an MX scheme: ", base));

  MxScaleRule rule = MxScaleRule::kFloor;
  for (const auto& [key, value] : options) {
    if (key != "scale") return UnknownOption(base, key, "scale=floor|round-up");
    if (value == "floor") {
      rule = MxScaleRule::kFloor;
    } else if (value == "round-up") {
      rule = MxScaleRule::kRoundUp;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(base, ": scale=", value,
                       " is not an MX scale rule (floor, the OCP default, or round-up)"));
    }
  }
  absl::StatusOr<Format> element = FindFormat(variant->element);
  if (!element.ok()) return element.status();
  std::string name = variant->name;
  if (rule == MxScaleRule::kRoundUp) absl::StrAppend(&name, ":scale=round-up");
  return std::make_unique<MxScheme>(std::move(name), *std::move(element), rule);
}

std::vector<SchemeFamily> MxFamilies() {
  SchemeFamily f;
  f.family = "MX (OCP Microscaling v1.0)";
  f.examples = {"mxfp8", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4", "mxint8"};
  f.rule =
      "blocks of 32 along a row (short last block padded with zeros), one E8M0 scale X = 2^e "
      "each: amax = max |x| over the block's finite elements; e = floor(log2(amax)) - emax_elem "
      "(OCP 6.3; emax_elem = exponent of the element's largest normal: e4m3 8, e5m2 15, e2m3 2, "
      "e3m2 4, e2m1 2, int8 0) or with :scale=round-up e = ceil(log2(amax / max_elem)) (no "
      "clipping); amax = 0 gives e = -127; e clamped to [-127, 127]. Elements: "
      "round-nearest-even(x / X) in the element format (mxfp8 = e4m3, mxfp8_e5m2, mxfp6_e2m3, "
      "mxfp6_e3m2, mxfp4 = e2m1), saturating at max_elem; mxint8: q = clamp(RNE(x / X * 64), "
      "-127, 127), value q / 64 * X. Dequantized: element * X. NaN/Inf pass through. "
      "Bits per weight: element bits + 8/32 (mxfp8, mxint8 8.25; mxfp6 6.25; mxfp4 4.25 "
      "for a 4096-wide row)";
  f.options = ":scale=floor (default, OCP) | round-up";
  return {f};
}

}  // namespace lowp::internal
