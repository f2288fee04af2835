// The model description shared by the memory model (sizing/) and the forward
// pass (model/forward.h): a decoder-only transformer described by the fields
// of a Hugging Face config.json, the tensors it holds, and their parameter
// counts by component.
//
// The tensors are listed with their shapes and how tensor parallelism splits
// them, so that the memory model can price each one in its own format (a
// quantization scheme's bits depend on the matrix shape through its groups)
// and on each device's shard.
#ifndef LOWP_MODEL_CONFIG_H_
#define LOWP_MODEL_CONFIG_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lowp {

// config.json's rope_scaling. Parsing keeps any type (the memory model does
// not care); the forward pass implements none, linear, llama3, yarn and
// longrope and refuses the others by name.
struct RopeScaling {
  std::string type;  // "" (none or "default"), "linear", "llama3", "yarn", "longrope", ...
  double factor = 1;
  double low_freq_factor = 1;   // llama3
  double high_freq_factor = 4;  // llama3
  // llama3 and yarn: the pretrained context (llama3's default 8192; yarn's
  // max_position_embeddings); longrope: the context the short factors serve.
  // yarn and longrope take the top-level original_max_position_embeddings
  // where there is one (Phi-3), and factor = max_position_embeddings / it
  // when the config gives no factor (modeling_rope_utils on transformers'
  // main branch).
  int64_t original_max_position_embeddings = 8192;
  // yarn (gpt-oss, DeepSeek-V3): the correction range's rotations, whether
  // its ends are rounded outwards, and the factor cos and sin are scaled by
  // (0: Hugging Face's default from factor, mscale and mscale_all_dim).
  double beta_fast = 32;
  double beta_slow = 1;
  bool truncate = true;
  double attention_factor = 0;
  double mscale = 0;
  double mscale_all_dim = 0;
  // longrope (Phi-3): each frequency's divisor, head_dim / 2 of each.
  std::vector<double> short_factor{}, long_factor{};
};

// How a mixture of experts picks each token's experts.
enum class Routing {
  kSoftmaxTopK,  // softmax over all experts, then the top k (Mixtral, Qwen)
  kTopKSoftmax,  // the top k logits, then a softmax over them (gpt-oss)
  // sigmoid scores; with the bias added, the best topk_group of n_group
  // groups (by each group's top 2), then the top k in them (DeepSeek-V3)
  kSigmoidGroups,
};

// No real model has a dimension near 2^40; larger values are typos or
// hostile input, and bounding them keeps the products of two dimensions
// exact in int64.
constexpr int64_t kMaxModelDimension = int64_t{1} << 40;
// Gemma 2 has four norms per decoder layer; the others two.
constexpr int kMaxNormsPerLayer = 4;

// Which layers a sliding window applies to.
enum class SlidingLayers {
  kAll,   // Mistral, Mixtral
  kEven,  // Gemma 2: layers 0, 2, 4, ... (the others attend globally)
  kFrom,  // Qwen2 with use_sliding_window: layers >= max_window_layers
  kListed,  // Gemma 3: the layers ModelConfig::window_layers marks
};

struct ModelConfig {
  std::string name;        // preset name, or the config file's path
  std::string model_type;  // llama, mistral, qwen2(_moe), qwen3(_moe), gemma(2, 3_text), mixtral, gpt_oss, phi3, gpt
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;  // per expert for mixtures of experts
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // = num_heads without grouped-query attention
  int64_t head_dim = 0;      // hidden_size / num_heads unless the config says
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;  // 0 when unknown
  bool tie_word_embeddings = false;
  int64_t num_experts = 0;  // 0: a dense MLP
  int64_t experts_per_token = 0;
  // Qwen3-MoE: each expert's width (0: intermediate_size, Mixtral's), the
  // router's top-k weights renormalized to sum to 1 (Mixtral always), and
  // which layers have experts (MoeLayer).
  int64_t moe_intermediate_size = 0;
  bool norm_topk_prob = true;
  int64_t decoder_sparse_step = 1;
  std::vector<int64_t> mlp_only_layers;
  // Qwen2-MoE's shared expert's width (0: none).
  int64_t shared_expert_intermediate_size = 0;
  bool gated_mlp = true;           // gate, up, down (SwiGLU, GeGLU); else up, down
  bool attention_bias = false;     // biases on q, k, v (Qwen2)
  bool output_bias = false;        // a bias on o_proj too (attention_bias of llama, qwen3, gemma)
  bool mlp_bias = false;           // biases on gate, up, down (Llama's mlp_bias)
  bool qk_norm = false;            // per-head RMSNorm of q and k (Qwen3)
  int norms_per_layer = 2;         // Gemma 2 has 4
  bool norm_bias = false;          // LayerNorm with a bias (GPT)
  bool linear_bias = false;        // a bias on every linear layer (GPT)
  bool learned_positions = false;  // a position-embedding table (GPT)
  // The training graph keeps dropout masks (Korthikanti et al.'s GPT); the
  // Llama family trains without dropout.
  bool dropout = false;

  // What the forward pass needs beyond the shapes (config.json's names and
  // Hugging Face's defaults; the memory model ignores them).
  double rms_norm_eps = 1e-6;
  double rope_theta = 10000;
  RopeScaling rope_scaling;
  std::string activation = "silu";  // hidden_act / hidden_activation
  bool norm_adds_one = false;       // Gemma's RMSNorm: x * (1 + w)
  bool scale_embeddings = false;    // Gemma: embeddings times sqrt(hidden_size)
  // Attention over the last `sliding_window` positions (the query's own
  // included) in the layers SlidingLayer names; 0: no window.
  int64_t sliding_window = 0;
  SlidingLayers sliding_layers = SlidingLayers::kAll;
  int64_t first_sliding_layer = 0;     // kFrom: Qwen2's max_window_layers
  std::vector<bool> window_layers;     // kListed: per layer, whether it is windowed
  // Gemma 3: the RoPE base of the windowed layers (rope_local_base_freq),
  // whose angles take no rope_scaling; 0: every layer's is rope_theta.
  double rope_local_theta = 0;
  double query_pre_attn_scalar = 0;    // Gemma 2: scores scaled by its -1/2 power; 0: head_dim
  double attn_logit_softcapping = 0;   // Gemma 2: scores = c tanh(scores / c); 0: none
  double final_logit_softcapping = 0;  // Gemma 2: the same on the logits
  int64_t bos_token_id = 1;

  // gpt-oss: a learned logit per head joins each softmax and is dropped
  // after it (self_attn.sinks); the router has a bias; each expert has
  // biases and a clamped SwiGLU: gate <= limit, |up| <= limit, out =
  // (up + 1) * gate * sigmoid(alpha gate) (limit 0: the config's activation).
  bool attention_sinks = false;
  Routing routing = Routing::kSoftmaxTopK;
  bool router_bias = false;
  bool expert_bias = false;
  double swiglu_limit = 0;
  double swiglu_alpha = 1.702;
  // Phi-3: RoPE rotates the first rotary_dim values of each head
  // (partial_rotary_factor * head_dim); 0: all of them. q, k, v and gate,
  // up are stored fused (qkv_proj, gate_up_proj) and read apart.
  int64_t rotary_dim = 0;
  bool fused_projections = false;

  // DeepSeek-V3 (Kimi K2): multi-head latent attention when kv_lora_rank >
  // 0. q through a q_lora_rank bottleneck (q_a_proj, its norm, q_b_proj; 0:
  // q_proj); keys and values from a kv_lora_rank latent (kv_a_proj_with_mqa,
  // its norm, kv_b_proj) and one rotated key part all heads share: a key is
  // qk_nope_head_dim + qk_rope_head_dim wide, a value v_head_dim. RoPE on
  // interleaved pairs when rope_interleave.
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;
  bool rope_interleave = false;
  // Its mixture: the first first_k_dense_replace layers dense, routing by
  // Routing::kSigmoidGroups with mlp.gate.e_score_correction_bias, the
  // weights times routed_scaling_factor; the shared experts
  // (shared_expert_intermediate_size wide in all) without Qwen2-MoE's gate.
  int64_t first_k_dense_replace = 0;
  int64_t n_group = 1;
  int64_t topk_group = 1;
  double routed_scaling_factor = 1;
  bool shared_expert_gated = true;
};

// A key's and a value's width per head: head_dim, or MLA's
// qk_nope_head_dim + qk_rope_head_dim and v_head_dim.
int64_t KeyHeadDim(const ModelConfig& model);
int64_t ValueHeadDim(const ModelConfig& model);

// The values of each head RoPE rotates (rotary_dim, else head_dim).
int64_t RotaryDim(const ModelConfig& model);

// Whether decoder layer `layer` attends through the sliding window.
bool SlidingLayer(const ModelConfig& model, int64_t layer);

// Whether decoder layer `layer`'s MLP is a mixture of experts (Qwen3-MoE:
// not in mlp_only_layers and (layer + 1) a multiple of
// decoder_sparse_step); the others are dense, intermediate_size wide.
bool MoeLayer(const ModelConfig& model, int64_t layer);
// The width of one expert's MLP.
int64_t ExpertWidth(const ModelConfig& model);

// The layer a tensor belongs to, for parameter counts by component.
enum class Component { kEmbedding, kAttention, kMlp, kRouter, kNorm, kLmHead };
absl::string_view ComponentName(Component c);  // "embedding", "attention", ...

// How tensor parallelism divides a tensor among `tp` devices. A vector
// ([1, n]: a bias) is divided along its n elements.
enum class Split {
  kReplicated,  // every device holds all of it (norms, router, row-parallel biases)
  kRows,        // rows divided: column-parallel linears (q, gate, up), their
                // biases, and vocabulary-parallel embedding and lm_head
  kKvHeads,     // k and v and their biases: divided by whole kv heads, one
                // head replicated per device when there are fewer heads than tp
  kCols,        // columns divided: row-parallel linears (o, down)
};

// One weight tensor, or `count` identical ones (the experts of a layer). A
// matrix is [rows, cols] = [out_features, in_features] as stored by PyTorch;
// a vector (norm weight, bias) is [1, n].
struct TensorSpec {
  std::string name;  // "q_proj", "experts.down_proj", "embed_tokens", ...
  Component component;
  int64_t rows = 0;
  int64_t cols = 0;
  int64_t count = 1;
  Split split = Split::kReplicated;
  // A linear layer's weight matrix inside a decoder layer: what weight
  // quantization schemes apply to (not embeddings, lm_head, norms, biases,
  // the router).
  bool linear = false;
  // Name of the linear for LoRA targets: q, k, v, o, gate, up, down; empty
  // for others.
  std::string lora_name;

  int64_t parameters() const { return rows * cols * count; }
};

// Tensors before the first decoder layer (token and position embeddings).
std::vector<TensorSpec> InputTensors(const ModelConfig& model);
// Tensors of decoder layer `layer`: its attention (multi-head latent
// attention's when kv_lora_rank > 0), a dense MLP or experts as MoeLayer
// says, its norms.
std::vector<TensorSpec> LayerTensors(const ModelConfig& model, int64_t layer);
// The kinds of decoder layer a model has (one, or DeepSeek-V3's dense
// first layers and its mixture's), each with its tensors and its layers in
// order; kinds in the order of their first layer.
struct LayerKind {
  std::vector<TensorSpec> tensors;
  bool moe = false;
  std::vector<int64_t> layers;
};
std::vector<LayerKind> LayerKinds(const ModelConfig& model);
// Tensors after the last layer: the final norm and, unless the embeddings
// are tied, the lm_head.
std::vector<TensorSpec> OutputTensors(const ModelConfig& model);

struct ParameterCounts {
  int64_t embedding = 0;  // token (and position) embeddings
  int64_t attention = 0;  // q, k, v, o and their biases and q/k norms, all layers
  int64_t mlp = 0;        // dense MLP or all experts, all layers
  int64_t router = 0;
  int64_t norms = 0;    // layer norms and the final norm
  int64_t lm_head = 0;  // 0 when tied to the embedding
  int64_t total = 0;
  // Parameters one token passes through (mixtures of experts: top-k experts).
  int64_t active = 0;
};
ParameterCounts CountParameters(const ModelConfig& model);

// Reads a Hugging Face config.json (nlohmann-json; untrusted input). Text
// configs of multimodal models (a "text_config" object) are read from there.
// A missing, mistyped or absurd field (zero, negative, hidden_size not a
// multiple of the heads without head_dim, more kv heads than heads or not a
// divisor of them, sizes above 2^40) is InvalidArgument naming the file and
// the field; an unsupported model_type names the supported ones.
absl::StatusOr<ModelConfig> ParseModelConfig(absl::string_view json, absl::string_view source);
absl::StatusOr<ModelConfig> ReadModelConfig(const std::string& path);

// A llama-family description of these shapes (head_dim hidden / heads, the
// forward fields Hugging Face's defaults): what the presets and the tests'
// random checkpoints are made from.
ModelConfig LlamaShape(std::string name, int64_t hidden, int64_t intermediate, int64_t layers,
                       int64_t heads, int64_t kv_heads, int64_t vocab, int64_t max_positions);

// Built-in models with their config.json values (llama-3.1-8b, ...).
const std::vector<ModelConfig>& ModelPresets();
// A preset by name (case-insensitive), or else a path to a config.json or to
// a Hugging Face snapshot directory holding one (the model is then named by
// the directory).
absl::StatusOr<ModelConfig> FindModel(absl::string_view preset_or_path);

// Checks the fields of a config built in code (the same rules as parsing).
absl::Status ValidateModel(const ModelConfig& model);

}  // namespace lowp

#endif  // LOWP_MODEL_CONFIG_H_
