// The range study: one pass over the tensor per format, through the cast
// scheme and the comparison kernel, plus one pass for the binade histogram
// that answers the scale questions exactly (their thresholds are powers of 2).
#include "quant/range.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "kernels/quantize.h"
#include "quant/measure.h"
#include "quant/scheme.h"

namespace lowp {
namespace {

constexpr int64_t kChunk = int64_t{1} << 16;

// Nonzero finite values by binade: counts[e - kMinExponent] holds the x with
// 2^e <= |x| < 2^(e+1). float32 spans e = -149..127.
constexpr int kMinExponent = -149;
constexpr int kBinades = 128 - kMinExponent;

struct Census {
  std::array<uint64_t, kBinades> binades{};
  uint64_t finite = 0;
  float absmax = 0;
  float min_nonzero = std::numeric_limits<float>::infinity();
};

absl::StatusOr<Census> TakeCensus(const TensorView& tensor, const RangeOptions& options) {
  Census census;
  std::vector<float> chunk;
  for (int64_t first = 0; first < tensor.elements(); first += kChunk) {
    chunk.resize(std::min(kChunk, tensor.elements() - first));
    if (absl::Status s = ReadAsFloat32(tensor, first, chunk); !s.ok()) return s;
    if (options.release) {
      options.release(ElementBytes(tensor, first, static_cast<int64_t>(chunk.size())));
    }
    for (float x : chunk) {
      if (!std::isfinite(x)) continue;
      ++census.finite;
      const float a = std::fabs(x);
      if (a == 0) continue;
      census.absmax = std::max(census.absmax, a);
      census.min_nonzero = std::min(census.min_nonzero, a);
      ++census.binades[std::ilogb(a) - kMinExponent];
    }
  }
  return census;
}

// The largest k with every |x| * 2^k within the format's range:
// amax * 2^k <= max_finite (exact: scaling by 2^k is exact in double).
int MaxScaleLog2(const Format& format, double absmax) {
  int k = static_cast<int>(std::ceil(std::log2(format.max_finite() / absmax))) + 1;
  while (std::ldexp(absmax, k) > format.max_finite()) --k;
  return k;
}

// The smallest k with at least `fraction` of the nonzero x at or above the
// smallest normal after scaling: |x| 2^k >= 2^m  <=>  ilogb(x) >= m - k.
int MinScaleLog2(const Format& format, const Census& census, uint64_t nonzero, double fraction) {
  const int m = format.min_normal_exponent();
  const double needed = fraction * static_cast<double>(nonzero);
  uint64_t above = 0;
  // Walk binades from the top: once `above` reaches `needed` at binade e,
  // k = m - e is the smallest scale that lifts binade e over the threshold.
  for (int i = kBinades - 1; i >= 0; --i) {
    above += census.binades[i];
    if (static_cast<double>(above) >= needed) return m - (i + kMinExponent);
  }
  return m - kMinExponent;
}

}  // namespace

absl::StatusOr<std::vector<RangeRow>> StudyRange(const TensorView& tensor,
                                                 const std::vector<Format>& formats,
                                                 const RangeOptions& options) {
  if (!IsFloating(tensor.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("tensor '", tensor.name, "' in ", tensor.file,
                                                   " is ", DTypeName(tensor.dtype),
                                                   ", not a floating type"));
  }
  if (!(options.fraction > 0 && options.fraction <= 1)) {
    return absl::InvalidArgumentError("the fraction for the smallest scale must be in (0, 1]");
  }
  for (const Format& format : formats) {
    if (!format.is_float() || !format.has_zero) {
      return absl::InvalidArgumentError(
          absl::StrCat("range study: '", format.name, "' is not a floating format with zero"));
    }
  }
  absl::StatusOr<Census> census = TakeCensus(tensor, options);
  if (!census.ok()) {
    return absl::Status(census.status().code(),
                        absl::StrCat("tensor '", tensor.name, "' in ", tensor.file, ": ",
                                     census.status().message()));
  }
  uint64_t nonzero = 0;
  for (uint64_t n : census->binades) nonzero += n;

  std::vector<RangeRow> rows;
  for (const Format& format : formats) {
    absl::StatusOr<std::unique_ptr<Scheme>> cast = ParseScheme(format.name);
    if (!cast.ok()) return cast.status();
    MeasureOptions measure;
    measure.threads = options.threads;
    measure.release = options.release;
    // Relative error over every nonzero x.
    measure.relative_floor = std::numeric_limits<float>::denorm_min();
    absl::StatusOr<QuantReport> report = MeasureTensor(tensor, **cast, measure);
    if (!report.ok()) return report.status();

    RangeRow row;
    row.tensor = tensor.name;
    row.format = format.name;
    row.elements = static_cast<uint64_t>(tensor.elements());
    row.finite = census->finite;
    row.nonzero = nonzero;
    row.absmax = census->absmax;
    row.min_nonzero = nonzero == 0 ? 0 : census->min_nonzero;
    row.overflow = report->counts.clipped;
    row.subnormal = report->counts.subnormal;
    row.flushed = report->stats.zeroed;
    // Over the elements that stay finite (range reports overflow apart).
    const ErrorStats& stats = report->stats;
    row.max_relative_error = stats.max_relative_error;
    const double n = static_cast<double>(stats.relative_count);
    row.rms_relative_error = n == 0 ? 0 : std::sqrt(stats.sum_squared_relative_error / n);
    if (nonzero > 0) {
      row.max_scale_log2 = MaxScaleLog2(format, census->absmax);
      row.min_scale_log2 = MinScaleLog2(format, *census, nonzero, options.fraction);
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace lowp
