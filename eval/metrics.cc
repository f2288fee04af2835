#include "eval/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lowp {

bool LogSoftmax(std::span<const float> logits, std::vector<double>& out) {
  out.resize(logits.size());
  double max = -std::numeric_limits<double>::infinity();
  for (float x : logits) {
    if (!std::isfinite(x)) return false;
    max = std::max(max, static_cast<double>(x));
  }
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  const double log_sum = max + std::log(sum);
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - log_sum;
  return true;
}

int64_t ArgMax(std::span<const float> logits) {
  int64_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<int64_t>(i);
  }
  return best;
}

PositionMetrics ComparePosition(std::span<const double> reference, int64_t reference_top,
                                std::span<const float> candidate, int64_t next,
                                std::vector<double>& scratch) {
  PositionMetrics m;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  if (!LogSoftmax(candidate, scratch)) {
    m.finite = false;
    m.kl = kInf;
    m.top1 = false;
    if (next >= 0) {
      m.ce_reference = -reference[next];
      m.ce_candidate = kInf;
      m.delta_p = std::numeric_limits<double>::quiet_NaN();
    }
    return m;
  }
  double kl = 0;
  for (size_t i = 0; i < reference.size(); ++i) {
    kl += std::exp(reference[i]) * (reference[i] - scratch[i]);
  }
  // Rounding can leave a tiny negative sum for equal distributions' near
  // twins; KL divergence is never negative.
  m.kl = std::max(0.0, kl);
  m.top1 = ArgMax(candidate) == reference_top;
  if (next >= 0) {
    m.ce_reference = -reference[next];
    m.ce_candidate = -scratch[next];
    m.delta_p = std::exp(scratch[next]) - std::exp(reference[next]);
  }
  return m;
}

double Quantile(std::span<const double> sorted, double q) {
  if (sorted.empty()) return std::numeric_limits<double>::quiet_NaN();
  const double rank = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  if (frac == 0 || sorted[lo] == sorted[hi]) return sorted[lo];
  return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

Distribution Describe(std::vector<double> values) {
  Distribution d;
  d.count = values.size();
  if (values.empty()) {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    d.mean = d.rms = d.min = d.p1 = d.p5 = d.p10 = d.median = d.p90 = d.p95 = d.p99 = d.max = nan;
    return d;
  }
  for (double& v : values) {
    if (std::isnan(v)) v = std::numeric_limits<double>::infinity();
  }
  double sum = 0, squares = 0;
  for (double v : values) {
    sum += v;
    squares += v * v;
  }
  d.mean = sum / static_cast<double>(values.size());
  d.rms = std::sqrt(squares / static_cast<double>(values.size()));
  std::sort(values.begin(), values.end());
  d.min = values.front();
  d.max = values.back();
  d.p1 = Quantile(values, 0.01);
  d.p5 = Quantile(values, 0.05);
  d.p10 = Quantile(values, 0.10);
  d.median = Quantile(values, 0.50);
  d.p90 = Quantile(values, 0.90);
  d.p95 = Quantile(values, 0.95);
  d.p99 = Quantile(values, 0.99);
  return d;
}

}  // namespace lowp
