// Internal to eval/: the evaluator's sums. Per candidate and sequence, the
// hidden state's error after each layer, the top-1 agreements, non-finite
// positions and cross-entropy of the scored positions; per position, its
// metrics (eval/metrics.h); per sequence, the reference's cross-entropy.
// Batches add to them in any order; the report merges them in sequence
// order, so the results never depend on batching or threads.
#ifndef LOWP_EVAL_TALLY_H_
#define LOWP_EVAL_TALLY_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "eval/report.h"
#include "eval/routing.h"
#include "eval/stream.h"
#include "model/batch.h"

namespace lowp {

class Tally {
 public:
  // `scored_from` as EvalRun's.
  Tally(const ModelConfig& config, int64_t sequences, int64_t length, size_t candidates,
        int64_t scored_from);

  // Whether position t of a sequence counts in the metrics: every one, or
  // with scored_from, those from it to the last but one.
  bool Scored(int64_t t) const {
    return scored_from_ < 0 || (t >= scored_from_ && t + 1 < length_);
  }

  // ||h_q - h||^2 and ||h||^2 of each candidate (streams[1..]) against the
  // reference (streams[0]) after `layer`, per sequence of the batch.
  void AddLayerErrors(const Batch& batch, int64_t first_sequence, int64_t layer,
                      std::span<const Stream> streams, int threads);
  // The batch's positions from the streams' finished lm_head sums; `next`
  // is each row's next token (-1 at a sequence's end). With
  // `reference_finite`, a non-finite reference logit is an Internal error.
  absl::Status AddPositions(const Batch& batch, int64_t first_sequence,
                            std::span<const int64_t> next, std::span<const Stream> streams,
                            bool reference_finite, int threads);

  // Each candidate's routing in `layer` against the reference's (the
  // streams' routes).
  void AddRouting(int64_t layer, std::span<const Stream> streams) { routing_.Add(layer, streams); }
  // Everything merged in sequence order.
  EvalReport Report(std::span<const Stream> streams, std::span<const EvalCandidate> candidates,
                    int64_t batches) const;

 private:
  // What a candidate gives one sequence.
  struct SequenceResult {
    std::vector<double> layer_error, layer_norm;  // sums of squares per layer
    double cross_entropy = 0;
    uint64_t top1 = 0, nonfinite = 0;
  };

  const ModelConfig& config_;
  const int64_t sequences_, length_, scored_from_;
  std::vector<std::vector<SequenceResult>> per_sequence_;  // [candidate][sequence]
  std::vector<std::vector<PositionMetrics>> metrics_;      // [candidate][position]
  std::vector<double> reference_ce_;                       // per sequence
  RoutingTally routing_;
};

}  // namespace lowp

#endif  // LOWP_EVAL_TALLY_H_
