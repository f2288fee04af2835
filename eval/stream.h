// Internal to eval/: one model run through the layers by the evaluator: the
// float32 reference (no candidate) or a candidate, and what it gathers.
#ifndef LOWP_EVAL_STREAM_H_
#define LOWP_EVAL_STREAM_H_

#include <cstdint>
#include <vector>

#include "eval/candidates.h"
#include "eval/logit_stats.h"
#include "eval/variant.h"
#include "model/forward.h"

namespace lowp {

struct Stream {
  const EvalCandidate* candidate = nullptr;  // null: the reference
  WeightVariant* variant = nullptr;          // null: the reference's weights
  // The first layer this stream runs (EvalRun::share_prefix): before it,
  // its hidden state is the reference's, copied in at that layer.
  int64_t first_layer = 0;
  std::vector<float> hidden;  // [batch rows, hidden_size]
  Census census;
  // Receives the input of each product (the reference's, when asked).
  LinearInputs* inputs = nullptr;
  // lm_head's sums per row: the reference's logits, or a candidate's
  // against the reference's.
  std::vector<LogitStats> reference_logits;
  // In a layer with experts: the experts each row took, [rows,
  // experts_per_token] (LayerTask::routes); empty in other layers.
  std::vector<int32_t> routes;
  std::vector<CandidateStats> logits;

  bool Runs(int64_t layer) const { return layer >= first_layer; }
};

// The sites a stream emulates: its candidate's, none for the reference.
inline const Emulation& EmulationOf(const Stream& s) {
  static const Emulation kNone;
  return s.candidate != nullptr ? s.candidate->emulation : kNone;
}

}  // namespace lowp

#endif  // LOWP_EVAL_STREAM_H_
