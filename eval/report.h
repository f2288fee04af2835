// What the evaluator reports: per candidate, the metrics of its outputs
// against the float32 reference's, and the run's counts.
#ifndef LOWP_EVAL_REPORT_H_
#define LOWP_EVAL_REPORT_H_

#include <cstdint>
#include <vector>

#include "eval/candidates.h"
#include "eval/llama_cpp_stats.h"
#include "eval/metrics.h"
#include "eval/variant.h"
#include "model/forward.h"

namespace lowp {

struct CandidateResult {
  EvalCandidate candidate;
  WeightReport weights;              // the matrices changed (none with float32 weights)
  Distribution kl;                   // over every scored position of every sequence
  double top1_agreement = 0;         // share of positions whose argmax equals the reference's
  Distribution delta_p;              // over positions 0..L-2 (the next token known)
  double cross_entropy = 0;          // mean -log q(next), nats
  double perplexity = 0;             // exp(cross_entropy)
  uint64_t nonfinite_positions = 0;  // positions with a NaN or inf logit
  // llama.cpp's final table over the positions with a next token.
  LlamaCppStats llama_cpp;
  // Per decoder layer, ||h_q - h_ref|| / ||h_ref|| of the hidden state after
  // the layer, over every token.
  std::vector<double> layer_relative_rmse;
  Census census;
};

struct EvalReport {
  int64_t sequences = 0;
  int64_t sequence_length = 0;
  int64_t scored_from = -1;  // EvalRun::scored_from
  // Where KL and top-1 are taken: every position (sequences * length), or
  // with scored_from, sequences * (length - 1 - scored_from).
  uint64_t positions = 0;
  // Where perplexity and delta p are: positions with a next token.
  uint64_t predictions = 0;
  int64_t batches = 0;       // passes over the checkpoint
  double reference_cross_entropy = 0;
  double reference_perplexity = 0;
  Census reference_census;
  std::vector<CandidateResult> candidates;
};

}  // namespace lowp

#endif  // LOWP_EVAL_REPORT_H_
