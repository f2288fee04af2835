// The float32 forward pass of a decoder-only transformer, one step at a time:
// the embedding, one decoder layer, the final norm, the logits of a chunk of
// the vocabulary. A run calls ForwardLayer once per layer with that layer's
// weights (model/checkpoint.h reads them), so it holds one layer, never the
// model; the streamed evaluator (eval/evaluate.h) and the sampler
// (eval/sample.h) are such loops.
//
// Every emulation site is here: the inputs of the linear layers
// (activations), the keys and values as the KV cache stores them, and the
// result of every matrix product and elementwise step (compute) can each be
// put through a lowp scheme or format.
//
// A step runs a batch of sequences (model/batch.h): matrix products on
// lowp's pool in tiles fixed by the shapes (model/gemm.h), attention per
// sequence and head, elementwise steps by rows. A sequence's values depend
// on its own tokens and the batch's row grouping, never on the thread count.
//
// Semantics follow Hugging Face transformers for float32 models:
//   RMSNorm      x / sqrt(mean(x^2) + eps) * w (Gemma: * (1 + w)), the mean in double
//   RoPE         rotate-half pairs (i, i + d/2); angles pos * theta^(-2i/d) in
//                double; rope_scaling linear or llama3
//   attention    causal, grouped-query (query head h reads kv head h / (H / KV)),
//                scores q.k * head_dim^-1/2 (Gemma 2: query_pre_attn_scalar^-1/2),
//                soft-capped (Gemma 2), sliding window: query i sees key j iff
//                i - window < j <= i; softmax with the max subtracted, sums in double
//   MLP          down(act(gate x) * up x); Mixtral: softmax router over all
//                experts, top-k (ties to the lower index) renormalized to 1
//   Gemma        embeddings * sqrt(hidden_size); Gemma 2's four norms per
//                layer and final soft-capping of the logits
#ifndef LOWP_MODEL_FORWARD_H_
#define LOWP_MODEL_FORWARD_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "formats/format.h"
#include "model/batch.h"
#include "model/config.h"
#include "model/weights.h"
#include "quant/scheme.h"

namespace lowp {

// Where values are produced, in the order a layer produces them.
enum class Site : int {
  kEmbedding,  // the token's embedding row (scaled for Gemma)
  kAttnNorm,   // input_layernorm's output
  kQProj,      // q, k, v projections (bias included)
  kKProj,
  kVProj,
  kQaProj,        // DeepSeek-V3's latent attention: q_a_proj's output (q_b_proj's is kQProj),
  kKvaProj,       //   kv_a_proj_with_mqa's, kv_b_proj's (the keys' and values' heads),
  kKvbProj,
  kLatentNorm,    //   and the norms of the two latents
  kQkNorm,        // Qwen3's per-head norms of q and k
  kRope,          // q and k rotated
  kScores,        // q.k scaled (and soft-capped), the positions attended
  kSoftmax,       // attention probabilities
  kAttnValues,    // probabilities times values: o_proj's input
  kOProj,         // o_proj's output
  kPostAttnNorm,  // Gemma 2's norm of the attention output
  kResidual,      // the hidden state after each residual add
  kMlpNorm,       // post_attention_layernorm (Gemma 2: pre_feedforward_layernorm)
  kRouter,        // Mixtral's router logits
  kGateProj,
  kUpProj,
  kAct,     // act(gate)
  kActMul,  // act(gate) * up: down_proj's input
  kDownProj,
  kPostMlpNorm,  // Gemma 2's norm of the MLP output
  kFinalNorm,
  kLogits,  // lm_head's output (soft-capped for Gemma 2)
  kCount
};
constexpr int kSiteCount = static_cast<int>(Site::kCount);
absl::string_view SiteName(Site site);  // "attn_norm", "q_proj", ...

// What happened to the values a site produced.
struct SiteCounts {
  uint64_t values = 0;     // values produced
  uint64_t overflow = 0;   // finite before rounding to the compute format, inf or NaN after
  uint64_t saturated = 0;  // beyond the compute format's range, stored as its largest finite
  uint64_t flushed = 0;    // nonzero, rounded to zero by the compute format
  uint64_t nonfinite = 0;  // NaN or +-inf after the site, whatever the cause

  void Merge(const SiteCounts& other);
};

struct Census {
  std::array<SiteCounts, kSiteCount> sites{};
  void Merge(const Census& other);
  uint64_t nonfinite() const;
};

// llama.cpp's Hadamard rotation around a quantized KV cache (PR #21038,
// merged 2026-04-01, on by default since b8641 for every quantized cache
// type): after RoPE, each head of q and k is rotated by H_nk in blocks of nk
// values and each head of v by H_nv, in float32, before k and v are stored;
// the attention output is rotated back by H_nv (per head, in blocks) before
// o_proj. q.k is unchanged in exact arithmetic; what changes is what the
// cache's quantization sees.
//   kLlamaCpp  llama.cpp's sizes: nk = the largest power of two dividing
//              head_dim, nv = 64, and no rotation at all unless head_dim is
//              a multiple of 64 (llama-kv-cache.cpp's condition)
//   kBlocks    nk = nv = `block` (a power of two dividing head_dim), for
//              models llama.cpp leaves unrotated
struct KvRotation {
  enum Mode { kNone, kLlamaCpp, kBlocks } mode = kNone;
  int64_t block = 0;
};
// The block sizes {nk, nv} for heads of `head_dim`; {0, 0}: no rotation.
// InvalidArgument when kBlocks' block is not a power of two dividing it.
absl::StatusOr<std::pair<int64_t, int64_t>> KvRotationBlocks(const KvRotation& rotation,
                                                             int64_t head_dim);

// What is emulated; an empty field leaves that site in float32.
struct Emulation {
  // The input of every linear layer of the decoder layers, one row per token
  // (so "-channel" schemes scale per token, MX blocks run along the reduction
  // dimension, "-tensor" schemes take one scale per call: per sequence).
  std::shared_ptr<const Scheme> activations;
  // Each key (after RoPE) and value as the cache stores it, one row per token
  // and kv head (head_dim values).
  std::shared_ptr<const Scheme> kv;
  // Every site's values rounded to this format, nearest even, its own
  // overflow rule (fp16: to inf; bf16 and fp8 as the catalog says).
  std::optional<Format> compute;
  // llama.cpp's rotation of the KV cache (PR #21038, kernels/hadamard.h).
  KvRotation kv_rotation;
  // The input of each product with a matrix that has a stored_type as
  // llama.cpp's CPU backend converts it for that type's vec_dot_type
  // (codecs/ggml_vec_dot.h: q8_0, q8_1, q8_K, f16, bf16), lm_head's
  // included; instead of `activations` ("--activations ggml").
  bool ggml_products = false;

  bool empty() const {
    return !activations && !kv && !compute.has_value() && kv_rotation.mode == KvRotation::kNone &&
           !ggml_products;
  }
};

// Receives the input of every linear layer of a decoder layer as it enters
// the product (after the activations' emulation, if any): `in` holds rows of
// `cols` values, one per token (per token routed to the expert, for
// Mixtral's experts, whose index is `expert`; kSharedExpert for Qwen2-MoE's
// shared expert and its gate; -1 otherwise). q, k and v
// report the same input each. What an importance matrix is made of
// (eval/imatrix.h). Called from the thread running the layer, before the
// product reads the matrix (the GPTQ calibrator quantizes a stage's matrices
// there, eval/calibrator.h); for Mixtral's experts from several threads at
// once.
inline constexpr int64_t kSharedExpert = -2;
class LinearInputs {
 public:
  virtual ~LinearInputs() = default;
  virtual void Add(int64_t layer, Site site, int64_t expert, std::span<const float> in,
                   int64_t cols) = 0;
};

// One layer's keys and values of the positions run so far, as stored
// (after the kv scheme): [positions, kv_heads * head_dim] each.
struct LayerKv {
  std::vector<float> keys, values;
  int64_t positions = 0;

  void Clear() {
    keys.clear();
    values.clear();
    positions = 0;
  }
};

// The scratch arrays of the forward pass, kept between calls so that each
// layer reuses their memory. One per run of calls that do not overlap.
struct ForwardBuffers {
  std::vector<float> normed, in, q, k, v, attn, branch, gate, up, act_in, vec_dot;
  std::vector<float> q_latent, kv_latent;  // DeepSeek-V3's q_a and kv_a outputs
  std::vector<int64_t> positions;  // per row of the batch
  std::vector<uint8_t> long_rope;  // per row: rotated by LongRoPE's long factors
};

// Scales the embedding rows already in `hidden` ([batch rows, hidden_size])
// for Gemma and rounds them at Site::kEmbedding. InvalidArgument for a
// hidden state of the wrong size.
absl::Status Embed(const ModelConfig& config, const Emulation& emulation, std::span<float> hidden,
                   int threads, Census* census);

// Runs decoder layer `layer` (weights `w`) over `batch`: `hidden` ([batch
// rows, hidden_size]) in place; sequence s's keys and values appended to
// *kv[s], which must hold batch.sequences[s].first_position positions.
// `inputs`, when not null, receives every product's input.
absl::Status ForwardLayer(const ModelConfig& config, int64_t layer, const LayerWeights& w,
                          const Emulation& emulation, const Batch& batch, std::span<float> hidden,
                          std::span<LayerKv* const> kv, ForwardBuffers& buffers, int threads,
                          Census* census, LinearInputs* inputs = nullptr,
                          std::span<int32_t> routes = {});

// The longest sequence a run takes: the config's max_position_embeddings,
// or kMaxTokensWithoutPositions when the config gives none. A sequence not
// run `whole` from position 0 in one batch (generation, token by token) of
// a LongRoPE model stops at original_max_position_embeddings: beyond it
// transformers rotates the whole sequence by the long factors.
constexpr int64_t kMaxTokensWithoutPositions = 32768;
int64_t MaxSequenceTokens(const ModelConfig& config, bool whole = true);
// InvalidArgument naming the model and the limit when `length` exceeds it.
absl::Status CheckSequenceLength(const ModelConfig& config, int64_t length, bool whole = true);

// One ForwardLayer call of a run: one stream's batch, or one group of it.
struct LayerTask {
  const LayerWeights* weights = nullptr;
  const Emulation* emulation = nullptr;
  const Batch* batch = nullptr;
  std::span<float> hidden;
  std::span<LayerKv* const> kv;
  Census* census = nullptr;
  LinearInputs* inputs = nullptr;
  // A layer with experts writes here the experts each row took
  // ([rows, experts_per_token], by descending router weight); empty: none
  // asked.
  std::span<int32_t> routes;
};

// Whether a layer of `config` is too little work to split its products
// across threads: then whole tasks (streams, groups of sequences) run side by
// side instead.
bool SmallLayer(const ModelConfig& config);

// How many rows a run of `config` multiplies together (Batch::Make's
// group_rows): each sequence alone for a small model (its products are too
// little work to share; they run side by side), else kGroupRows.
int64_t ProductGroupRows(const ModelConfig& config);

// Runs every task's ForwardLayer for `layer`: side by side on the pool, one
// thread each, when the layer is small (a task's census is counted apart and
// merged, in order, after), else one after another on every thread, with
// `buffers`. The values are the same either way.
absl::Status RunLayerTasks(const ModelConfig& config, int64_t layer,
                           std::span<const LayerTask> tasks, ForwardBuffers& buffers, int threads);

// The final norm of every row of `hidden` into `normed` (same size).
void FinalNorm(const ModelConfig& config, std::span<const float> weight, const Emulation& emulation,
               std::span<const float> hidden, std::span<float> normed, int threads, Census* census);

// The logits of the batch's rows for `count` consecutive vocabulary rows
// whose lm_head rows are `head` ([count, hidden_size]): out[r, j] for row r
// of `normed` at out + r * ldc + j; soft-capped (Gemma 2) and rounded at
// Site::kLogits.
void Logits(const ModelConfig& config, const Emulation& emulation, const Batch& batch,
            std::span<const float> normed, std::span<const float> head, int64_t count, float* out,
            int64_t ldc, int threads, Census* census);

}  // namespace lowp

#endif  // LOWP_MODEL_FORWARD_H_
