// Integer schemes: N-bit codes times a scale per tensor, per row (channel) or
// per group of G elements along a row; symmetric (absmax) or asymmetric
// (min/max with an integer zero point).
#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "kernels/quantize.h"
#include "quant/rounder.h"
#include "quant/scheme_families.h"

namespace lowp::internal {
namespace {

enum class Granularity { kTensor, kChannel, kGroup };

// AWQ's clip search grid (auto_clip: max_shrink 0.5, n_grid 20): the range is
// scaled by 1 - k/20 for k = 0..9 and the ratio with the least squared error
// of the block wins (the larger ratio on a tie).
constexpr int kClipSteps = 10;
float ClipRatio(int k) { return 1.0f - static_cast<float>(k) / 20.0f; }

// Symmetric: qmax = 2^(N-1) - 1, codes in [-qmax, qmax],
//   scale = store(amax / qmax), q = clamp(round_half_even(x / scale)), x' = q * scale.
// Asymmetric: the range [lo, hi] = [min(0, min x), max(0, max x)] (it holds
// zero, so zero is exact, as PyTorch's observers do), qmax = 2^N - 1,
//   scale = store((hi - lo) / qmax), zero = clamp(round_half_even(-lo / scale), 0, qmax),
//   q = clamp(round_half_even(x / scale) + zero, 0, qmax), x' = (q - zero) * scale.
// store() rounds to the scale format (fp16 by default) nearest-even,
// saturating; a stored scale of 0 (an all-zero block, or one whose scale
// underflows) makes the block 0. amax, min and max are over the finite
// elements of the block (the row, the tensor).
class IntScheme : public Scheme {
 public:
  IntScheme(std::string name, int bits, bool asymmetric, Granularity granularity, int64_t group,
            Format scale_format, bool clip_mse)
      : Scheme(std::move(name)),
        bits_(bits),
        asymmetric_(asymmetric),
        granularity_(granularity),
        group_(group),
        scale_format_(std::move(scale_format)),
        clip_mse_(clip_mse) {
    params_.qmax = asymmetric ? (1 << bits) - 1 : (1 << (bits - 1)) - 1;
    params_.qmin = asymmetric ? 0 : -params_.qmax;
  }

  uint64_t StorageBits(int64_t rows, int64_t cols) const override {
    const uint64_t elements = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols);
    const uint64_t per_scale = scale_format_.bits + (asymmetric_ ? bits_ : 0);
    uint64_t scales = 1;
    if (granularity_ == Granularity::kChannel) scales = rows;
    if (granularity_ == Granularity::kGroup) scales = rows * BlocksPerRow(cols, group_);
    return elements * bits_ + scales * per_scale;
  }

  bool NeedsTensorPass() const override { return granularity_ == Granularity::kTensor; }

  CodeLayout Codes() const override {
    CodeLayout c;
    c.kind = CodeLayout::Kind::kInt;
    c.bits = bits_;
    c.asymmetric = asymmetric_;
    c.per_tensor = granularity_ == Granularity::kTensor;
    c.block_cols = granularity_ == Granularity::kGroup ? group_ : 0;
    c.scale = scale_format_.name;
    return c;
  }

  absl::StatusOr<std::unique_ptr<BlockRounder>> BlockRounderFor(
      int64_t rows, int64_t cols, const TensorContext& context) const override {
    return std::make_unique<IntRounder>(*this, rows, cols, context);
  }

  void Apply(std::span<const float> in, int64_t cols, const TensorContext& context,
             std::span<float> out, SchemeCounts& counts, StoredChunk* stored) const override {
    const int64_t block = granularity_ == Granularity::kGroup ? group_ : cols;
    const size_t blocks = in.size() / cols * BlocksPerRow(cols, block);
    Blocks b{std::vector<float>(blocks), std::vector<float>(blocks), std::vector<float>(blocks),
             std::vector<float>(asymmetric_ ? blocks : 0)};
    if (granularity_ == Granularity::kTensor) {
      std::fill(b.lo.begin(), b.lo.end(), asymmetric_ ? context.min : -context.absmax);
      std::fill(b.hi.begin(), b.hi.end(), asymmetric_ ? context.max : context.absmax);
    } else if (asymmetric_) {
      BlockMinMax(in, cols, block, b.lo, b.hi);
      for (size_t i = 0; i < blocks; ++i) {
        b.lo[i] = std::min(b.lo[i], 0.0f);
        b.hi[i] = std::max(b.hi[i], 0.0f);
      }
    } else {
      BlockAbsMax(in, cols, block, b.hi);
      for (size_t i = 0; i < blocks; ++i) b.lo[i] = -b.hi[i];
    }
    std::vector<float> ratio(blocks, 1.0f);
    if (clip_mse_) ChooseClip(in, cols, block, b, ratio, out);
    SetScales(b, ratio);
    std::vector<int16_t> codes(stored != nullptr ? in.size() : 0);
    counts.clipped += QuantizeIntBlocks(in, cols, block, b.scale, b.zero, params_, out, codes);
    if (stored != nullptr) {
      stored->codes.insert(stored->codes.end(), codes.begin(), codes.end());
      stored->scales.insert(stored->scales.end(), b.scale.begin(), b.scale.end());
      stored->offsets.insert(stored->offsets.end(), b.zero.begin(), b.zero.end());
    }
  }

 private:
  struct Blocks {
    std::vector<float> lo, hi;  // each block's range
    std::vector<float> scale;   // as stored
    std::vector<float> zero;    // asymmetric only
  };

  // Each block's scale (and zero point) from its range shrunk by its ratio.
  void SetScales(Blocks& b, std::span<const float> ratio) const {
    const float qmax = static_cast<float>(params_.qmax);
    for (size_t i = 0; i < b.scale.size(); ++i) {
      const float lo = b.lo[i] * ratio[i], hi = b.hi[i] * ratio[i];
      if (!asymmetric_) {
        b.scale[i] = StoreScale(scale_format_, hi / qmax);
        continue;
      }
      const float scale = StoreScale(scale_format_, (hi - lo) / qmax);
      b.scale[i] = scale;
      b.zero[i] = scale == 0 ? 0 : std::clamp(std::nearbyint(-lo / scale), 0.0f, qmax);
    }
  }

  // The clip search: per block, the ratio of kClipSteps whose quantization
  // has the least sum of squared errors over the block's finite elements.
  void ChooseClip(std::span<const float> in, int64_t cols, int64_t block, Blocks& b,
                  std::span<float> best_ratio, std::span<float> scratch) const {
    const size_t blocks = b.scale.size();
    const int64_t per_row = BlocksPerRow(cols, block);
    std::vector<double> best_error(blocks, std::numeric_limits<double>::infinity());
    std::vector<float> ratio(blocks);
    std::vector<double> error(blocks);
    for (int k = 0; k < kClipSteps; ++k) {
      std::fill(ratio.begin(), ratio.end(), ClipRatio(k));
      SetScales(b, ratio);
      QuantizeIntBlocks(in, cols, block, b.scale, b.zero, params_, scratch);
      std::fill(error.begin(), error.end(), 0.0);
      for (size_t i = 0; i < in.size(); ++i) {
        if (!std::isfinite(in[i])) continue;
        const int64_t row = static_cast<int64_t>(i) / cols, col = static_cast<int64_t>(i) % cols;
        const double e = static_cast<double>(scratch[i]) - in[i];
        error[row * per_row + col / block] += e * e;
      }
      for (size_t i = 0; i < blocks; ++i) {
        if (error[i] < best_error[i]) {
          best_error[i] = error[i];
          best_ratio[i] = ratio[i];
        }
      }
    }
  }

  // GPTQ's rounder: Choose is Apply on the block (its scale and zero point,
  // the clip search included), Round the scheme's element rule with them.
  class IntRounder final : public BlockRounder {
   public:
    IntRounder(const IntScheme& scheme, int64_t rows, int64_t cols, const TensorContext& context)
        : BlockRounder(
              rows, cols,
              scheme.granularity_ == Granularity::kGroup ? std::min(scheme.group_, cols) : cols),
          scheme_(scheme),
          context_(context),
          scale_(static_cast<size_t>(rows)),
          zero_(static_cast<size_t>(scheme.asymmetric_ ? rows : 0)) {
      KeepParameters(scheme.asymmetric_);
    }

    void Choose(int64_t first, int64_t row0, std::span<const float> values,
                std::span<const float> importance) override {
      (void)importance;
      const StoredChunk stored = scheme_.Stored(values, Width(first), context_);
      Record(first, row0, stored);
      std::copy(stored.scales.begin(), stored.scales.end(), scale_.begin() + row0);
      if (!zero_.empty()) {  // asymmetric
        std::copy(stored.offsets.begin(), stored.offsets.end(), zero_.begin() + row0);
      }
    }

    bool Permutable() const override { return true; }

    void Round(int64_t col, int64_t row0, std::span<const float> in,
               std::span<float> out) override {
      (void)col;
      const std::span<const float> zero =
          zero_.empty() ? std::span<const float>() : std::span<const float>(zero_).subspan(row0, in.size());
      QuantizeIntBlocks(in, 1, 1, std::span<const float>(scale_).subspan(row0, in.size()), zero,
                        scheme_.params_, out);
    }

   private:
    const IntScheme& scheme_;
    TensorContext context_;
    std::vector<float> scale_, zero_;
  };

  int bits_;
  bool asymmetric_;
  Granularity granularity_;
  int64_t group_;
  Format scale_format_;
  bool clip_mse_;
  IntQuantParams params_;
};

// Parses "int8", "int4-channel", "int4-g128", "uint4-g128-asym", "uint8-asym",
// "uint8-channel-asym" into bits, signedness, granularity and group.
struct IntName {
  int bits = 0;
  bool asymmetric = false;
  Granularity granularity = Granularity::kTensor;
  int64_t group = 0;
};
std::optional<IntName> ParseIntName(absl::string_view base) {
  IntName name;
  absl::string_view rest = base;
  const bool unsigned_codes = absl::ConsumePrefix(&rest, "uint");
  if (!unsigned_codes && !absl::ConsumePrefix(&rest, "int")) return std::nullopt;
  name.asymmetric = absl::ConsumeSuffix(&rest, "-asym");
  if (unsigned_codes != name.asymmetric) return std::nullopt;  // uint needs -asym, int not
  const size_t dash = rest.find('-');
  if (!absl::SimpleAtoi(rest.substr(0, dash), &name.bits)) return std::nullopt;
  if (dash != absl::string_view::npos) {
    absl::string_view tail = rest.substr(dash + 1);
    if (tail == "channel") {
      name.granularity = Granularity::kChannel;
    } else if (absl::ConsumePrefix(&tail, "g") && absl::SimpleAtoi(tail, &name.group)) {
      name.granularity = Granularity::kGroup;
    } else {
      return std::nullopt;
    }
  }
  return name;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Scheme>> MakeIntScheme(absl::string_view base,
                                                      const SchemeOptions& options) {
  std::optional<IntName> parsed = ParseIntName(base);
  if (!parsed) return absl::NotFoundError("");
  if (parsed->bits < 2 || parsed->bits > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheme '", base, "': integer schemes take 2 to 8 bits"));
  }
  if (parsed->granularity == Granularity::kGroup &&
      (parsed->group < 2 || parsed->group > (int64_t{1} << 20))) {
    return absl::InvalidArgumentError(
        absl::StrCat("scheme '", base, "': group size must be 2 to 1048576"));
  }
  Format scale_format = *FindFormat("fp16");
  bool clip_mse = false;
  std::string name(base);
  for (const auto& [key, value] : options) {
    if (key == "scale") {
      absl::StatusOr<Format> format = ScaleFormat(value);
      if (!format.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("scheme '", base, "': ", format.status().message()));
      }
      scale_format = *format;
      if (value != "fp16") absl::StrAppend(&name, ":scale=", value);
    } else if (key == "clip") {
      if (value != "mse" && value != "none") {
        return absl::InvalidArgumentError(
            absl::StrCat("scheme '", base, "': clip must be mse or none, not '", value, "'"));
      }
      clip_mse = value == "mse";
    } else {
      return UnknownOption(base, key, "scale, clip");
    }
  }
  if (clip_mse) {
    if (parsed->granularity == Granularity::kTensor) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scheme '", base, "': clip=mse searches per row or group; use -channel or -gN"));
    }
    absl::StrAppend(&name, ":clip=mse");
  }
  return std::unique_ptr<Scheme>(new IntScheme(std::move(name), parsed->bits, parsed->asymmetric,
                                               parsed->granularity, parsed->group,
                                               std::move(scale_format), clip_mse));
}

std::vector<SchemeFamily> IntFamilies() {
  return {
      {"integer, symmetric",
       {"int8", "int8-channel", "int4-g32", "int4-g64", "int4-g128", "int4-channel"},
       "N-bit codes (N = 2..8) with one scale per tensor (intN), per row (intN-channel) or "
       "per group of G elements along a row (intN-gG; a row's last group may be short). "
       "qmax = 2^(N-1) - 1; scale = store(amax / qmax) with amax = max |x| over the block's "
       "finite elements and store() rounding to the scale format (fp16 unless :scale=) "
       "nearest-even, saturating; q = clamp(round_half_even(x / scale), -qmax, qmax) "
       "(one float32 division); x' = q * scale; a stored scale of 0 makes the block 0. "
       "Bits per weight: N + scale bits / G (per row: / cols; per tensor: / elements).",
       "scale=fp16|bf16|fp32, clip=mse (channel and group schemes)"},
      {"integer, asymmetric",
       {"uint4-g128-asym", "uint4-g64-asym", "uint8-asym", "uint8-channel-asym"},
       "N-bit unsigned codes with a scale and an integer zero point per tensor, row or group. "
       "The range [lo, hi] = [min(0, min x), max(0, max x)] over the block's finite elements "
       "(it holds 0, so 0 is exact); qmax = 2^N - 1; scale = store((hi - lo) / qmax); "
       "zero = clamp(round_half_even(-lo / scale), 0, qmax); "
       "q = clamp(round_half_even(x / scale) + zero, 0, qmax); x' = (q - zero) * scale. "
       "Bits per weight: N + (scale bits + N) / G.",
       "scale=fp16|bf16|fp32, clip=mse (channel and group schemes)"},
      {"integer, MSE-optimal clipping (:clip=mse)",
       {"int4-g128:clip=mse", "uint4-g128-asym:clip=mse", "int8-channel:clip=mse"},
       "The block's range is shrunk by r = 1 - k/20 for k = 0..9 (AWQ's auto_clip grid) and "
       "the r whose quantization has the least sum of squared errors over the block wins (the "
       "larger r on a tie); elements beyond the shrunk range clip. Ten times the work.",
       ""},
  };
}

}  // namespace lowp::internal
