// Internal to eval/: the final norm and lm_head of a batch for every stream,
// a chunk of vocabulary rows at a time, into the streams' logit sums
// (eval/logit_stats.h): the reference's rows read once per chunk, each
// weight variant's made once for all its streams. A chunk holds at most 64
// MiB of lm_head rows or of logits (EvalRun::head_rows overrides), a whole
// number of every changing variant's HeadChunkRows.
#ifndef LOWP_EVAL_HEAD_H_
#define LOWP_EVAL_HEAD_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "eval/stream.h"
#include "eval/variant.h"
#include "model/batch.h"
#include "model/checkpoint.h"

namespace lowp {

struct HeadRun {
  const Checkpoint& reference;
  std::span<const float> final_norm;
  std::span<Stream> streams;  // [0]: the reference
  std::span<const std::unique_ptr<WeightVariant>> variants;
  int threads = 1;
  int64_t head_rows = 0;  // EvalRun::head_rows
  PassOptions pass;
  // When set (ReferenceLogits), the reference's logits are kept there,
  // [all tokens, vocab_size], and nothing else is gathered of them.
  std::vector<float>* kept_logits = nullptr;
};

// The head of `batch`: sequences of `length` from `first_sequence` whose
// tokens are `ids`; `next` gets each row's next token (-1 at a sequence's
// end). Errors from reading name the file and tensor.
absl::Status RunHead(const HeadRun& run, const Batch& batch, int64_t first_sequence,
                     int64_t length, std::span<const int32_t> ids, std::vector<int64_t>& next);

}  // namespace lowp

#endif  // LOWP_EVAL_HEAD_H_
