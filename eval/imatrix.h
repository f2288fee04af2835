// llama.cpp's importance matrix (tools/imatrix/imatrix.cpp, llama-imatrix)
// made by lowp's forward pass: for the input of every product of the float32
// model over calibration tokens, the sum over tokens of each column's square
// (in_sum2), of each column (in_sum), and the tokens counted, per weight
// matrix, under llama.cpp's tensor names. llama-quantize divides in_sum2 by
// the count and hands the result to ggml's quantizers as their importance.
//
// Which products count, as llama.cpp's collect_imatrix decides:
//   - every matrix of the decoder layers (names "blk.N."): attn_q, attn_k,
//     attn_v (the same input three times), attn_output, ffn_gate, ffn_up,
//     ffn_down, the router ffn_gate_inp; Mixtral's experts as one merged
//     entry per layer and projection ("blk.N.ffn_down_exps.weight"), a count
//     and a vector per expert, each token counted for the experts it was
//     routed to;
//   - lm_head ("output.weight") only with `process_output`;
//   - never the embedding table (a lookup, not a product).
// Where lowp differs from llama.cpp:
//   - sums are kept in double and stored as float32 (llama.cpp adds in
//     float32 in the order ggml's batches give);
//   - llama.cpp skips products of fewer than 16 token rows (its single-token
//     decode steps); lowp's calibration runs whole chunks and counts every
//     row;
//   - the input is lowp's float32 forward pass (Hugging Face semantics),
//     not ggml's compute graph over the GGUF's weights.
#ifndef LOWP_EVAL_IMATRIX_H_
#define LOWP_EVAL_IMATRIX_H_

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/imatrix.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/forward.h"

namespace lowp {

// llama.cpp's name of the weight a product at `site` of `layer` multiplies
// ("blk.3.attn_q.weight"; `expert` >= 0, a routed expert's:
// "blk.3.ffn_up_exps.weight"; kSharedExpert: "blk.3.ffn_up_shexp.weight";
// Site::kLogits: "output.weight"), or empty for a site that is no product.
std::string ImatrixTensorName(Site site, int64_t layer, int64_t expert);

// Gathers the sums from LinearInputs calls (thread-safe).
class ImatrixCollector final : public LinearInputs {
 public:
  ImatrixCollector(const ModelConfig& config, bool process_output);

  void Add(int64_t layer, Site site, int64_t expert, std::span<const float> in,
           int64_t cols) override;

  // The entries gathered so far, sorted by name, with the dataset metadata.
  Imatrix Result(std::vector<std::string> datasets, int64_t chunk_count,
                 int64_t chunk_size) const;

 private:
  struct Sums {
    int64_t cols = 0;
    std::vector<double> sum2, sum;  // [matrices, cols]
    std::vector<int64_t> counts;    // [matrices]
  };

  const ModelConfig& config_;
  const bool process_output_;
  mutable std::mutex mutex_;
  std::map<std::string, Sums> sums_;
};

struct ImatrixRunOptions {
  bool process_output = false;  // also lm_head's input ("output.weight")
  int threads = 0;
  int64_t batch_tokens = 0;
  // llama.cpp's protocol scores only the second half of each chunk for the
  // perplexity it prints; the matrix counts every position.
  int64_t scored_from = -1;
  std::function<void(int64_t, int64_t, const std::string&)> progress;
};

struct ImatrixRun {
  Imatrix imatrix;
  double perplexity = 0;  // the float32 model's, over the scored positions
  uint64_t tokens = 0;    // token rows counted
};

// Runs `model` over `tokens` ([sequences, length]) and gathers the matrix;
// `datasets` and the chunk figures go into its metadata. Errors as
// Evaluate's.
absl::StatusOr<ImatrixRun> ComputeImatrix(const Checkpoint& model,
                                          std::span<const int32_t> tokens, int64_t length,
                                          std::vector<std::string> datasets,
                                          const ImatrixRunOptions& options);

}  // namespace lowp

#endif  // LOWP_EVAL_IMATRIX_H_
