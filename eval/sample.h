// Token sequences sampled from a model: each starts with the config's
// bos_token_id and continues with tokens drawn from the model's own
// next-token distribution softmax(logits / temperature) (temperature 0:
// greedy, the lowest id on ties). All sequences decode together, one token
// each per step on their KV caches, so a step reads the model's weights once
// for every sequence (layer by layer: model/layer_reader.h). Draws come from
// a counter-based generator keyed by (seed, sequence, position), so the
// tokens depend on neither the thread count nor the order of the work.
#ifndef LOWP_EVAL_SAMPLE_H_
#define LOWP_EVAL_SAMPLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/checkpoint.h"

namespace lowp {

struct SampleOptions {
  int64_t count = 8;     // sequences
  int64_t length = 128;  // tokens per sequence, BOS included
  double temperature = 1.0;
  uint64_t seed = 0;
  int threads = 0;  // 0: every CPU
};

// [count, length] token ids, row-major. InvalidArgument (an option error on
// the field it names) for a count or length outside 1..2^20 or a length
// beyond the model's max_position_embeddings, a temperature not in [0, 100],
// or a BOS id outside the vocabulary.
absl::StatusOr<std::vector<int32_t>> SampleTokens(const Checkpoint& model,
                                                  const SampleOptions& options);

}  // namespace lowp

#endif  // LOWP_EVAL_SAMPLE_H_
