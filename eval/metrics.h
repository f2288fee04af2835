// What an emulated model does to the next-token distribution, position by
// position, against the float32 reference on the same tokens: the KL
// divergence KL(P_ref || P_q) in nats, whether the top-1 tokens agree, and
// for the token that follows, both models' cross-entropy and the change of
// its probability (delta p = q - p), as llama.cpp's perplexity
// --kl-divergence reports them. Probabilities are softmax of the logits,
// computed in double with the maximum subtracted.
#ifndef LOWP_EVAL_METRICS_H_
#define LOWP_EVAL_METRICS_H_

#include <cstdint>
#include <span>
#include <vector>

namespace lowp {

struct PositionMetrics {
  double kl = 0;         // +inf when a candidate logit is NaN or inf
  bool top1 = false;     // argmax equal (ties to the lowest id); false when non-finite
  bool finite = true;    // every candidate logit finite
  // With a next token only (-1 for none):
  double ce_reference = 0;  // -log p_ref(next)
  double ce_candidate = 0;  // -log p_q(next); +inf when non-finite
  double delta_p = 0;       // p_q(next) - p_ref(next); NaN when non-finite
};

// The log-softmax of a row of logits (double); false if a logit is not finite.
bool LogSoftmax(std::span<const float> logits, std::vector<double>& out);

// Index of the largest value, the lowest on ties.
int64_t ArgMax(std::span<const float> logits);

// Compares one position. `reference` is the reference's log-softmax (finite),
// `reference_top` its argmax; `next` the following token or -1.
PositionMetrics ComparePosition(std::span<const double> reference, int64_t reference_top,
                                std::span<const float> candidate, int64_t next,
                                std::vector<double>& scratch);

// Order statistics of a sample, NumPy's default ("linear") definition of a
// quantile: the value at rank q (n - 1), interpolated between neighbours.
// +inf values sort last; NaN counts as +inf.
struct Distribution {
  double mean = 0, rms = 0, min = 0, p1 = 0, p5 = 0, p10 = 0, median = 0, p90 = 0, p95 = 0,
         p99 = 0, max = 0;
  uint64_t count = 0;
};
Distribution Describe(std::vector<double> values);
double Quantile(std::span<const double> sorted, double q);

}  // namespace lowp

#endif  // LOWP_EVAL_METRICS_H_
