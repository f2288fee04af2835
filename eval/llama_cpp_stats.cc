#include "eval/llama_cpp_stats.h"

#include <algorithm>
#include <cmath>

namespace lowp {
namespace {

// llama.cpp's covariance of two sums: 0 below 10 samples.
double Covariance(double sa, double sb, double sab, uint64_t n) {
  if (n < 10) return 0;
  const double d = static_cast<double>(n);
  return (sab / d - (sa / d) * (sb / d)) / (d - 1);
}

// llama.cpp's percentile of sorted values: the rank fraction (n - 1) taken
// in float32 as it does, linear between neighbours; its median apart.
double Percentile(const std::vector<double>& v, double fraction) {
  if (fraction <= 0) return v.front();
  if (fraction >= 1) return v.back();
  if (fraction == 0.5) {
    const size_t n = v.size();
    return n % 2 == 0 ? 0.5 * (v[n / 2] + v[n / 2 - 1]) : v[n / 2];
  }
  float p = static_cast<float>(fraction) * static_cast<float>(v.size() - 1);
  const size_t ip = static_cast<size_t>(p);
  p -= static_cast<float>(ip);
  return (1 - p) * v[ip] + p * v[std::min(ip + 1, v.size() - 1)];
}

std::vector<std::pair<double, double>> Percentiles(std::vector<double> v,
                                                   std::span<const double> fractions) {
  for (double& x : v) {
    if (std::isnan(x)) x = INFINITY;
  }
  std::sort(v.begin(), v.end());
  std::vector<std::pair<double, double>> out;
  if (v.empty()) return out;
  for (double f : fractions) out.emplace_back(f, Percentile(v, f));
  return out;
}

}  // namespace

Estimate MeanAndUncertainty(double sum, double sum2, uint64_t n) {
  if (n < 1) return {};
  const double d = static_cast<double>(n);
  const double f = sum / d;
  double df = sum2 / d - f * f;
  df = df > 0 && n > 10 ? std::sqrt(df / (d - 1)) : 0;
  return {f, df};
}

LlamaCppStats LlamaCppStatistics(std::span<const PositionMetrics> predictions) {
  LlamaCppStats s;
  const uint64_t n = predictions.size();
  s.count = n;
  double nll = 0, nll2 = 0, base = 0, base2 = 0, cross = 0, kld = 0, kld2 = 0;
  double dp = 0, dp2 = 0, dp4 = 0;
  uint64_t same = 0;
  std::vector<double> klds, dps;
  klds.reserve(n);
  dps.reserve(n);
  for (const PositionMetrics& m : predictions) {
    nll += m.ce_candidate;
    nll2 += m.ce_candidate * m.ce_candidate;
    base += m.ce_reference;
    base2 += m.ce_reference * m.ce_reference;
    cross += m.ce_candidate * m.ce_reference;
    kld += m.kl;
    kld2 += m.kl * m.kl;
    dp += m.delta_p;
    dp2 += m.delta_p * m.delta_p;
    dp4 += m.delta_p * m.delta_p * m.delta_p * m.delta_p;
    same += m.top1;
    klds.push_back(m.kl);
    dps.push_back(m.delta_p);
  }
  const Estimate q = MeanAndUncertainty(nll, nll2, n), b = MeanAndUncertainty(base, base2, n);
  const double cov = Covariance(nll, base, cross, n);
  s.ppl_q = {std::exp(q.value), std::exp(q.value) * q.uncertainty};
  s.ppl_base = {std::exp(b.value), std::exp(b.value) * b.uncertainty};
  s.ln_ppl_correlation = cov / (q.uncertainty * b.uncertainty);
  const double ratio_unc =
      std::sqrt(q.uncertainty * q.uncertainty + b.uncertainty * b.uncertainty - 2 * cov);
  s.ln_ppl_ratio = {q.value - b.value, ratio_unc};
  s.ppl_ratio = {std::exp(q.value - b.value), std::exp(q.value - b.value) * ratio_unc};
  s.ppl_difference = {s.ppl_q.value - s.ppl_base.value,
                      std::sqrt(s.ppl_q.uncertainty * s.ppl_q.uncertainty +
                                s.ppl_base.uncertainty * s.ppl_base.uncertainty -
                                2 * s.ppl_q.value * s.ppl_base.value * cov)};
  s.kld = MeanAndUncertainty(kld, kld2, n);
  s.delta_p = MeanAndUncertainty(dp, dp2, n);
  const Estimate m2 = MeanAndUncertainty(dp2, dp4, n);
  s.rms_delta_p = {std::sqrt(m2.value),
                   m2.value > 0 ? 0.5 / std::sqrt(m2.value) * m2.uncertainty : 0};
  if (n > 0) {
    const double p = static_cast<double>(same) / static_cast<double>(n);
    s.same_top = {p, n > 1 ? std::sqrt(p * (1 - p) / static_cast<double>(n - 1)) : 0};
  }
  static constexpr double kKld[] = {1, .999, .99, .95, .90, .5, .10, .05, .01, .001, 0};
  static constexpr double kDp[] = {1, .999, .99, .95, .90, .75, .5, .25, .10, .05, .01, .001, 0};
  s.kld_percentiles = Percentiles(std::move(klds), kKld);
  s.delta_p_percentiles = Percentiles(std::move(dps), kDp);
  return s;
}

}  // namespace lowp
