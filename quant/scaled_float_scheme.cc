// A floating format (fp8_e4m3fn, fp8_e5m2, ...) with one scale per tensor,
// row, group along a row or 2-D block that maps the block's absmax to the
// format's largest finite value: the FP8 of inference stacks (per tensor /
// per channel: TensorRT-LLM, compressed-tensors, ModelOpt) and of the
// block-scaled checkpoints (DeepSeek-V3, Qwen3-FP8: 128 x 128 weight
// blocks, activations per token in groups of 128).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "kernels/blocks.h"
#include "kernels/convert.h"
#include "kernels/quantize.h"
#include "quant/rounder.h"
#include "quant/scheme_families.h"

namespace lowp::internal {
namespace {

// A dequantized value beyond float32's range (a block maximum near FLT_MAX
// rounded up to the next element value) is returned as +-FLT_MAX.
inline float SaturateToFloat(float v) {
  return std::isinf(v) ? std::copysign(std::numeric_limits<float>::max(), v) : v;
}

// Where a scheme's scales apply: one per tensor, per row, per group of
// `cols` elements along a row, or per 2-D block of `rows` x `cols` (the
// matrix view's rows, a block's last rows and columns short at the edges).
struct ScaleLayout {
  enum Kind { kTensor, kChannel, kGroup, kBlock2D } kind = kChannel;
  int64_t rows = 1;  // kBlock2D
  int64_t cols = 0;  // kGroup, kBlock2D

  // The width of the column blocks a row of `c` elements is cut into.
  int64_t Width(int64_t c) const { return kind == kGroup || kind == kBlock2D ? cols : c; }
  // Rows that share a scale (a 2-D block's height; all for -tensor).
  int64_t Height() const { return kind == kBlock2D ? rows : 1; }
  uint64_t Scales(int64_t r, int64_t c) const {
    const uint64_t blocks_per_row = static_cast<uint64_t>(CeilDiv(c, Width(c)));
    switch (kind) {
      case kTensor: return 1;
      case kChannel: return static_cast<uint64_t>(r);
      case kGroup: return static_cast<uint64_t>(r) * blocks_per_row;
      case kBlock2D: return static_cast<uint64_t>(CeilDiv(r, rows)) * blocks_per_row;
    }
    return 0;
  }
  static int64_t CeilDiv(int64_t a, int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }
};

// FORMAT-tensor / -channel / -gG / -bRxC. Per block of the layout (amax =
// the max |x| over its finite elements; -tensor: over the tensor, from
// Observe):
//   scale = amax / max_finite (one fp32 division), stored rounded
//           nearest-even, saturating, to fp32 (default), fp16 or bf16, or
//           (:scale=ue8m0, DeepSeek-V3.1's scale_fmt) rounded toward +inf
//           to e8m0fnu: the smallest power of two >= it, within 2^-127..2^127
//   amax = 0 gives scale 1 (every element is then +-0)
//   code  = RNE(x / scale) in FORMAT (one fp32 division), saturating at
//           +-max_finite
//   value = decode(code) * scale
// A stored scale that underflowed to 0 (fp16/bf16, tiny amax) gives +-0 for
// every element, stored as the code of +-0. NaN and +-Inf take no part in
// the scale, are stored as code 0 and come back unchanged. Counts: clipped =
// finite x with |x / scale| > max_finite (a scale rounded down, or saturated
// in fp16); subnormal = nonzero codes with a zero exponent field.
// StoredChunk::scales: one per row (-channel; -tensor: the tensor's scale
// repeated), per group row by row (-gG), per 2-D block, block row by block
// row (-bRxC; Apply's chunks start at multiples of R rows: ChunkRows).
// Storage: elements * bits + scales * scale bits.
class ScaledFloatScheme : public Scheme {
 public:
  ScaledFloatScheme(std::string name, Format element, Format scale_format,
                    Rounding scale_rounding, ScaleLayout layout)
      : Scheme(std::move(name)),
        element_(std::move(element)),
        scale_format_(std::move(scale_format)),
        scale_rounding_(scale_rounding),
        layout_(layout),
        max_finite_(static_cast<float>(element_.max_finite())),
        rounder_(SaturatingRounder(element_)),
        subnormal_below_(element_.has_subnormals() && element_.mantissa_bits > 0
                             ? static_cast<float>(element_.min_normal())
                             : 0.0f) {}

  uint64_t StorageBits(int64_t rows, int64_t cols) const override {
    return static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols) * element_.bits +
           layout_.Scales(rows, cols) * scale_format_.bits;
  }

  int64_t ChunkRows(int64_t cols) const override {
    (void)cols;
    return layout_.Height();
  }

  bool NeedsTensorPass() const override { return layout_.kind == ScaleLayout::kTensor; }

  CodeLayout Codes() const override {
    CodeLayout c;
    c.kind = CodeLayout::Kind::kScaledFloat;
    c.per_tensor = layout_.kind == ScaleLayout::kTensor;
    c.block_rows = layout_.Height();
    c.block_cols = layout_.kind == ScaleLayout::kGroup || layout_.kind == ScaleLayout::kBlock2D
                       ? layout_.cols
                       : 0;
    c.element = element_.name;
    c.scale = scale_format_.name;
    return c;
  }

  absl::StatusOr<std::unique_ptr<BlockRounder>> BlockRounderFor(
      int64_t rows, int64_t cols, const TensorContext& context) const override {
    return std::make_unique<ScaledFloatRounder>(*this, rows, cols, context);
  }

  float StoredScale(float amax) const {
    if (!(amax > 0)) return 1.0f;
    return StoreScale(scale_format_, amax / max_finite_, scale_rounding_);
  }

  void Apply(std::span<const float> in, int64_t cols, const TensorContext& context,
             std::span<float> out, SchemeCounts& counts,
             StoredChunk* stored = nullptr) const override {
    const size_t n = in.size();
    if (n == 0 || cols <= 0) return;
    const int64_t rows = static_cast<int64_t>(n) / cols;
    const int64_t width = layout_.Width(cols);
    const size_t per_row = static_cast<size_t>(ScaleLayout::CeilDiv(cols, width));
    // The scale of every (row, column block), whatever the layout.
    std::vector<float> scales(static_cast<size_t>(rows) * per_row);
    if (layout_.kind == ScaleLayout::kTensor) {
      std::fill(scales.begin(), scales.end(), StoredScale(context.absmax));
    } else {
      BlockAbsMax(in, cols, width, scales);  // over the finite elements of each row's blocks
      const int64_t height = layout_.Height();
      for (int64_t r0 = 0; r0 < rows; r0 += height) {  // a 2-D block's amax: its rows' max
        float* first = &scales[static_cast<size_t>(r0) * per_row];
        const int64_t r1 = std::min(rows, r0 + height);
        for (int64_t r = r0 + 1; r < r1; ++r) {
          const float* row = &scales[static_cast<size_t>(r) * per_row];
          for (size_t j = 0; j < per_row; ++j) first[j] = std::max(first[j], row[j]);
        }
        for (size_t j = 0; j < per_row; ++j) first[j] = StoredScale(first[j]);
        for (int64_t r = r0 + 1; r < r1; ++r) {
          std::copy(first, first + per_row, &scales[static_cast<size_t>(r) * per_row]);
        }
      }
    }
    if (stored == nullptr) return ApplySimd(in, cols, width, scales, out, counts);

    const size_t c = static_cast<size_t>(cols), w = static_cast<size_t>(width);
    auto scale_of = [&](size_t i) { return scales[i / c * per_row + i % c / w]; };
    std::vector<float> scaled(n);
    uint64_t clipped = 0;
    for (size_t i = 0; i < n; ++i) {
      const float x = in[i], s = scale_of(i);
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

    std::vector<uint8_t> bytes;
    RoundTripSaturating(element_, scaled, out, bytes);

    const uint32_t magnitude_mask = element_.magnitude_mask();
    const uint32_t mantissa_mask = (uint32_t{1} << element_.mantissa_bits) - 1;
    uint64_t subnormal = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!std::isfinite(in[i])) {
        out[i] = in[i];
        continue;
      }
      out[i] = SaturateToFloat(out[i] * scale_of(i));
      const uint32_t m = CodeAt(element_, bytes, i) & magnitude_mask;
      if (m != 0 && m <= mantissa_mask && element_.has_subnormals()) ++subnormal;
    }
    counts.clipped += clipped;
    counts.subnormal += subnormal;

    // Appended: a tensor pass calls Apply chunk by chunk.
    for (size_t i = 0; i < n; ++i) {
      stored->codes.push_back(static_cast<int32_t>(CodeAt(element_, bytes, i)));
    }
    switch (layout_.kind) {
      case ScaleLayout::kTensor:
      case ScaleLayout::kChannel:
        for (int64_t r = 0; r < rows; ++r) stored->scales.push_back(scales[r * per_row]);
        break;
      case ScaleLayout::kGroup:
        stored->scales.insert(stored->scales.end(), scales.begin(), scales.end());
        break;
      case ScaleLayout::kBlock2D:
        for (int64_t r = 0; r < rows; r += layout_.rows) {
          const auto row = scales.begin() + r * static_cast<int64_t>(per_row);
          stored->scales.insert(stored->scales.end(), row, row + static_cast<int64_t>(per_row));
        }
        break;
    }
  }

 private:
  // GPTQ's hold (quant/rounder.h): a block's scales are Apply's on the
  // block's values when the column loop reaches it (-tensor: the tensor's,
  // from Observe), and each column is rounded as Apply rounds an element
  // under that scale: x / scale, nearest-even saturating in the element
  // format, times the scale.
  class ScaledFloatRounder final : public BlockRounder {
   public:
    ScaledFloatRounder(const ScaledFloatScheme& scheme, int64_t rows, int64_t cols,
                       const TensorContext& context)
        : BlockRounder(rows, cols, std::min(scheme.layout_.Width(cols), cols),
                       scheme.layout_.Height()),
          scheme_(scheme),
          context_(context),
          row_scale_(static_cast<size_t>(rows)) {
      KeepParameters(false);
    }

    void Choose(int64_t first, int64_t row0, std::span<const float> values,
                std::span<const float> importance) override {
      (void)importance;
      const int64_t n = Width(first);
      const StoredChunk stored = scheme_.Stored(values, n, context_);
      Record(first, row0, stored);
      // One scale per row of this block (a 2-D block's for each of its rows).
      const int64_t height = scheme_.layout_.Height();
      for (int64_t k = 0; k < static_cast<int64_t>(values.size()) / n; ++k) {
        row_scale_[static_cast<size_t>(row0 + k)] = stored.scales[static_cast<size_t>(k / height)];
      }
    }

    // The whole row shares one scale under -tensor and -channel: any
    // column order gives the same blocks.
    bool Permutable() const override {
      return scheme_.layout_.kind == ScaleLayout::kTensor ||
             scheme_.layout_.kind == ScaleLayout::kChannel;
    }

    void Round(int64_t col, int64_t row0, std::span<const float> in,
               std::span<float> out) override {
      (void)col;
      thread_local std::vector<float> scaled;
      thread_local std::vector<uint8_t> codes;
      scaled.resize(in.size());
      const float* row_scale = row_scale_.data() + row0;
      for (size_t r = 0; r < in.size(); ++r) {
        const float s = row_scale[r];
        scaled[r] = s == 0 ? std::copysign(0.0f, in[r]) : in[r] / s;
      }
      RoundTripSaturating(scheme_.element_, scaled, out, codes);
      for (size_t r = 0; r < in.size(); ++r) out[r] = SaturateToFloat(out[r] * row_scale[r]);
    }

   private:
    const ScaledFloatScheme& scheme_;
    TensorContext context_;
    std::vector<float> row_scale_;  // per row
  };

  // Apply's rule without the codes, through the block kernels: the division,
  // the rounding in one pass (RoundArray), then the product by the scale. A
  // decoded element is subnormal exactly when its code is (a nonzero code
  // with a zero exponent field).
  void ApplySimd(std::span<const float> in, int64_t cols, int64_t width,
                 std::span<const float> scales, std::span<float> out,
                 SchemeCounts& counts) const {
    const uint64_t clipped = DivideBlocks(in, cols, width, scales, max_finite_, out);
    rounder_.Round(out, out, {.threads = 1});
    const uint64_t subnormal = UnscaleBlocks(in, out, cols, width, scales, subnormal_below_, out);
    counts.clipped += clipped;
    counts.subnormal += subnormal;
  }

  Format element_;
  Format scale_format_;
  Rounding scale_rounding_;  // nearest-even; toward +inf for ue8m0
  ScaleLayout layout_;
  float max_finite_;
  Rounder rounder_;         // element_, saturating
  float subnormal_below_;   // the smallest normal; 0 without subnormals
};

// "-tensor", "-channel", "-g128", "-b128x128" at the end of `base`, removed
// from it; nullopt when none is there. A size out of range is reported in
// `error` (the caller first makes sure the rest names a floating format: an
// integer scheme's "int4-g0" is not this family's to refuse).
constexpr int64_t kMaxBlockSide = int64_t{1} << 20;
std::optional<ScaleLayout> ConsumeLayout(absl::string_view& base, std::string& error) {
  ScaleLayout layout;
  if (absl::ConsumeSuffix(&base, "-tensor")) {
    layout.kind = ScaleLayout::kTensor;
    return layout;
  }
  if (absl::ConsumeSuffix(&base, "-channel")) {
    layout.kind = ScaleLayout::kChannel;
    return layout;
  }
  const size_t dash = base.rfind('-');
  if (dash == absl::string_view::npos) return std::nullopt;
  absl::string_view tail = base.substr(dash + 1);
  if (absl::ConsumePrefix(&tail, "g")) {
    if (!absl::SimpleAtoi(tail, &layout.cols)) return std::nullopt;
    if (layout.cols < 1 || layout.cols > kMaxBlockSide) {
      error = "the group size must be 1 to 1048576";
    }
    layout.kind = ScaleLayout::kGroup;
  } else if (absl::ConsumePrefix(&tail, "b")) {
    const size_t x = tail.find('x');
    if (x == absl::string_view::npos || !absl::SimpleAtoi(tail.substr(0, x), &layout.rows) ||
        !absl::SimpleAtoi(tail.substr(x + 1), &layout.cols)) {
      return std::nullopt;
    }
    if (layout.rows < 1 || layout.cols < 1 || layout.rows > kMaxBlockSide ||
        layout.cols > kMaxBlockSide) {
      error = "a block's sides must be 1 to 1048576 (-bRxC, e.g. -b128x128)";
    }
    layout.kind = ScaleLayout::kBlock2D;
  } else {
    return std::nullopt;
  }
  base = base.substr(0, dash);
  return layout;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Scheme>> MakeScaledFloatScheme(absl::string_view base,
                                                              const SchemeOptions& options) {
  absl::string_view format_name = base;
  std::string layout_error;
  const std::optional<ScaleLayout> layout = ConsumeLayout(format_name, layout_error);
  if (!layout) return absl::NotFoundError(absl::StrCat("not a scaled float scheme: ", base));
  absl::StatusOr<Format> element = FindFormat(format_name);
  // Integers (int8-channel, int4-g128) and unknown names belong to other families.
  if (!element.ok() || !element->is_float()) {
    return absl::NotFoundError(absl::StrCat("not a scaled float scheme: ", base));
  }
  if (!layout_error.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("scheme '", base, "': ", layout_error));
  }
  if (!element->is_signed || !element->has_zero) {
    return absl::InvalidArgumentError(absl::StrCat(
        base, ": ", element->name, " has no zero or no sign; a scaled float scheme needs both"));
  }
  std::string scale_name = "fp32";
  for (const auto& [key, value] : options) {
    if (key != "scale") return UnknownOption(base, key, "scale=fp32|fp16|bf16|ue8m0");
    scale_name = value;
  }
  Rounding scale_rounding = Rounding::kNearestEven;
  absl::StatusOr<Format> scale_format = FindFormat("e8m0fnu");
  if (scale_name == "ue8m0") {
    scale_rounding = Rounding::kTowardPositive;
  } else {
    scale_format = ScaleFormat(scale_name);
    if (!scale_format.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scheme '", base, "': ", scale_format.status().message(), ", ue8m0"));
    }
  }
  std::string name = element->name;
  switch (layout->kind) {
    case ScaleLayout::kTensor: absl::StrAppend(&name, "-tensor"); break;
    case ScaleLayout::kChannel: absl::StrAppend(&name, "-channel"); break;
    case ScaleLayout::kGroup: absl::StrAppend(&name, "-g", layout->cols); break;
    case ScaleLayout::kBlock2D: absl::StrAppend(&name, "-b", layout->rows, "x", layout->cols); break;
  }
  if (scale_name != "fp32") absl::StrAppend(&name, ":scale=", scale_name);
  return std::make_unique<ScaledFloatScheme>(std::move(name), *std::move(element),
                                             *std::move(scale_format), scale_rounding, *layout);
}

std::vector<SchemeFamily> ScaledFloatFamilies() {
  SchemeFamily f;
  f.family = "scaled float (per tensor, channel, group or 2-D block)";
  f.examples = {"fp8_e4m3fn-tensor", "fp8_e4m3fn-channel", "fp8_e4m3fn-g128",
                "fp8_e4m3fn-b128x128", "fp8_e4m3fn-b128x128:scale=ue8m0",
                "fp8_e5m2-channel:scale=bf16"};
  f.rule =
      "any floating format with one scale per tensor (FORMAT-tensor, amax over the whole tensor, "
      "a first pass), per row (FORMAT-channel), per group of G elements along a row "
      "(FORMAT-gG: per-token groups of activations, DeepSeek-V3's act_quant with G = 128) or per "
      "2-D block of R rows x C columns (FORMAT-bRxC: DeepSeek-V3's and Qwen3-FP8's "
      "weight_block_size [128, 128]); a row's last group and the matrix's last block rows and "
      "columns are short. scale = amax / max_finite in fp32 (amax over the block's finite "
      "elements; 0 gives 1), stored rounded nearest-even to the scale format (fp32 default: "
      "DeepSeek's weight_scale_inv and compressed-tensors' weight_scale) or, with scale=ue8m0, "
      "up to the next power of two (DeepSeek-V3.1's scale_fmt ue8m0); code = RNE(x / scale) "
      "saturating at +-max_finite, value = decode(code) * scale. NaN/Inf pass through. Bits per "
      "weight: element bits + scale bits per block (fp8, 4096-wide rows: channel 8.0078, g128 "
      "8.25, b128x128 8.002)";
  f.options = ":scale=fp32 (default) | fp16 | bf16 | ue8m0";
  return {f};
}

}  // namespace lowp::internal
