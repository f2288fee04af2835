// lowp eval's engine: the float32 reference model and every candidate (a
// set of emulated sites) on the same token sequences, compared position by
// position (eval/metrics.h), in one pass over the checkpoint.
//
// Layer-major: for a batch of sequences, the reference and every candidate
// advance one decoder layer at a time over all their tokens. Each layer is
// read from the checkpoint once (model/layer_reader.h), each weight variant
// of the candidates made from it (eval/variant.h), every stream run through
// it, and the layer dropped. lm_head follows in chunks of vocabulary rows,
// the metrics gathered chunk by chunk (eval/logit_stats.h). Memory is about
// one layer's float32 weights twice (the reference's and one variant's), the
// hidden states [candidates + 1, tokens, hidden] and one chunk of logits,
// whatever the number of layers.
#ifndef LOWP_EVAL_EVALUATE_H_
#define LOWP_EVAL_EVALUATE_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "eval/candidates.h"
#include "eval/report.h"
#include "model/checkpoint.h"
#include "model/forward.h"
#include "eval/variant.h"

namespace lowp {

struct EvalRun {
  int threads = 0;  // 0: every CPU; results never depend on it
  // Tokens per pass over the checkpoint (whole groups of sequences,
  // model/batch.h); 0: as many as kEvalActivationBytes of hidden states and
  // scratch allow. Results never depend on it.
  int64_t batch_tokens = 0;
  // Vocabulary rows per chunk of lm_head (rounded up to what the weight
  // variants' schemes need); 0: as many as 64 MiB of lm_head rows or of
  // logits allow. Results depend on it only through the order of the KL's
  // sums (eval/logit_stats.h).
  int64_t head_rows = 0;
  // -1: every position is scored (KL and top-1 at each, perplexity where
  // the next token is known). k >= 0: only positions k .. length - 2 count
  // for every metric, llama.cpp's perplexity protocol with k = length / 2.
  int64_t scored_from = -1;
  // Candidates that differ from the reference only from some decoder layer
  // on (weights alone, WeightVariant::FirstChangedLayer) start there from
  // the reference's hidden state instead of running the layers before it:
  // the same results, bit for bit, in less time (what a per-tensor
  // sensitivity sweep needs). Their census then counts only the layers
  // they ran.
  bool share_prefix = false;
  // How each layer runs the streams (eval/schedule.h): side by side for a
  // small layer, one at a time for a large one; or either, forced. The
  // results are the same (tests run both).
  enum class Schedule { kBySize, kSideBySide, kOneAtATime };
  Schedule schedule = Schedule::kBySize;
  // How a layer's matrices are read: all with the layer, or one at a time
  // as the forward pass reaches them (each matrix, and each expert some
  // token routes to, read and made for each candidate once per layer and
  // batch: memory for one matrix or expert instead of a layer's); by size,
  // a layer's routed experts one at a time when they take more than
  // kWholeExpertBytes in float32, its other matrices when they take more
  // than kWholeMatrixBytes, whole when a candidate calibrates (GPTQ, AWQ:
  // refused one at a time). The results are the same.
  enum class Reads { kBySize, kWhole, kOneAtATime };
  Reads reads = Reads::kBySize;
  // When not null, receives the input of every product of the reference
  // (the float32 model): each decoder layer's linear layers, and lm_head's
  // (Site::kLogits, layer num_layers) once per batch. What an importance
  // matrix is made of (eval/imatrix.h).
  LinearInputs* reference_inputs = nullptr;
  // Called before each step with (steps done, steps in all, what): a step is
  // a decoder layer (or lm_head) of one batch for the reference or one weight
  // variant.
  std::function<void(int64_t, int64_t, const std::string&)> progress;
};

// A layer's routed experts read whole up to this many float32 bytes, its
// other matrices up to this many.
constexpr uint64_t kWholeExpertBytes = uint64_t{512} << 20;
constexpr uint64_t kWholeMatrixBytes = uint64_t{2} << 30;

// Whether `reads` reads `config`'s experts, and its other matrices, one at
// a time.
bool ExpertsOneAtATime(const ModelConfig& config, EvalRun::Reads reads);
bool MatricesOneAtATime(const Checkpoint& checkpoint, EvalRun::Reads reads);

// The activation memory a batch may take when EvalRun::batch_tokens is 0.
constexpr uint64_t kEvalActivationBytes = uint64_t{1} << 30;

// `tokens` is [sequences, length] row-major; every id must be below
// vocab_size and the length at most max_position_embeddings when the config
// gives it (InvalidArgument naming the sequence and position, or the
// lengths). Errors from reading name the file and tensor; a checkpoint that
// shrank or changed while read is DataLoss.
absl::StatusOr<EvalReport> Evaluate(const Checkpoint& reference, std::span<const int32_t> tokens,
                                    int64_t length, const std::vector<EvalCandidate>& candidates,
                                    const EvalRun& run = {});

// The float32 logits of `tokens` ([sequences, length]) through the same
// pass: [sequences, length, vocab_size], or InvalidArgument as Evaluate.
absl::StatusOr<std::vector<float>> ReferenceLogits(const Checkpoint& model,
                                                   std::span<const int32_t> tokens, int64_t length,
                                                   const EvalRun& run = {});

}  // namespace lowp

#endif  // LOWP_EVAL_EVALUATE_H_
