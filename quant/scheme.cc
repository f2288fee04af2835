// Scheme names and the pieces every family shares: the ":KEY=VALUE" options,
// scale storage, and the dispatch of a name to the family that knows it.
#include "quant/scheme.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "kernels/convert.h"
#include "kernels/quantize.h"
#include "quant/calibration.h"
#include "quant/rounder.h"
#include "quant/scheme_families.h"

namespace lowp {

std::span<const float> TensorContext::ImportanceOfRow(int64_t row, int64_t cols) const {
  if (importance == nullptr || importance->empty() || cols <= 0) return {};
  const int64_t matrix = rows_per_matrix > 0 ? row / rows_per_matrix : 0;
  const size_t at = static_cast<size_t>(matrix * cols);
  if (at + static_cast<size_t>(cols) > importance->size()) return {};
  return std::span<const float>(*importance).subspan(at, static_cast<size_t>(cols));
}

void TensorContext::Merge(const TensorContext& other) {
  absmax = std::max(absmax, other.absmax);
  min = std::min(min, other.min);
  max = std::max(max, other.max);
  block_absmax_sum += other.block_absmax_sum;
  block_count += other.block_count;
}

double Scheme::BitsPerWeight(int64_t rows, int64_t cols) const {
  const double elements = static_cast<double>(rows) * static_cast<double>(cols);
  return elements == 0 ? 0 : static_cast<double>(StorageBits(rows, cols)) / elements;
}

absl::StatusOr<std::unique_ptr<BlockRounder>> Scheme::BlockRounderFor(
    int64_t rows, int64_t cols, const TensorContext& context) const {
  (void)rows, (void)cols, (void)context;
  return absl::InvalidArgumentError(absl::StrCat(
      "scheme '", name_, "' does not choose its codes one element at a time once a block's "
      "scales are set, so GPTQ cannot round it; GPTQ takes the integer schemes, the scaled "
      "floats (fp8_e4m3fn-channel, fp4_e2m1fn-g32, ...), mx*, nvfp4, nf4 and llama.cpp's q4_0, "
      "q4_1, q5_0, q5_1, q8_0, q2_K..q6_K, iq4_nl, iq4_xs, ggml-mxfp4 and ggml-nvfp4"));
}

StoredChunk Scheme::Stored(std::span<const float> in, int64_t cols,
                           const TensorContext& context) const {
  StoredChunk stored;
  SchemeCounts counts;
  std::vector<float> out(in.size());
  Apply(in, cols, context, out, counts, &stored);
  return stored;
}

void Scheme::Observe(std::span<const float> in, int64_t cols, TensorContext& context) const {
  (void)cols;
  if (in.empty()) return;
  // The chunk as one block: min and max over the finite elements (0 when
  // none) by the SIMD kernel, in one pass; max |x| is the larger of |min|
  // and |max|.
  const int64_t n = static_cast<int64_t>(in.size());
  float lo = 0, hi = 0;
  BlockMinMax(in, n, n, {&lo, 1}, {&hi, 1});
  const float absmax = std::max(std::fabs(lo), std::fabs(hi));
  context.absmax = std::max(context.absmax, absmax);
  context.min = std::min(context.min, lo);  // both start at 0
  context.max = std::max(context.max, hi);
}

namespace internal {

absl::StatusOr<Format> ScaleFormat(absl::string_view name) {
  if (name == "fp16" || name == "bf16" || name == "fp32") return FindFormat(name);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown scale format '", name, "'; valid: fp16, bf16, fp32"));
}

float StoreScale(const Format& format, float scale, Rounding rounding) {
  ConvertOptions options;
  options.rounding = rounding;
  options.overflow = Overflow::kSaturate;
  return DecodeToFloat32(format, EncodeFloat32(format, scale, options));
}

void RoundTripSaturating(const Format& format, std::span<const float> in, std::span<float> out,
                         std::vector<uint8_t>& codes) {
  ConvertOptions options;
  options.overflow = Overflow::kSaturate;
  RunOptions run;
  run.threads = 1;
  codes.resize(StorageBytes(format, in.size()));
  absl::Status status = EncodeArray(format, in, codes, options, run);
  if (status.ok()) status = DecodeArray(format, codes, out, run);
  // Saturation is valid for every format and the sizes match: no error is
  // possible; were one to occur, the values are unmistakably wrong.
  if (!status.ok()) std::fill(out.begin(), out.end(), std::numeric_limits<float>::quiet_NaN());
}

Rounder SaturatingRounder(const Format& format) {
  ConvertOptions options;
  options.overflow = Overflow::kSaturate;
  // Saturation is valid for every format.
  return *Rounder::Make(format, options);
}

absl::Status UnknownOption(absl::string_view base, absl::string_view key, absl::string_view valid) {
  return absl::InvalidArgumentError(absl::StrCat("scheme '", base, "' has no option '", key,
                                                 "'; valid: ", valid.empty() ? "none" : valid));
}

}  // namespace internal

namespace {

constexpr internal::SchemeFactory kFactories[] = {
    internal::MakeRecipe,      internal::MakeGgmlScheme,        internal::MakeGgmlCodecScheme,   internal::MakeNf4Scheme,         internal::MakeMxScheme,
    internal::MakeNvfp4Scheme, internal::MakeScaledFloatScheme, internal::MakeIntScheme,
    internal::MakeCastScheme,
};

}  // namespace

absl::StatusOr<std::unique_ptr<Scheme>> ParseScheme(absl::string_view name) {
  // Before splitting: absl::StrSplit gives no piece at all (not one empty
  // piece) for a null string_view.
  if (name.empty()) return absl::InvalidArgumentError("empty scheme name");
  std::vector<std::string> parts = absl::StrSplit(name, ':');
  const std::string base = parts[0];
  if (base.empty()) return absl::InvalidArgumentError("empty scheme name");
  internal::SchemeOptions options;
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t eq = parts[i].find('=');
    std::string key = parts[i].substr(0, eq);
    std::string value = eq == std::string::npos ? "" : parts[i].substr(eq + 1);
    if (key.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("scheme '", name, "': empty option"));
    }
    if (IsCalibrationOption(key)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scheme '", name, "': ':", key, "' calibrates the scheme on the inputs a model's "
          "layers see, so it is taken where a model runs: lowp eval's --weights (lowp.eval's weights), "
          "not here"));
    }
    for (const auto& [seen, unused] : options) {
      if (seen == key) {
        return absl::InvalidArgumentError(
            absl::StrCat("scheme '", name, "': option '", key, "' given twice"));
      }
    }
    options.emplace_back(std::move(key), std::move(value));
  }
  // ":rotate=" belongs to no family: it wraps whatever scheme the rest names.
  std::optional<std::string> rotate;
  for (auto it = options.begin(); it != options.end(); ++it) {
    if (it->first == "rotate") {
      rotate = std::move(it->second);
      options.erase(it);
      break;
    }
  }
  for (internal::SchemeFactory factory : kFactories) {
    absl::StatusOr<std::unique_ptr<Scheme>> scheme = factory(base, options);
    if (!scheme.ok() && absl::IsNotFound(scheme.status())) continue;
    if (!scheme.ok() || !rotate.has_value()) return scheme;
    return internal::Rotate(*std::move(scheme), *rotate);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown scheme '", base, "'; 'lowp schemes' lists them"));
}

const std::vector<SchemeFamily>& SchemeFamilies() {
  static const auto* families = [] {
    auto* all = new std::vector<SchemeFamily>;
    for (auto list : {internal::CastFamilies, internal::IntFamilies, internal::ScaledFloatFamilies,
                      internal::MxFamilies, internal::Nvfp4Families, internal::Nf4Families,
                      internal::GgmlFamilies, internal::GgmlCodecFamilies,
                      internal::RecipeFamilies, internal::RotationFamilies}) {
      for (SchemeFamily& family : list()) all->push_back(std::move(family));
    }
    return all;
  }();
  return *families;
}

}  // namespace lowp
