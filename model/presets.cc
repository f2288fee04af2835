// Built-in models with their config.json values, and finding a model by
// preset name, config.json or snapshot directory (model/config.h).
#include <filesystem>
#include <tuple>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/config.h"

namespace lowp {

ModelConfig LlamaShape(std::string name, int64_t hidden, int64_t intermediate, int64_t layers,
                       int64_t heads, int64_t kv_heads, int64_t vocab, int64_t max_positions) {
  ModelConfig m;
  m.name = std::move(name);
  m.model_type = "llama";
  m.hidden_size = hidden;
  m.intermediate_size = intermediate;
  m.num_layers = layers;
  m.num_heads = heads;
  m.num_kv_heads = kv_heads;
  m.head_dim = hidden / heads;
  m.vocab_size = vocab;
  m.max_position_embeddings = max_positions;
  return m;
}

const std::vector<ModelConfig>& ModelPresets() {
  // Values from each model's config.json on the Hugging Face hub; the test
  // checks every total against the published parameter count.
  static const std::vector<ModelConfig>* presets = [] {
    const auto llama = LlamaShape;
    auto* list = new std::vector<ModelConfig>;
    list->push_back(llama("llama-3.1-8b", 4096, 14336, 32, 32, 8, 128256, 131072));
    list->push_back(llama("llama-3.1-70b", 8192, 28672, 80, 64, 8, 128256, 131072));
    list->push_back(llama("llama-3.1-405b", 16384, 53248, 126, 128, 8, 128256, 131072));
    // Llama 3 has the shapes of 3.1 with an 8K context.
    list->push_back(llama("llama-3-8b", 4096, 14336, 32, 32, 8, 128256, 8192));
    list->push_back(llama("llama-3-70b", 8192, 28672, 80, 64, 8, 128256, 8192));
    list->push_back(llama("llama-2-7b", 4096, 11008, 32, 32, 32, 32000, 4096));
    list->push_back(llama("llama-2-13b", 5120, 13824, 40, 40, 40, 32000, 4096));
    list->push_back(llama("llama-2-70b", 8192, 28672, 80, 64, 8, 32000, 4096));

    ModelConfig mistral = llama("mistral-7b", 4096, 14336, 32, 32, 8, 32000, 32768);  // v0.1
    mistral.model_type = "mistral";
    list->push_back(mistral);

    ModelConfig mixtral = llama("mixtral-8x7b", 4096, 14336, 32, 32, 8, 32000, 32768);
    mixtral.model_type = "mixtral";
    mixtral.num_experts = 8;
    mixtral.experts_per_token = 2;
    list->push_back(mixtral);

    // Qwen2 has biases on q, k and v whatever the config says.
    for (ModelConfig qwen : {llama("qwen2.5-7b", 3584, 18944, 28, 28, 4, 152064, 131072),
                             llama("qwen2.5-72b", 8192, 29568, 80, 64, 8, 152064, 131072)}) {
      qwen.model_type = "qwen2";
      qwen.attention_bias = true;
      list->push_back(qwen);
    }

    // Qwen3's mixtures of experts (Qwen/Qwen3-30B-A3B and -235B-A22B
    // config.json): 128 experts, 8 per token, head_dim 128, QK-norm; every
    // layer sparse; intermediate_size is unused there (no dense layer).
    for (ModelConfig qwen : {llama("qwen3-30b-a3b", 2048, 6144, 48, 32, 4, 151936, 40960),
                             llama("qwen3-235b-a22b", 4096, 12288, 94, 64, 4, 151936, 40960)}) {
      qwen.model_type = "qwen3_moe";
      qwen.head_dim = 128;
      qwen.qk_norm = true;
      qwen.num_experts = 128;
      qwen.experts_per_token = 8;
      qwen.moe_intermediate_size = qwen.hidden_size == 2048 ? 768 : 1536;
      qwen.norm_topk_prob = true;
      qwen.rope_theta = 1e6;
      list->push_back(qwen);
    }

    // gpt-oss (openai/gpt-oss-20b and -120b config.json): 64 heads of 64
    // over a hidden size of 2880, experts of 2880 with biases, 4 per token,
    // sinks, every other layer windowed (128), YaRN to 128K.
    for (auto [name, layers, experts] : {std::tuple{"gpt-oss-20b", 24, 32},
                                         std::tuple{"gpt-oss-120b", 36, 128}}) {
      ModelConfig oss = llama(name, 2880, 2880, layers, 64, 8, 201088, 131072);
      oss.model_type = "gpt_oss";
      oss.head_dim = 64;
      oss.num_experts = experts;
      oss.experts_per_token = 4;
      oss.attention_bias = oss.output_bias = true;
      oss.attention_sinks = oss.router_bias = oss.expert_bias = true;
      oss.routing = Routing::kTopKSoftmax;
      oss.swiglu_limit = 7;
      oss.rms_norm_eps = 1e-5;
      oss.rope_theta = 150000;
      oss.rope_scaling.type = "yarn";
      oss.rope_scaling.factor = 32;
      oss.rope_scaling.original_max_position_embeddings = 4096;
      oss.rope_scaling.truncate = false;
      oss.sliding_window = 128;
      oss.sliding_layers = SlidingLayers::kListed;
      for (int64_t i = 0; i < layers; ++i) oss.window_layers.push_back(i % 2 == 0);
      list->push_back(oss);
    }

    // Gemma 3 27B (google/gemma-3-27b-it's text_config): 62 layers, five of
    // every six windowed (1024), QK-norm, four norms a layer, tied.
    ModelConfig gemma3 = llama("gemma-3-27b", 5376, 21504, 62, 32, 16, 262208, 131072);
    gemma3.model_type = "gemma3_text";
    gemma3.head_dim = 128;
    gemma3.qk_norm = true;
    gemma3.norms_per_layer = 4;
    gemma3.tie_word_embeddings = true;
    gemma3.norm_adds_one = gemma3.scale_embeddings = true;
    gemma3.activation = "gelu_pytorch_tanh";
    gemma3.query_pre_attn_scalar = 168;
    gemma3.rope_theta = 1e6;
    gemma3.rope_local_theta = 10000;
    gemma3.rope_scaling.type = "linear";
    gemma3.rope_scaling.factor = 8;
    gemma3.sliding_window = 1024;
    gemma3.sliding_layers = SlidingLayers::kListed;
    for (int64_t i = 0; i < 62; ++i) gemma3.window_layers.push_back((i + 1) % 6 != 0);
    list->push_back(gemma3);

    // Phi-4 (microsoft/phi-4): a Llama shape stored with fused qkv_proj and
    // gate_up_proj.
    ModelConfig phi4 = llama("phi-4", 5120, 17920, 40, 40, 10, 100352, 16384);
    phi4.model_type = "phi3";
    phi4.fused_projections = true;
    phi4.rope_theta = 250000;
    phi4.rms_norm_eps = 1e-5;
    list->push_back(phi4);

    // DeepSeek-V3 (deepseek-ai/DeepSeek-V3's config.json; Kimi K2 is this
    // shape with 384 experts and 64 heads): multi-head latent attention, 3
    // dense layers, then 256 routed experts of 2048 (8 per token) and one
    // shared expert, YaRN to 160K. The checkpoint's layer 61 (multi-token
    // prediction, which transformers does not run) is not counted.
    ModelConfig deepseek = llama("deepseek-v3", 7168, 18432, 61, 128, 128, 129280, 163840);
    deepseek.model_type = "deepseek_v3";
    deepseek.num_experts = 256;
    deepseek.experts_per_token = 8;
    deepseek.moe_intermediate_size = 2048;
    deepseek.shared_expert_intermediate_size = 2048;
    deepseek.shared_expert_gated = false;
    deepseek.routing = Routing::kSigmoidGroups;
    deepseek.norm_topk_prob = true;
    deepseek.routed_scaling_factor = 2.5;
    deepseek.n_group = 8;
    deepseek.topk_group = 4;
    deepseek.first_k_dense_replace = 3;
    deepseek.q_lora_rank = 1536;
    deepseek.kv_lora_rank = 512;
    deepseek.qk_nope_head_dim = 128;
    deepseek.qk_rope_head_dim = 64;
    deepseek.v_head_dim = 128;
    deepseek.head_dim = 192;
    deepseek.rope_interleave = true;
    deepseek.rms_norm_eps = 1e-6;
    deepseek.rope_scaling.type = "yarn";
    deepseek.rope_scaling.factor = 40;
    deepseek.rope_scaling.original_max_position_embeddings = 4096;
    deepseek.rope_scaling.beta_fast = 32;
    deepseek.rope_scaling.beta_slow = 1;
    deepseek.rope_scaling.mscale = 1;
    deepseek.rope_scaling.mscale_all_dim = 1;
    list->push_back(deepseek);

    // GPT-3 175B as Korthikanti et al. 2022 size it: LayerNorm with biases,
    // biases on every linear, a 4h non-gated MLP, learned positions, an
    // output layer tied to the embedding, dropout in training.
    ModelConfig gpt = llama("gpt3-175b", 12288, 4 * 12288, 96, 96, 96, 51200, 2048);
    gpt.model_type = "gpt";
    gpt.tie_word_embeddings = true;
    gpt.gated_mlp = false;
    gpt.norm_bias = true;
    gpt.linear_bias = true;
    gpt.learned_positions = true;
    gpt.dropout = true;
    list->push_back(gpt);
    return list;
  }();
  return *presets;
}

absl::StatusOr<ModelConfig> FindModel(absl::string_view preset_or_path) {
  const std::string wanted = absl::AsciiStrToLower(preset_or_path);
  for (const ModelConfig& m : ModelPresets()) {
    if (m.name == wanted) return m;
  }
  const std::string path(preset_or_path);
  std::error_code error;
  // A Hugging Face snapshot directory: its config.json.
  if (std::filesystem::is_directory(path, error)) {
    const std::string config = path + "/config.json";
    if (!std::filesystem::exists(config, error)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": a directory without config.json"));
    }
    absl::StatusOr<ModelConfig> m = ReadModelConfig(config);
    if (m.ok()) m->name = path;
    return m;
  }
  if (std::filesystem::exists(path, error)) return ReadModelConfig(path);
  std::vector<std::string> names;
  for (const ModelConfig& m : ModelPresets()) names.push_back(m.name);
  return absl::InvalidArgumentError(absl::StrCat("model \"", preset_or_path, "\" is not a preset (",
                                                 absl::StrJoin(names, ", "),
                                                 "), a config.json file or a directory with one"));
}
}  // namespace lowp
