// The next-token metrics of eval/metrics.h taken a chunk of the vocabulary at
// a time, so that no position holds a [vocab] row of logits beyond one chunk:
// per position, the reference's and each candidate's running maximum and sum
// of exponentials (the log-sum-exp, rescaled when the maximum grows, as
// FlashAttention's online softmax), argmax, next-token logit and
//   cross = sum_i exp(x_i - max_x) (x_i - y_i)
// for reference logits x and candidate logits y, rescaled with the
// reference's maximum. Then, with LSE_x = max_x + log(sum_x):
//   KL(P || Q) = cross / sum_x - LSE_x + LSE_y      (since sum_i p_i = 1)
//   -log p(next) = LSE_x - x_next,  -log q(next) = LSE_y - y_next
// All in double over float32 logits. Equal to eval/metrics.h's
// ComparePosition up to the order of the sums (a relative 1e-12 or so on
// the bundled model, eval_test.cc).
#ifndef LOWP_EVAL_LOGIT_STATS_H_
#define LOWP_EVAL_LOGIT_STATS_H_

#include <cstdint>
#include <limits>
#include <span>

#include "eval/metrics.h"

namespace lowp {

// One model's logits at one position, so far.
struct LogitStats {
  double max = -std::numeric_limits<double>::infinity();
  double sum = 0;  // sum exp(x - max)
  float top = -std::numeric_limits<float>::infinity();
  int64_t top_id = -1;
  double next = 0;  // the next token's logit, once seen
  bool finite = true;

  // Adds logits[j] of vocabulary ids first + j; `next` the next token or -1.
  // Returns the maximum before this chunk (for the candidates' rescaling).
  double Add(std::span<const float> logits, int64_t first, int64_t next);
  double LogSumExp() const;
};

// A candidate's logits at one position beside the reference's.
struct CandidateStats {
  LogitStats own;
  double cross = 0;  // sum exp(x - reference max) (x - y)

  // Adds the candidate's logits `y` of the same chunk as the reference's `x`;
  // `old_max` is the reference's maximum before the chunk (LogitStats::Add's
  // result) and `reference` its state after.
  void Add(std::span<const float> x, std::span<const float> y, int64_t first, int64_t next,
           double old_max, const LogitStats& reference);
};

// The position's metrics (ComparePosition's, eval/metrics.h) from the
// states after the whole vocabulary; `next` as given to Add (-1: none).
PositionMetrics FinishPosition(const LogitStats& reference, const CandidateStats& candidate,
                               int64_t next);

}  // namespace lowp

#endif  // LOWP_EVAL_LOGIT_STATS_H_
