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

// One layer with experts: a candidate's routing against the reference's,
// each token's top-k experts (by router weight) on the same token.
struct RoutingResult {
  int64_t layer = 0;
  uint64_t tokens = 0;
  // Mean over tokens of |candidate's top-k ∩ reference's| / k.
  double set_agreement = 0;
  // Share of tokens whose top-k is the reference's in the same order.
  double order_agreement = 0;
  // Share of tokens whose first expert is not the reference's.
  double top1_changed = 0;
  // Tokens per expert (each token counts once per expert it takes).
  std::vector<uint64_t> load, reference_load;
  // max over experts of |load - reference_load| / tokens.
  double max_load_change = 0;
};

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
  // Per layer with experts, its routing against the reference's
  // (eval/routing.h); empty for a dense model.
  std::vector<RoutingResult> routing;
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
