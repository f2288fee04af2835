// A floating format (fp8_e4m3fn, fp8_e5m2, ...) with one scale per tensor or
// per row that maps the absmax to the format's largest finite value: the
// "FP8 with a per-tensor / per-channel scale" of FP8 inference stacks.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "kernels/blocks.h"
#include "kernels/convert.h"
#include "kernels/quantize.h"
#include "quant/scheme_families.h"

namespace lowp::internal {
namespace {

// A dequantized value beyond float32's range (a block maximum near FLT_MAX
// rounded up to the next element value) is returned as +-FLT_MAX.
inline float SaturateToFloat(float v) {
  return std::isinf(v) ? std::copysign(std::numeric_limits<float>::max(), v) : v;
}

enum class Granularity { kTensor, kChannel };

// FORMAT-tensor / FORMAT-channel. One scale per tensor (amax = the tensor's
// max |x| over finite elements, from Observe) or per row (the row's):
//   scale = StoreScale(scale_format, amax / max_finite)   (fp32 division, then
//           rounded nearest-even, saturating, to fp32 (default), fp16 or bf16)
//   amax = 0 gives scale 1 (every element is then +-0)
//   code  = RNE(x / scale) in FORMAT, saturating at +-max_finite
//   value = decode(code) * scale
// A stored scale that underflowed to 0 (fp16/bf16, tiny amax) gives +-0 for
// every element, stored as the code of +-0. NaN and +-Inf take no part in
// the scale, are stored as code 0 and come back unchanged. Counts: clipped =
// finite x with |x / scale| > max_finite (a scale rounded down, or saturated
// in fp16); subnormal = nonzero codes with a zero exponent field.
// StoredChunk::scales: one per row (-tensor: the tensor's scale, repeated).
// Storage: rows * cols * bits + (rows or 1) * scale bits.
class ScaledFloatScheme : public Scheme {
 public:
  ScaledFloatScheme(std::string name, Format element, Format scale_format, Granularity granularity)
      : Scheme(std::move(name)),
        element_(std::move(element)),
        scale_format_(std::move(scale_format)),
        granularity_(granularity),
        max_finite_(static_cast<float>(element_.max_finite())),
        rounder_(SaturatingRounder(element_)),
        subnormal_below_(element_.has_subnormals() && element_.mantissa_bits > 0
                             ? static_cast<float>(element_.min_normal())
                             : 0.0f) {}

  uint64_t StorageBits(int64_t rows, int64_t cols) const override {
    const uint64_t r = static_cast<uint64_t>(rows);
    const uint64_t scales = granularity_ == Granularity::kChannel ? r : 1;
    return r * static_cast<uint64_t>(cols) * element_.bits + scales * scale_format_.bits;
  }

  bool NeedsTensorPass() const override { return granularity_ == Granularity::kTensor; }

  float StoredScale(float amax) const {
    if (!(amax > 0)) return 1.0f;
    return StoreScale(scale_format_, amax / max_finite_);
  }

  void Apply(std::span<const float> in, int64_t cols, const TensorContext& context,
             std::span<float> out, SchemeCounts& counts,
             StoredChunk* stored = nullptr) const override {
    const size_t n = in.size();
    if (n == 0 || cols <= 0) return;
    const size_t rows = n / static_cast<size_t>(cols);
    const size_t c = static_cast<size_t>(cols);
    std::vector<float> scales;
    if (granularity_ == Granularity::kTensor) {
      scales.push_back(StoredScale(context.absmax));
    } else {
      scales.resize(rows);
      BlockAbsMax(in, cols, cols, scales);  // each row's amax over its finite elements
      for (float& scale : scales) scale = StoredScale(scale);
    }
    auto row_scale = [&](size_t r) { return scales.size() == 1 ? scales[0] : scales[r]; };
    if (stored == nullptr) return ApplySimd(in, cols, scales, out, counts);

    std::vector<float> scaled(n);
    uint64_t clipped = 0;
    for (size_t r = 0; r < rows; ++r) {
      const float s = row_scale(r);
      for (size_t i = r * c; i < (r + 1) * c; ++i) {
        const float x = in[i];
        if (!std::isfinite(x)) {
          scaled[i] = 0;
        } else if (s == 0) {
          scaled[i] = std::copysign(0.0f, x);
        } else {
          const float v = x / s;
          if (std::fabs(v) > max_finite_) ++clipped;
          scaled[i] = v;
        }
      }
    }

    std::vector<uint8_t> bytes;
    RoundTripSaturating(element_, scaled, out, bytes);

    const uint32_t magnitude_mask = element_.magnitude_mask();
    const uint32_t mantissa_mask = (uint32_t{1} << element_.mantissa_bits) - 1;
    uint64_t subnormal = 0;
    for (size_t r = 0; r < rows; ++r) {
      const float s = row_scale(r);
      for (size_t i = r * c; i < (r + 1) * c; ++i) {
        if (!std::isfinite(in[i])) {
          out[i] = in[i];
          continue;
        }
        out[i] = SaturateToFloat(out[i] * s);
        const uint32_t m = CodeAt(element_, bytes, i) & magnitude_mask;
        if (m != 0 && m <= mantissa_mask && element_.has_subnormals()) ++subnormal;
      }
    }
    counts.clipped += clipped;
    counts.subnormal += subnormal;

    if (stored != nullptr) {  // appended: a tensor pass calls Apply chunk by chunk
      for (size_t i = 0; i < n; ++i) {
        stored->codes.push_back(static_cast<int32_t>(CodeAt(element_, bytes, i)));
      }
      for (size_t r = 0; r < rows; ++r) stored->scales.push_back(row_scale(r));
    }
  }

 private:
  // Apply's rule without the codes, through the block kernels (one block a
  // row): the division, the rounding in one pass (RoundArray), then the
  // product by the scale. A decoded element is subnormal exactly when its
  // code is (a nonzero code with a zero exponent field).
  void ApplySimd(std::span<const float> in, int64_t cols, std::vector<float>& scales,
                 std::span<float> out, SchemeCounts& counts) const {
    const size_t rows = in.size() / static_cast<size_t>(cols);
    if (scales.size() == 1) scales.resize(rows, scales[0]);
    const uint64_t clipped = DivideBlocks(in, cols, cols, scales, max_finite_, out);
    rounder_.Round(out, out, {.threads = 1});
    const uint64_t subnormal = UnscaleBlocks(in, out, cols, cols, scales, subnormal_below_, out);
    counts.clipped += clipped;
    counts.subnormal += subnormal;
  }

  Format element_;
  Format scale_format_;
  Granularity granularity_;
  float max_finite_;
  Rounder rounder_;         // element_, saturating
  float subnormal_below_;   // the smallest normal; 0 without subnormals
};

}  // namespace

absl::StatusOr<std::unique_ptr<Scheme>> MakeScaledFloatScheme(absl::string_view base,
                                                              const SchemeOptions& options) {
  Granularity granularity;
  absl::string_view format_name = base;
  if (absl::ConsumeSuffix(&format_name, "-tensor")) {
    granularity = Granularity::kTensor;
  } else if (absl::ConsumeSuffix(&format_name, "-channel")) {
    granularity = Granularity::kChannel;
  } else {
    return absl::NotFoundError(absl::StrCat("not a scaled float scheme: ", base));
  }
  absl::StatusOr<Format> element = FindFormat(format_name);
  // Integers (int8-channel) and unknown names belong to other families.
  if (!element.ok() || !element->is_float()) {
    return absl::NotFoundError(absl::StrCat("not a scaled float scheme: ", base));
  }
  if (!element->is_signed || !element->has_zero) {
    return absl::InvalidArgumentError(absl::StrCat(
        base, ": ", element->name, " has no zero or no sign; a scaled float scheme needs both"));
  }
  std::string scale_name = "fp32";
  for (const auto& [key, value] : options) {
    if (key != "scale") return UnknownOption(base, key, "scale=fp16|bf16|fp32");
    scale_name = value;
  }
  absl::StatusOr<Format> scale_format = ScaleFormat(scale_name);
  if (!scale_format.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheme '", base, "': ", scale_format.status().message()));
  }
  std::string name =
      absl::StrCat(element->name, granularity == Granularity::kTensor ? "-tensor" : "-channel");
  if (scale_format->name != "fp32") absl::StrAppend(&name, ":scale=", scale_format->name);
  return std::make_unique<ScaledFloatScheme>(std::move(name), *std::move(element),
                                             *std::move(scale_format), granularity);
}

std::vector<SchemeFamily> ScaledFloatFamilies() {
  SchemeFamily f;
  f.family = "scaled float (per tensor / per channel)";
  f.examples = {"fp8_e4m3fn-tensor", "fp8_e4m3fn-channel", "fp8_e5m2-channel:scale=bf16"};
  f.rule =
      "any floating format with one scale per tensor (FORMAT-tensor, amax over the whole tensor, "
      "a first pass) or per row (FORMAT-channel): scale = round_to_scale_format(amax / "
      "max_finite) (fp32 default; amax = 0 gives 1), code = RNE(x / scale) saturating at "
      "+-max_finite, value = decode(code) * scale. NaN/Inf pass through. Bits per weight: "
      "element bits + scale bits per row (channel: 8 + 32/4096 = 8.0078 for fp8 and a 4096-wide "
      "row) or per tensor";
  f.options = ":scale=fp32 (default) | fp16 | bf16";
  return {f};
}

}  // namespace lowp::internal
