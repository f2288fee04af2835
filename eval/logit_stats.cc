#include "eval/logit_stats.h"

#include <algorithm>
#include <cmath>

namespace lowp {

double LogitStats::Add(std::span<const float> logits, int64_t first, int64_t next) {
  const double old_max = max;
  float chunk_max = -std::numeric_limits<float>::infinity();
  for (size_t j = 0; j < logits.size(); ++j) {
    const float x = logits[j];
    if (!std::isfinite(x)) {
      finite = false;
      continue;
    }
    chunk_max = std::max(chunk_max, x);
    // The first of equal maxima: ids arrive in increasing order.
    if (x > top || top_id < 0) {
      top = x;
      top_id = first + static_cast<int64_t>(j);
    }
  }
  if (next >= first && next < first + static_cast<int64_t>(logits.size())) {
    this->next = logits[static_cast<size_t>(next - first)];
  }
  if (!finite) return old_max;
  const double new_max = std::max(max, static_cast<double>(chunk_max));
  double s = sum * std::exp(max - new_max);
  for (float x : logits) s += std::exp(static_cast<double>(x) - new_max);
  sum = s;
  max = new_max;
  return old_max;
}

double LogitStats::LogSumExp() const { return max + std::log(sum); }

void CandidateStats::Add(std::span<const float> x, std::span<const float> y, int64_t first,
                         int64_t next, double old_max, const LogitStats& reference) {
  own.Add(y, first, next);
  if (!own.finite || !reference.finite) return;
  const double m = reference.max;
  double c = cross * std::exp(old_max - m);
  for (size_t j = 0; j < x.size(); ++j) {
    const double xj = x[j];
    c += std::exp(xj - m) * (xj - static_cast<double>(y[j]));
  }
  cross = c;
}

PositionMetrics FinishPosition(const LogitStats& reference, const CandidateStats& candidate,
                               int64_t next) {
  PositionMetrics m;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const double lse_p = reference.LogSumExp();
  if (!candidate.own.finite) {
    m.finite = false;
    m.kl = kInf;
    m.top1 = false;
    if (next >= 0) {
      m.ce_reference = lse_p - reference.next;
      m.ce_candidate = kInf;
      m.delta_p = std::numeric_limits<double>::quiet_NaN();
    }
    return m;
  }
  const double lse_q = candidate.own.LogSumExp();
  // Rounding can leave a tiny negative sum for near twins; KL divergence is
  // never negative.
  m.kl = std::max(0.0, candidate.cross / reference.sum - lse_p + lse_q);
  m.top1 = candidate.own.top_id == reference.top_id;
  if (next >= 0) {
    m.ce_reference = lse_p - reference.next;
    m.ce_candidate = lse_q - candidate.own.next;
    m.delta_p = std::exp(candidate.own.next - lse_q) - std::exp(reference.next - lse_p);
  }
  return m;
}

}  // namespace lowp
