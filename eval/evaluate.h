// lowp eval's engine: the float32 reference model and every candidate (a
// set of emulated sites) run on the same token sequences, one sequence at a
// time per thread, and compared position by position (eval/metrics.h). Per
// sequence only its logits and hidden states are held, never the whole
// run's, so memory is bounded by (threads) sequences.
#ifndef LOWP_EVAL_EVALUATE_H_
#define LOWP_EVAL_EVALUATE_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "eval/metrics.h"
#include "model/forward.h"
#include "model/weights.h"

namespace lowp {

// One emulated variant of the model.
struct EvalCandidate {
  std::string label;        // how results name it ("int4-g128", "w=q8_0 kv=fp8_e4m3fn")
  std::string weights;      // the weight spec as given ("" for float32 weights)
  std::vector<WeightRule> weight_rules;
  std::string activations;  // scheme names as given, "" when not emulated
  std::string kv;
  std::string compute;
  Emulation emulation;
};

struct CandidateResult {
  EvalCandidate candidate;
  WeightReport weights;     // the matrices quantized (none without weight rules)
  Distribution kl;          // over every position of every sequence
  double top1_agreement = 0;  // share of positions whose argmax equals the reference's
  Distribution delta_p;     // over positions 0..L-2 (the next token known)
  double cross_entropy = 0;  // mean -log q(next), nats
  double perplexity = 0;     // exp(cross_entropy)
  uint64_t nonfinite_positions = 0;  // positions with a NaN or inf logit
  // Per decoder layer, ||h_q - h_ref|| / ||h_ref|| of the hidden state after
  // the layer, over every token.
  std::vector<double> layer_relative_rmse;
  Census census;
};

struct EvalReport {
  int64_t sequences = 0;
  int64_t sequence_length = 0;
  uint64_t positions = 0;    // sequences * length: where KL and top-1 are taken
  uint64_t predictions = 0;  // sequences * (length - 1): where perplexity is
  double reference_cross_entropy = 0;
  double reference_perplexity = 0;
  Census reference_census;
  std::vector<CandidateResult> candidates;
};

// Called after each sequence with (sequences done, sequences in all), from
// one thread at a time.
using EvalProgress = std::function<void(int64_t, int64_t)>;

// `tokens` is [sequences, length] row-major; every id must be below
// vocab_size (InvalidArgument naming the sequence and position otherwise).
// Candidates' weights are quantized first (each a copy of the matrices it
// replaces). Results do not depend on `threads`.
absl::StatusOr<EvalReport> Evaluate(const ModelWeights& reference,
                                    std::span<const int32_t> tokens, int64_t length,
                                    const std::vector<EvalCandidate>& candidates, int threads,
                                    const EvalProgress& progress = {});

}  // namespace lowp

#endif  // LOWP_EVAL_EVALUATE_H_
