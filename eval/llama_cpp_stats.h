// The statistics llama.cpp's `perplexity --kl-divergence` prints at its
// end (tools/perplexity/perplexity.cpp, kl_divergence()), computed with its
// formulas from lowp's per-position results, so a lowp row reads like a
// row of llama.cpp's tables. Each "±" is llama.cpp's: the standard error of
// the mean, sqrt((mean(x^2) - mean(x)^2) / (n - 1)), 0 when n <= 10.
//
// Where the inputs differ from llama.cpp's: the reference's probabilities
// are exact (double, from float32 logits), where llama.cpp stores the base
// model's log-probabilities in 16 bits floored at max - 16 (which alone
// costs KLD 0.00055 on Llama 3); KL is summed over the whole vocabulary.
#ifndef LOWP_EVAL_LLAMA_CPP_STATS_H_
#define LOWP_EVAL_LLAMA_CPP_STATS_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "eval/metrics.h"

namespace lowp {

struct Estimate {
  double value = 0, uncertainty = 0;
};

struct LlamaCppStats {
  uint64_t count = 0;                  // predictions (positions with a next token)
  Estimate ppl_q, ppl_base;            // Mean PPL(Q), Mean PPL(base)
  double ln_ppl_correlation = 0;       // Cor(ln(PPL(Q)), ln(PPL(base))), a fraction
  Estimate ln_ppl_ratio;               // Mean ln(PPL(Q)/PPL(base))
  Estimate ppl_ratio, ppl_difference;  // Mean PPL(Q)/PPL(base), Mean PPL(Q)-PPL(base)
  Estimate kld;                        // Mean KLD
  // (fraction, value): 1 (maximum), .999, .99, .95, .90, .5 (median), .10,
  // .05, .01, .001, 0 (minimum); Δp adds .75 and .25. Δp as a fraction, not %.
  std::vector<std::pair<double, double>> kld_percentiles, delta_p_percentiles;
  Estimate delta_p, rms_delta_p, same_top;  // fractions (llama.cpp prints them x100)
};

// From the positions with a next token. NaN or inf values (a candidate with
// non-finite logits) sort last, as in Describe.
LlamaCppStats LlamaCppStatistics(std::span<const PositionMetrics> predictions);

// llama.cpp's mean and standard error of a sum and a sum of squares over n.
Estimate MeanAndUncertainty(double sum, double sum2, uint64_t n);

}  // namespace lowp

#endif  // LOWP_EVAL_LLAMA_CPP_STATS_H_
