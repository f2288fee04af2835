// The float32 forward pass of a decoder-only transformer (model/weights.h),
// with every emulation site: the inputs of the linear layers (activations),
// the keys and values as the KV cache stores them, and the result of every
// matrix product and elementwise step (compute) can each be put through a
// lowp scheme or format. Matrix products go to OpenBLAS's sgemm, run on the
// calling thread (one BLAS thread), so a sequence's logits never depend on
// how many sequences run beside it.
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
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "formats/format.h"
#include "model/weights.h"
#include "quant/scheme.h"

namespace lowp {

// Where values are produced, in the order a layer produces them.
enum class Site : int {
  kEmbedding,      // the token's embedding row (scaled for Gemma)
  kAttnNorm,       // input_layernorm's output
  kQProj,          // q, k, v projections (bias included)
  kKProj,
  kVProj,
  kQkNorm,         // Qwen3's per-head norms of q and k
  kRope,           // q and k rotated
  kScores,         // q.k scaled (and soft-capped), the positions attended
  kSoftmax,        // attention probabilities
  kAttnValues,     // probabilities times values: o_proj's input
  kOProj,          // o_proj's output
  kPostAttnNorm,   // Gemma 2's norm of the attention output
  kResidual,       // the hidden state after each residual add
  kMlpNorm,        // post_attention_layernorm (Gemma 2: pre_feedforward_layernorm)
  kRouter,         // Mixtral's router logits
  kGateProj,
  kUpProj,
  kAct,            // act(gate)
  kActMul,         // act(gate) * up: down_proj's input
  kDownProj,
  kPostMlpNorm,    // Gemma 2's norm of the MLP output
  kFinalNorm,
  kLogits,         // lm_head's output (soft-capped for Gemma 2)
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

  bool empty() const { return !activations && !kv && !compute.has_value(); }
};

// Keys and values of the positions run so far, per layer, as stored (after
// the kv scheme): [positions, kv_heads * head_dim] each.
struct KvCache {
  std::vector<std::vector<float>> keys, values;
  int64_t positions = 0;
};

// The hidden state after each decoder layer of the tokens run.
struct LayerTrace {
  std::vector<std::vector<float>> hidden;  // per layer [tokens, hidden_size]
};

// Runs `tokens` at positions cache.positions onward, appending their keys
// and values to `cache`, and writes their logits ([tokens, vocab_size]).
// InvalidArgument for a token outside [0, vocab_size) naming its index, or a
// logits span of the wrong size. `census` and `trace` may be null.
absl::Status Forward(const ModelWeights& weights, const Emulation& emulation,
                     std::span<const int32_t> tokens, KvCache& cache, std::span<float> logits,
                     Census* census = nullptr, LayerTrace* trace = nullptr);

}  // namespace lowp

#endif  // LOWP_MODEL_FORWARD_H_
