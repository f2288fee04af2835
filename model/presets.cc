// Built-in models with their config.json values, and finding a model by
// preset name, config.json or snapshot directory (model/config.h).
#include <filesystem>
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
