// Model shapes: every preset's parameter total against the published count,
// the tensor lists by component and split, config.json files as Hugging Face
// ships them (tests/data/configs) and every way a config.json can be wrong.
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/weights.h"

namespace lowp {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kConfigDir = std::string(LOWP_TEST_DATA_DIR) + "/configs/";

ModelConfig Preset(const std::string& name) {
  absl::StatusOr<ModelConfig> model = FindModel(name);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : ModelConfig();
}

ModelConfig ReadConfig(const std::string& file) {
  absl::StatusOr<ModelConfig> model = ReadModelConfig(kConfigDir + file);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : ModelConfig();
}

const TensorSpec* FindTensor(const std::vector<TensorSpec>& tensors, const std::string& name) {
  for (const TensorSpec& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// Published totals (the safetensors parameter counts of the Hugging Face
// checkpoints).
TEST(ModelPresetsTest, TotalsMatchPublishedCounts) {
  const std::map<std::string, int64_t> published = {
      {"llama-3.1-8b", 8'030'261'248},     {"llama-3.1-70b", 70'553'706'496},
      {"llama-3.1-405b", 405'853'388'800}, {"llama-3-8b", 8'030'261'248},
      {"llama-3-70b", 70'553'706'496},     {"llama-2-7b", 6'738'415'616},
      {"llama-2-13b", 13'015'864'320},     {"llama-2-70b", 68'976'648'192},
      {"mistral-7b", 7'241'732'096},       {"mixtral-8x7b", 46'702'792'704},
      {"qwen2.5-7b", 7'615'616'512},       {"qwen2.5-72b", 72'706'203'648},
      // Qwen's model cards: 30.5B and 235B in all.
      {"qwen3-30b-a3b", 30'532'122'624},   {"qwen3-235b-a22b", 235'093'634'560},
      // microsoft/phi-4's safetensors: 29,319,014,400 bytes of bf16.
      {"phi-4", 14'659'507'200},
  };
  for (const auto& [name, total] : published) {
    const ParameterCounts counts = CountParameters(Preset(name));
    EXPECT_EQ(counts.total, total) << name;
    EXPECT_EQ(counts.embedding + counts.attention + counts.mlp + counts.router + counts.norms +
                  counts.lm_head,
              counts.total)
        << name;
  }
}

TEST(ModelPresetsTest, EveryPresetIsValidAndFoundByName) {
  for (const ModelConfig& preset : ModelPresets()) {
    EXPECT_TRUE(ValidateModel(preset).ok()) << ValidateModel(preset);
    EXPECT_EQ(Preset(preset.name).name, preset.name);
  }
  EXPECT_EQ(Preset("Llama-3.1-8B").name, "llama-3.1-8b");
  EXPECT_EQ(Preset("LLAMA-3-70B").num_layers, 80);
}

TEST(ModelPresetsTest, Llama31_8bByComponent) {
  const ParameterCounts counts = CountParameters(Preset("llama-3.1-8b"));
  EXPECT_EQ(counts.embedding, 525'336'576);
  EXPECT_EQ(counts.lm_head, 525'336'576);
  EXPECT_EQ(counts.norms, 65 * 4096);  // two per layer and the final one
  EXPECT_EQ(counts.attention, 32 * int64_t{41'943'040});
  EXPECT_EQ(counts.mlp, 32 * int64_t{176'160'768});
  EXPECT_EQ(counts.router, 0);
  EXPECT_EQ(counts.active, counts.total);
}

// GPT-3 175B as Korthikanti et al. count it. Per layer: q, k, v, o are 4h^2
// with 4h of biases; the MLP's up and down are 8h^2 with 4h + h of biases;
// two LayerNorms are 4h. That is 12h^2 + 13h a layer. Outside the layers:
// the token and position embeddings (V + 2048)h, the final LayerNorm 2h, and
// no lm_head (tied).
TEST(ModelPresetsTest, Gpt3ClosedForm) {
  const ModelConfig gpt = Preset("gpt3-175b");
  const int64_t L = 96, h = 12288, V = 51200;
  const ParameterCounts counts = CountParameters(gpt);
  EXPECT_EQ(counts.total, 12 * L * h * h + 13 * L * h + (V + 2048) * h + 2 * h);
  EXPECT_EQ(counts.total, 174'615'846'912);
  EXPECT_GT(counts.total, 174'000'000'000);
  EXPECT_LT(counts.total, 176'000'000'000);
  EXPECT_EQ(counts.lm_head, 0);
  EXPECT_EQ(counts.embedding, (V + 2048) * h);
  EXPECT_TRUE(gpt.dropout);
  EXPECT_EQ(gpt.model_type, "gpt");
}

// Mixtral: each token passes through 2 of the 8 experts, so the active count
// is the total less 6 experts' MLPs (3 matrices of 4096 x 14336) per layer.
TEST(ModelPresetsTest, MixtralActiveParameters) {
  const ParameterCounts counts = CountParameters(Preset("mixtral-8x7b"));
  EXPECT_EQ(counts.router, 32 * 8 * 4096);
  EXPECT_EQ(counts.active, counts.total - int64_t{32} * 6 * 3 * 4096 * 14336);
  EXPECT_EQ(counts.active, 12'879'925'248);
}

// Qwen3's mixtures of experts: 8 of 128 experts per token, each 3 matrices
// of hidden x moe_intermediate_size (the model cards' 3.3B and 22B active).
TEST(ModelPresetsTest, Qwen3MoeActiveParameters) {
  for (const auto& [name, layers, hidden, width, active] :
       {std::tuple<const char*, int64_t, int64_t, int64_t, int64_t>{"qwen3-30b-a3b", 48, 2048, 768,
                                                                    3'353'032'704},
        {"qwen3-235b-a22b", 94, 4096, 1536, 22'190'763'520}}) {
    const ParameterCounts counts = CountParameters(Preset(name));
    EXPECT_EQ(counts.router, layers * 128 * hidden) << name;
    EXPECT_EQ(counts.active, counts.total - layers * 120 * 3 * hidden * width) << name;
    EXPECT_EQ(counts.active, active) << name;
  }
}

// Qwen3-MoE's config.json fields: Qwen3MoeConfig's defaults where absent,
// dense layers by mlp_only_layers and decoder_sparse_step.
TEST(ParseModelConfigTest, Qwen3MoeFields) {
  const std::string base = R"({"model_type": "qwen3_moe", "hidden_size": 64,
      "intermediate_size": 96, "num_hidden_layers": 4, "num_attention_heads": 4, "head_dim": 16,
      "vocab_size": 100)";
  absl::StatusOr<ModelConfig> m = ParseModelConfig(base + "}", "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->num_experts, 128);
  EXPECT_EQ(m->experts_per_token, 8);
  EXPECT_EQ(m->moe_intermediate_size, 768);
  EXPECT_FALSE(m->norm_topk_prob);
  EXPECT_TRUE(m->qk_norm);
  EXPECT_EQ(ExpertWidth(*m), 768);
  for (int64_t layer = 0; layer < 4; ++layer) EXPECT_TRUE(MoeLayer(*m, layer));
  m = ParseModelConfig(base + R"(, "num_experts": 8, "num_experts_per_tok": 2,
      "moe_intermediate_size": 32, "norm_topk_prob": true, "decoder_sparse_step": 2,
      "mlp_only_layers": [3]})", "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->norm_topk_prob);
  EXPECT_FALSE(MoeLayer(*m, 0));
  EXPECT_TRUE(MoeLayer(*m, 1));
  EXPECT_FALSE(MoeLayer(*m, 2));
  EXPECT_FALSE(MoeLayer(*m, 3));  // (3 + 1) % 2 == 0, but listed dense
  for (const auto& [extra, field] :
       {std::pair<std::string, std::string>{R"(, "mlp_only_layers": 3})", "mlp_only_layers"},
        {R"(, "mlp_only_layers": [-1]})", "mlp_only_layers"},
        {R"(, "decoder_sparse_step": 0})", "decoder_sparse_step"},
        {R"(, "num_experts": 4, "num_experts_per_tok": 5})", "num_experts_per_tok"}}) {
    absl::StatusOr<ModelConfig> bad = ParseModelConfig(base + extra, "c.json");
    EXPECT_THAT(bad.status().message(), HasSubstr(field)) << extra;
  }
  // Qwen2-MoE: Qwen2MoeConfig's defaults (Qwen1.5-MoE-A2.7B's shape), a
  // shared expert, biases on q, k and v, no QK-norm; counted as active.
  std::string qwen2 = base;
  qwen2.replace(qwen2.find("qwen3_moe"), 9, "qwen2_moe");
  m = ParseModelConfig(qwen2 + "}", "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->num_experts, 60);
  EXPECT_EQ(m->experts_per_token, 4);
  EXPECT_EQ(m->moe_intermediate_size, 1408);
  EXPECT_EQ(m->shared_expert_intermediate_size, 5632);
  EXPECT_TRUE(m->attention_bias);
  EXPECT_FALSE(m->qk_norm);
  const ParameterCounts counts = CountParameters(*m);
  const int64_t shared = 4 * (3 * 64 * 5632 + 64);  // the MLP and its gate, every layer
  EXPECT_EQ(counts.total - counts.active, 4 * 56 * 3 * 64 * 1408);
  EXPECT_GE(counts.active, shared);
}

// Gemma 3's windowed layers: every sliding_window_pattern-th layer global
// (6 by default), or as layer_types lists them; its two RoPE bases.
TEST(ParseModelConfigTest, Gemma3Layers) {
  const std::string base = R"({"model_type": "gemma3_text", "hidden_size": 64,
      "intermediate_size": 96, "num_hidden_layers": 7, "num_attention_heads": 4, "head_dim": 16,
      "vocab_size": 100, "sliding_window": 512)";
  absl::StatusOr<ModelConfig> m = ParseModelConfig(base + "}", "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  for (int64_t layer = 0; layer < 7; ++layer) EXPECT_EQ(SlidingLayer(*m, layer), layer != 5);
  EXPECT_EQ(m->rope_theta, 1e6);
  EXPECT_EQ(m->rope_local_theta, 10000);
  EXPECT_EQ(m->query_pre_attn_scalar, 256);
  EXPECT_EQ(m->final_logit_softcapping, 0);
  EXPECT_TRUE(m->tie_word_embeddings);
  EXPECT_TRUE(m->qk_norm);
  EXPECT_EQ(m->norms_per_layer, 4);
  m = ParseModelConfig(base + R"(, "layer_types": ["full_attention", "sliding_attention",
      "full_attention", "full_attention", "full_attention", "full_attention",
      "sliding_attention"]})", "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(SlidingLayer(*m, 1));
  EXPECT_FALSE(SlidingLayer(*m, 5));
  EXPECT_TRUE(SlidingLayer(*m, 6));
  for (const auto& [extra, message] : {std::pair<std::string, std::string>{
                                           R"(, "layer_types": ["full_attention"]})", "lists 1"},
                                       {R"(, "layer_types": ["full_attention", "chunked", "a", "b",
                                             "c", "d", "e"]})",
                                        "chunked"},
                                       {R"(, "rope_local_base_freq": -1})", "rope_local_base_freq"}}) {
    absl::StatusOr<ModelConfig> bad = ParseModelConfig(base + extra, "c.json");
    EXPECT_THAT(bad.status().message(), HasSubstr(message)) << extra;
  }
}

TEST(TensorListsTest, LlamaLayerNamesSplitsAndLora) {
  const ModelConfig model = Preset("llama-3.1-8b");
  const std::vector<TensorSpec> layer = LayerTensors(model, 0);
  struct Expected {
    const char* name;
    int64_t rows, cols;
    Split split;
    const char* lora;
  };
  const Expected linears[] = {
      {"q_proj", 4096, 4096, Split::kRows, "q"},
      {"k_proj", 1024, 4096, Split::kKvHeads, "k"},
      {"v_proj", 1024, 4096, Split::kKvHeads, "v"},
      {"o_proj", 4096, 4096, Split::kCols, "o"},
      {"gate_proj", 14336, 4096, Split::kRows, "gate"},
      {"up_proj", 14336, 4096, Split::kRows, "up"},
      {"down_proj", 4096, 14336, Split::kCols, "down"},
  };
  for (const Expected& e : linears) {
    const TensorSpec* t = FindTensor(layer, e.name);
    ASSERT_NE(t, nullptr) << e.name;
    EXPECT_EQ(t->rows, e.rows) << e.name;
    EXPECT_EQ(t->cols, e.cols) << e.name;
    EXPECT_EQ(t->split, e.split) << e.name;
    EXPECT_EQ(t->lora_name, e.lora) << e.name;
    EXPECT_TRUE(t->linear) << e.name;
  }
  for (const char* norm : {"input_layernorm", "post_attention_layernorm"}) {
    const TensorSpec* t = FindTensor(layer, norm);
    ASSERT_NE(t, nullptr) << norm;
    EXPECT_EQ(t->component, Component::kNorm);
    EXPECT_EQ(t->split, Split::kReplicated);
    EXPECT_FALSE(t->linear);
  }
  EXPECT_EQ(layer.size(), 9u);

  const std::vector<TensorSpec> input = InputTensors(model);
  ASSERT_EQ(input.size(), 1u);
  EXPECT_EQ(input[0].component, Component::kEmbedding);
  EXPECT_EQ(input[0].split, Split::kRows);
  EXPECT_FALSE(input[0].linear);
  const std::vector<TensorSpec> output = OutputTensors(model);
  ASSERT_EQ(output.size(), 2u);
  EXPECT_EQ(output[1].name, "lm_head");
  EXPECT_EQ(output[1].component, Component::kLmHead);
  EXPECT_EQ(output[1].split, Split::kRows);
  EXPECT_FALSE(output[1].linear);
}

TEST(TensorListsTest, GptBiasesAndPositions) {
  const ModelConfig gpt = Preset("gpt3-175b");
  const std::vector<TensorSpec> layer = LayerTensors(gpt, 0);
  EXPECT_EQ(FindTensor(layer, "gate_proj"), nullptr);
  const std::pair<const char*, Split> biases[] = {
      {"q_proj.bias", Split::kRows},
      {"k_proj.bias", Split::kKvHeads},
      {"v_proj.bias", Split::kKvHeads},
      {"o_proj.bias", Split::kReplicated},
      {"up_proj.bias", Split::kRows},
      {"down_proj.bias", Split::kReplicated},
      {"input_layernorm.bias", Split::kReplicated},
  };
  for (const auto& [name, split] : biases) {
    const TensorSpec* t = FindTensor(layer, name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->rows, 1) << name;
    EXPECT_EQ(t->split, split) << name;
    EXPECT_FALSE(t->linear) << name;
    EXPECT_TRUE(t->lora_name.empty()) << name;
  }
  EXPECT_EQ(FindTensor(layer, "up_proj.bias")->cols, 4 * 12288);
  const std::vector<TensorSpec> input = InputTensors(gpt);
  ASSERT_EQ(input.size(), 2u);
  EXPECT_EQ(input[1].rows, 2048);
  EXPECT_EQ(input[1].split, Split::kReplicated);
  const std::vector<TensorSpec> output = OutputTensors(gpt);
  EXPECT_EQ(output.size(), 2u);  // final LayerNorm's weight and bias, tied lm_head
  EXPECT_EQ(FindTensor(output, "lm_head"), nullptr);
}

TEST(TensorListsTest, MixtralExpertsAndRouter) {
  const std::vector<TensorSpec> layer = LayerTensors(Preset("mixtral-8x7b"), 0);
  const TensorSpec* router = FindTensor(layer, "gate");
  ASSERT_NE(router, nullptr);
  EXPECT_EQ(router->component, Component::kRouter);
  EXPECT_EQ(router->rows, 8);
  EXPECT_EQ(router->split, Split::kReplicated);
  EXPECT_FALSE(router->linear);
  for (const char* name : {"experts.gate_proj", "experts.up_proj", "experts.down_proj"}) {
    const TensorSpec* t = FindTensor(layer, name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->count, 8);
    EXPECT_TRUE(t->linear);
    EXPECT_EQ(t->parameters(), int64_t{8} * 4096 * 14336);
  }
  EXPECT_EQ(FindTensor(layer, "experts.down_proj")->split, Split::kCols);
  EXPECT_EQ(FindTensor(layer, "experts.gate_proj")->lora_name, "gate");
  EXPECT_EQ(FindTensor(layer, "gate_proj"), nullptr);
}

TEST(TensorListsTest, ComponentNames) {
  EXPECT_EQ(ComponentName(Component::kEmbedding), "embedding");
  EXPECT_EQ(ComponentName(Component::kAttention), "attention");
  EXPECT_EQ(ComponentName(Component::kMlp), "mlp");
  EXPECT_EQ(ComponentName(Component::kRouter), "router");
  EXPECT_EQ(ComponentName(Component::kNorm), "norm");
  EXPECT_EQ(ComponentName(Component::kLmHead), "lm_head");
}

// config.json files as the hub ships them read to the presets' shapes.
TEST(ReadModelConfigTest, HubConfigsMatchPresets) {
  for (const char* name : {"llama-3.1-8b", "qwen2.5-7b", "mixtral-8x7b"}) {
    const ModelConfig file = ReadConfig(absl::StrCat(name, ".json"));
    const ModelConfig preset = Preset(name);
    EXPECT_EQ(file.name, kConfigDir + name + ".json");
    EXPECT_EQ(file.model_type, preset.model_type) << name;
    EXPECT_EQ(file.max_position_embeddings, preset.max_position_embeddings) << name;
    EXPECT_EQ(file.attention_bias, preset.attention_bias) << name;
    const ParameterCounts a = CountParameters(file), b = CountParameters(preset);
    EXPECT_EQ(a.total, b.total) << name;
    EXPECT_EQ(a.active, b.active) << name;
    EXPECT_EQ(a.attention, b.attention) << name;
    EXPECT_EQ(a.mlp, b.mlp) << name;
  }
}

// Gemma 2 2B: head_dim 256 (not 2304 / 8), four norms a layer, embeddings
// tied by default. Published total 2,614,341,888.
TEST(ReadModelConfigTest, Gemma2) {
  const ModelConfig model = ReadConfig("gemma-2-2b.json");
  EXPECT_EQ(model.head_dim, 256);
  EXPECT_EQ(model.norms_per_layer, 4);
  EXPECT_TRUE(model.tie_word_embeddings);
  const ParameterCounts counts = CountParameters(model);
  EXPECT_EQ(counts.total, 2'614'341'888);
  EXPECT_EQ(counts.norms, (26 * 4 + 1) * 2304);
  EXPECT_EQ(counts.lm_head, 0);
}

// Mistral Small 3.1 (a vision model): the text model is read from
// "text_config" and the vision tower is not counted. Its text model is
// Mistral Small 3's 23,572,403,200 parameters.
TEST(ReadModelConfigTest, MultimodalTextConfig) {
  const ModelConfig model = ReadConfig("mistral-small-3.1-24b.json");
  EXPECT_EQ(model.model_type, "mistral");
  EXPECT_EQ(model.hidden_size, 5120);
  EXPECT_EQ(model.head_dim, 128);  // not 5120 / 32
  EXPECT_FALSE(model.tie_word_embeddings);
  EXPECT_EQ(CountParameters(model).total, 23'572'403'200);
}

TEST(ReadModelConfigTest, MissingFileIsNotFound) {
  const std::string path = kConfigDir + "no-such-config.json";
  absl::StatusOr<ModelConfig> model = ReadModelConfig(path);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(model.status().message(), HasSubstr(path));
}

TEST(ReadModelConfigTest, FileOver16MiBIsRefusedUnread) {
  const std::string path = ::testing::TempDir() + "/sizing_model_test_big.json";
  {
    std::ofstream out(path);
    out << "{}";
  }
  std::filesystem::resize_file(path, (16 << 20) + 1);  // sparse: nothing is written
  absl::StatusOr<ModelConfig> model = ReadModelConfig(path);
  std::filesystem::remove(path);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(model.status().message(), AllOf(HasSubstr(path), HasSubstr("limit")));
}

TEST(FindModelTest, PathOrError) {
  absl::StatusOr<ModelConfig> file = FindModel(kConfigDir + "qwen2.5-7b.json");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(CountParameters(*file).total, 7'615'616'512);

  absl::StatusOr<ModelConfig> unknown = FindModel("llama-9-1t");
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(unknown.status().message(),
              AllOf(HasSubstr("llama-9-1t"), HasSubstr("is not a preset"),
                    HasSubstr("llama-3.1-8b"), HasSubstr("gpt3-175b")));
}

// Qwen3 0.6B: q and k norms of head_dim in each layer, head_dim 128 while
// hidden_size / heads is 64, tied embeddings. Published total 596,049,920.
TEST(ParseModelConfigTest, Qwen3) {
  const char* json = R"({
    "model_type": "qwen3", "hidden_size": 1024, "intermediate_size": 3072,
    "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8,
    "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": true,
    "attention_bias": false, "max_position_embeddings": 40960})";
  absl::StatusOr<ModelConfig> model = ParseModelConfig(json, "qwen3.json");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE(model->qk_norm);
  const std::vector<TensorSpec> layer = LayerTensors(*model, 0);
  const TensorSpec* q_norm = FindTensor(layer, "q_norm");
  ASSERT_NE(q_norm, nullptr);
  EXPECT_EQ(q_norm->cols, 128);
  EXPECT_EQ(q_norm->component, Component::kAttention);
  EXPECT_EQ(CountParameters(*model).total, 596'049'920);
}

// Llama's attention_bias puts a bias on q, k, v and o (Hugging Face's
// LlamaAttention), its mlp_bias on gate, up and down.
TEST(ParseModelConfigTest, LlamaBiases) {
  const char* base = R"({"model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32,
    "num_key_value_heads": 8, "vocab_size": 128256)";
  const absl::StatusOr<ModelConfig> plain = ParseModelConfig(absl::StrCat(base, "}"), "a.json");
  const absl::StatusOr<ModelConfig> biased = ParseModelConfig(
      absl::StrCat(base, R"(, "attention_bias": true, "mlp_bias": true})"), "b.json");
  ASSERT_TRUE(plain.ok() && biased.ok());
  EXPECT_EQ(CountParameters(*plain).total, 8'030'261'248);
  EXPECT_EQ(CountParameters(*biased).total - CountParameters(*plain).total,
            32 * ((4096 + 1024 + 1024 + 4096) + (14336 + 14336 + 4096)));
  EXPECT_NE(FindTensor(LayerTensors(*biased, 0), "o_proj.bias"), nullptr);
  EXPECT_NE(FindTensor(LayerTensors(*biased, 0), "down_proj.bias"), nullptr);
  // Qwen2's fixed q/k/v biases leave o_proj without one.
  EXPECT_EQ(FindTensor(LayerTensors(*FindModel("qwen2.5-7b"), 0), "o_proj.bias"), nullptr);
}

// A minimal Llama config, with `replace` substituted for `"num_key_value_heads": 8`.
std::string LlamaJson(const std::string& replace = R"("num_key_value_heads": 8)") {
  return absl::StrCat(R"({"model_type": "llama", "hidden_size": 4096,
    "intermediate_size": 14336, "num_hidden_layers": 32, "num_attention_heads": 32, )",
                      replace, R"(, "vocab_size": 128256})");
}

TEST(ParseModelConfigTest, DefaultsAndNulls) {
  // Without num_key_value_heads (Llama 1), or null, every head has its own kv.
  absl::StatusOr<ModelConfig> model = ParseModelConfig(LlamaJson(R"("head_dim": null)"), "a");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->num_kv_heads, 32);
  EXPECT_EQ(model->head_dim, 128);
  EXPECT_EQ(model->max_position_embeddings, 0);
  EXPECT_FALSE(model->tie_word_embeddings);
  EXPECT_EQ(model->name, "a");
  model = ParseModelConfig(LlamaJson(R"("num_key_value_heads": null, "head_dim": 128)"), "b");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->num_kv_heads, 32);
  // Integral floats are integers.
  model = ParseModelConfig(LlamaJson(R"("num_key_value_heads": 8.0)"), "c");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ(model->num_kv_heads, 8);
  // Gemma ties its embeddings unless the config says otherwise.
  model = ParseModelConfig(R"({"model_type": "gemma", "hidden_size": 3072,
      "intermediate_size": 24576, "num_hidden_layers": 28, "num_attention_heads": 16,
      "num_key_value_heads": 16, "head_dim": 256, "vocab_size": 256000})",
                           "gemma-7b");
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE(model->tie_word_embeddings);
  EXPECT_EQ(CountParameters(*model).total, 8'537'680'896);  // Gemma 7B's published total
}

// Each bad input is InvalidArgument naming the source and the field.
TEST(ParseModelConfigTest, BadFields) {
  const struct {
    std::string json;
    std::string field;  // the message names it
  } cases[] = {
      {R"({"model_type": "llama", "hidden_size": 4096})", "intermediate_size"},
      {LlamaJson(R"("num_key_value_heads": "8")"), "num_key_value_heads"},
      {LlamaJson(R"("num_key_value_heads": -8)"), "num_key_value_heads"},
      {LlamaJson(R"("num_key_value_heads": 0)"), "num_key_value_heads"},
      {LlamaJson(R"("num_key_value_heads": 7)"), "num_key_value_heads"},
      {LlamaJson(R"("num_key_value_heads": 64)"), "num_key_value_heads"},
      {LlamaJson(R"("num_key_value_heads": 8.5)"), "num_key_value_heads"},
      {LlamaJson(R"("num_key_value_heads": true)"), "num_key_value_heads"},
      {LlamaJson(R"("num_key_value_heads": 1099511627777)"), "num_key_value_heads"},
      {LlamaJson(R"("num_key_value_heads": 1e300)"), "num_key_value_heads"},
      {LlamaJson(R"("num_key_value_heads": 18446744073709551616)"), "num_key_value_heads"},
      {LlamaJson(R"("tie_word_embeddings": 1)"), "tie_word_embeddings"},
      {LlamaJson(R"("max_position_embeddings": 0)"), "max_position_embeddings"},
      {LlamaJson(R"("text_config": [])"), "text_config"},
      {LlamaJson(R"("text_config": {"hidden_size": "big"})"), "text_config.hidden_size"},
      // hidden_size 4095 is no multiple of 32 heads when head_dim is absent.
      {R"({"model_type": "mistral", "hidden_size": 4095, "intermediate_size": 14336,
          "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000})",
       "hidden_size"},
      {R"({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
          "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000,
          "num_local_experts": 8, "num_experts_per_tok": 9})",
       "num_experts_per_tok"},
      {R"({"model_type": "mixtral", "hidden_size": 4096, "intermediate_size": 14336,
          "num_hidden_layers": 32, "num_attention_heads": 32, "vocab_size": 32000})",
       "num_local_experts"},
      // Gemma's head_dim is not derived from hidden_size, so it must be given.
      {R"({"model_type": "gemma2", "hidden_size": 2304, "intermediate_size": 9216,
          "num_hidden_layers": 26, "num_attention_heads": 8, "vocab_size": 256000})",
       "head_dim"},
      {R"({"hidden_size": 4096})", "model_type"},
      {R"({"model_type": 3})", "model_type"},
      {R"({"model_type": "bert", "hidden_size": 768})", "bert"},
      // Fields of 2^40 each are in range, but the model would not be.
      {R"({"model_type": "llama", "hidden_size": 1099511627776, "intermediate_size": 1,
          "num_hidden_layers": 1, "num_attention_heads": 1, "vocab_size": 1})",
       "2^48"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<ModelConfig> model = ParseModelConfig(c.json, "bad/config.json");
    ASSERT_FALSE(model.ok()) << c.json;
    EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument) << c.json;
    EXPECT_THAT(model.status().message(), AllOf(HasSubstr("bad/config.json"), HasSubstr(c.field)))
        << c.json;
  }
}

TEST(ParseModelConfigTest, UnsupportedModelTypeListsSupported) {
  absl::StatusOr<ModelConfig> model = ParseModelConfig(R"({"model_type": "bert"})", "c.json");
  EXPECT_THAT(model.status().message(), AllOf(HasSubstr("\"bert\""), HasSubstr("llama"),
                                              HasSubstr("mixtral"), HasSubstr("gemma2")));
}

TEST(ParseModelConfigTest, BadJson) {
  const struct {
    std::string json;
    std::string message;
  } cases[] = {
      {R"({"model_type": "llama",)", "not valid JSON"},
      {"", "not valid JSON"},
      {"[1, 2]", "not an object"},
      {LlamaJson(R"("num_key_value_heads": 8, "hidden_size": 4096)"), "duplicate key"},
      {LlamaJson(R"("text_config": {"a": 1, "a": 2})"), "duplicate key"},
      {std::string(100, '[') + std::string(100, ']'), "64 levels"},
      {std::string((16 << 20) + 1, ' '), "limit"},
  };
  for (const auto& c : cases) {
    absl::StatusOr<ModelConfig> model = ParseModelConfig(c.json, "bad.json");
    ASSERT_FALSE(model.ok()) << c.json.substr(0, 80);
    EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(model.status().message(), AllOf(HasSubstr("bad.json"), HasSubstr(c.message)));
  }
}

TEST(ValidateModelTest, SameRulesAsParsing) {
  ModelConfig model = Preset("llama-3.1-8b");
  ASSERT_TRUE(ValidateModel(model).ok());
  model.num_kv_heads = 5;
  EXPECT_THAT(ValidateModel(model).message(),
              AllOf(HasSubstr("llama-3.1-8b"), HasSubstr("num_key_value_heads")));
  model = Preset("llama-3.1-8b");
  model.head_dim = 0;
  EXPECT_THAT(ValidateModel(model).message(), HasSubstr("head_dim"));
  model = Preset("llama-3.1-8b");
  model.vocab_size = (int64_t{1} << 40) + 1;
  EXPECT_THAT(ValidateModel(model).message(), HasSubstr("vocab_size"));
  model = Preset("mixtral-8x7b");
  model.experts_per_token = 0;
  EXPECT_THAT(ValidateModel(model).message(), HasSubstr("num_experts_per_tok"));
  model = Preset("gpt3-175b");
  model.max_position_embeddings = 0;  // learned positions need a table size
  EXPECT_THAT(ValidateModel(model).message(), HasSubstr("max_position_embeddings"));
}

// gpt-oss: OpenAI's model card counts 20.91B and 116.83B parameters in
// all; its active counts (3.61B, 5.13B) leave out the embedding, which a
// token reads one row of, and lowp's count of what a token passes through
// includes it.
TEST(ModelPresetsTest, GptOssCountsMatchTheModelCard) {
  for (const auto& [name, layers, experts, total_b, active_b] :
       {std::tuple<const char*, int64_t, int64_t, double, double>{"gpt-oss-20b", 24, 32, 20.91, 3.61},
        {"gpt-oss-120b", 36, 128, 116.83, 5.13}}) {
    const ParameterCounts counts = CountParameters(Preset(name));
    EXPECT_NEAR(counts.total / 1e9, total_b, 0.005) << name;
    EXPECT_NEAR((counts.active - counts.embedding) / 1e9, active_b, 0.005) << name;
    // Per layer: 4 of `experts` experts of 3 matrices 2880 x 2880 with
    // biases (2 x 2880 + 2880 each); the router with its bias.
    const int64_t expert = 3 * 2880 * 2880 + 3 * 2880;
    EXPECT_EQ(counts.total - counts.active, layers * (experts - 4) * expert) << name;
    EXPECT_EQ(counts.router, layers * experts * (2880 + 1)) << name;
  }
}

// Gemma 3 27B's text model: the closed form of its config (vocab 262208,
// 62 layers of q 4096, k and v 2048 wide, QK-norms, an MLP of 21504 and four
// norms; tied), about Google's "27B".
TEST(ModelPresetsTest, Gemma3_27bClosedForm) {
  const int64_t h = 5376, V = 262208, L = 62;
  const int64_t layer = 2 * h * 4096 + 2 * h * 2048 + 2 * 128 + 3 * h * 21504 + 4 * h;
  const ParameterCounts counts = CountParameters(Preset("gemma-3-27b"));
  EXPECT_EQ(counts.total, V * h + L * layer + h);
  EXPECT_EQ(counts.total, 27'009'346'304);
  EXPECT_EQ(counts.lm_head, 0);
}

// DeepSeek-V3 without its multi-token prediction layer: the closed form of
// its config, the report's "671B total", and 37.6B a token passes through
// (the report's "37B activated"; lowp counts the embedding and lm_head).
// Its first 3 layers are dense and the memory model lists them apart.
TEST(ModelPresetsTest, DeepSeekV3ClosedForm) {
  const int64_t h = 7168, V = 129280;
  // q_a, its norm, q_b (128 heads of 128 + 64), kv_a (512 + 64), its norm,
  // kv_b (128 heads of 128 + 128), o, and the two layer norms.
  const int64_t attention = 1536 * h + 1536 + 128 * 192 * 1536 + 576 * h + 512 +
                            128 * 256 * 512 + h * 128 * 128 + 2 * h;
  const int64_t dense = 3 * h * 18432;
  const int64_t expert = 3 * h * 2048;
  const int64_t moe = 256 * expert + expert + 256 * h + 256;  // routed, shared, router, bias
  const ModelConfig m = Preset("deepseek-v3");
  const ParameterCounts counts = CountParameters(m);
  EXPECT_EQ(counts.total, 2 * V * h + h + 61 * attention + 3 * dense + 58 * moe);
  EXPECT_EQ(counts.total, 671'026'419'200);
  EXPECT_EQ(counts.total - counts.active, 58 * 248 * expert);
  EXPECT_NEAR(counts.active / 1e9, 37.55, 0.005);
  const std::vector<LayerKind> kinds = LayerKinds(m);
  ASSERT_EQ(kinds.size(), 2u);
  EXPECT_FALSE(kinds[0].moe);
  EXPECT_EQ(kinds[0].layers, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_TRUE(kinds[1].moe);
  EXPECT_EQ(kinds[1].layers.size(), 58u);
  EXPECT_EQ(kinds[1].layers.front(), 3);
  EXPECT_EQ(FindTensor(kinds[0].tensors, "experts.up_proj"), nullptr);
  const TensorSpec* kv_b = FindTensor(kinds[1].tensors, "kv_b_proj");
  ASSERT_NE(kv_b, nullptr);
  EXPECT_EQ(kv_b->rows, 128 * 256);
  EXPECT_EQ(kv_b->split, Split::kRows);
  EXPECT_EQ(FindTensor(kinds[1].tensors, "kv_a_proj_with_mqa")->split, Split::kReplicated);
  EXPECT_EQ(FindTensor(kinds[1].tensors, "k_proj"), nullptr);
  // The preset is what its config.json parses to (DeepseekV3Config's
  // defaults are DeepSeek-V3's).
  absl::StatusOr<ModelConfig> parsed = ParseModelConfig(
      R"({"model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
          "num_hidden_layers": 61, "num_attention_heads": 128, "num_key_value_heads": 128,
          "vocab_size": 129280, "max_position_embeddings": 163840, "rms_norm_eps": 1e-6,
          "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                           "beta_fast": 32, "beta_slow": 1, "mscale": 1.0,
                           "mscale_all_dim": 1.0}})",
      "deepseek-v3.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  const ParameterCounts p = CountParameters(*parsed);
  EXPECT_EQ(p.total, counts.total);
  EXPECT_EQ(p.active, counts.active);
  EXPECT_EQ(parsed->head_dim, m.head_dim);
  EXPECT_EQ(parsed->rope_scaling.mscale_all_dim, m.rope_scaling.mscale_all_dim);
}

// gpt-oss's config.json: GptOssConfig's defaults where absent (even layers
// windowed, 128 wide; biases; sinks; top-k then softmax; swiglu_limit 7),
// YaRN's fields, and the factor from max_position_embeddings /
// original_max_position_embeddings as modeling_rope_utils takes it.
TEST(ParseModelConfigTest, GptOssFields) {
  const std::string base = R"({"model_type": "gpt_oss", "hidden_size": 64,
      "intermediate_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4, "head_dim": 16,
      "num_key_value_heads": 2, "vocab_size": 100, "max_position_embeddings": 4096)";
  absl::StatusOr<ModelConfig> m = ParseModelConfig(base + "}", "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->num_experts, 128);
  EXPECT_EQ(m->experts_per_token, 4);
  EXPECT_EQ(ExpertWidth(*m), 32);
  EXPECT_TRUE(m->attention_bias && m->output_bias && m->attention_sinks);
  EXPECT_TRUE(m->router_bias && m->expert_bias);
  EXPECT_EQ(m->routing, Routing::kTopKSoftmax);
  EXPECT_EQ(m->swiglu_limit, 7.0);
  EXPECT_EQ(m->rope_theta, 150000);
  EXPECT_EQ(m->sliding_window, 128);
  EXPECT_TRUE(SlidingLayer(*m, 0));
  EXPECT_FALSE(SlidingLayer(*m, 1));
  EXPECT_TRUE(SlidingLayer(*m, 2));
  EXPECT_TRUE(MoeLayer(*m, 0) && MoeLayer(*m, 2));
  // No rope_scaling: GptOssConfig's YaRN (factor 32 over 4096, not truncated).
  EXPECT_EQ(m->rope_scaling.type, "yarn");
  EXPECT_EQ(m->rope_scaling.factor, 32);
  EXPECT_EQ(m->rope_scaling.original_max_position_embeddings, 4096);
  EXPECT_FALSE(m->rope_scaling.truncate);
  m = ParseModelConfig(base + R"(, "attention_bias": false, "swiglu_limit": 3.5,
      "layer_types": ["full_attention", "sliding_attention", "full_attention"],
      "rope_scaling": {"rope_type": "yarn", "factor": 2.0, "beta_fast": 16, "beta_slow": 2,
                       "truncate": false, "original_max_position_embeddings": 512}})",
                       "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_FALSE(m->attention_bias || m->output_bias);
  EXPECT_EQ(m->swiglu_limit, 3.5);
  EXPECT_FALSE(SlidingLayer(*m, 0));
  EXPECT_TRUE(SlidingLayer(*m, 1));
  EXPECT_EQ(m->rope_scaling.type, "yarn");
  EXPECT_EQ(m->rope_scaling.factor, 2.0);  // as given (transformers' main branch)
  EXPECT_EQ(m->rope_scaling.beta_fast, 16);
  EXPECT_EQ(m->rope_scaling.beta_slow, 2);
  EXPECT_FALSE(m->rope_scaling.truncate);
  EXPECT_EQ(m->rope_scaling.original_max_position_embeddings, 512);
  EXPECT_TRUE(CheckForwardSupport(*m).ok());
  // transformers 5's rope_parameters: rope_theta inside.
  m = ParseModelConfig(base + R"(, "rope_parameters": {"rope_type": "yarn", "rope_theta": 5000.0,
                       "factor": 4.0}})", "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->rope_theta, 5000);
  EXPECT_EQ(m->rope_scaling.factor, 4.0);
  EXPECT_EQ(m->rope_scaling.original_max_position_embeddings, 4096);
  for (const auto& [fields, message] :
       {std::pair<std::string, std::string>{R"(, "swiglu_limit": -1})", "swiglu_limit"},
        {R"(, "rope_scaling": {"rope_type": "yarn", "beta_fast": 0}})", "beta_fast"},
        {R"(, "rope_scaling": {"rope_type": "dynamic", "factor": 2}})", "dynamic"}}) {
    absl::StatusOr<ModelConfig> bad = ParseModelConfig(base + fields, "bad.json");
    absl::Status s = bad.ok() ? CheckForwardSupport(*bad) : bad.status();
    EXPECT_THAT(s.message(), HasSubstr(message)) << fields;
  }
}

// Phi-3's config.json: partial_rotary_factor, longrope's factors (one per
// rotated pair), the attention factor's context from the top-level
// original_max_position_embeddings, and sequences beyond it refused.
TEST(ParseModelConfigTest, Phi3Fields) {
  const std::string base = R"({"model_type": "phi3", "hidden_size": 64,
      "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
      "vocab_size": 100, "max_position_embeddings": 1024, "original_max_position_embeddings": 256)";
  absl::StatusOr<ModelConfig> m = ParseModelConfig(base + "}", "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_TRUE(m->fused_projections);
  EXPECT_EQ(RotaryDim(*m), 16);
  EXPECT_EQ(m->sliding_window, 0);  // Phi3Config's default: none
  m = ParseModelConfig(base + R"(, "partial_rotary_factor": 0.75, "sliding_window": 64,
      "rope_scaling": {"type": "longrope", "short_factor": [1, 1.5, 2, 2.5, 3, 3.5],
                       "long_factor": [4, 4, 4, 4, 4, 4]}})", "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(RotaryDim(*m), 12);
  EXPECT_EQ(m->sliding_window, 64);
  EXPECT_TRUE(SlidingLayer(*m, 1));
  EXPECT_EQ(m->rope_scaling.factor, 4.0);  // none given: 1024 / 256
  EXPECT_EQ(m->rope_scaling.original_max_position_embeddings, 256);
  EXPECT_TRUE(CheckForwardSupport(*m).ok());
  // A whole sequence runs to max_position_embeddings (the long factors past
  // 256); one generated token by token stops at the original length.
  EXPECT_TRUE(CheckSequenceLength(*m, 1024).ok());
  EXPECT_FALSE(CheckSequenceLength(*m, 1025).ok());
  EXPECT_TRUE(CheckSequenceLength(*m, 256, /*whole=*/false).ok());
  EXPECT_THAT(CheckSequenceLength(*m, 257, /*whole=*/false).message(),
              AllOf(HasSubstr("original_max_position_embeddings (256)"), HasSubstr("long_factor")));
  // Five factors for six rotated pairs; a factor of zero.
  m = ParseModelConfig(base + R"(, "partial_rotary_factor": 0.75,
      "rope_scaling": {"type": "longrope", "short_factor": [1, 1, 1, 1, 1],
                       "long_factor": [4, 4, 4, 4, 4]}})", "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_THAT(CheckForwardSupport(*m).message(), HasSubstr("one per rotated pair (6)"));
  EXPECT_THAT(ParseModelConfig(base + R"(, "rope_scaling": {"type": "longrope",
      "short_factor": [0, 1], "long_factor": [1, 1]}})", "bad.json").status().message(),
              HasSubstr("short_factor"));
  EXPECT_THAT(ParseModelConfig(base + R"(, "partial_rotary_factor": 1.5})", "bad.json")
                  .status().message(),
              HasSubstr("partial_rotary_factor"));
}

// DeepSeek-V3's config.json (Kimi K2 uses it): DeepseekV3Config's defaults
// where absent, the latent attention's widths, dense layers before
// first_k_dense_replace, and every field lowp does not implement refused by
// name.
TEST(ParseModelConfigTest, DeepSeekV3Fields) {
  const std::string base = R"({"model_type": "deepseek_v3", "hidden_size": 64,
      "intermediate_size": 96, "num_hidden_layers": 5, "num_attention_heads": 4,
      "vocab_size": 100, "max_position_embeddings": 4096)";
  absl::StatusOr<ModelConfig> m = ParseModelConfig(base + "}", "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->num_experts, 256);
  EXPECT_EQ(m->experts_per_token, 8);
  EXPECT_EQ(ExpertWidth(*m), 2048);
  EXPECT_EQ(m->shared_expert_intermediate_size, 2048);  // one shared expert
  EXPECT_FALSE(m->shared_expert_gated);
  EXPECT_EQ(m->routing, Routing::kSigmoidGroups);
  EXPECT_EQ(m->routed_scaling_factor, 2.5);
  EXPECT_EQ(m->n_group, 8);
  EXPECT_EQ(m->topk_group, 4);
  EXPECT_EQ(m->q_lora_rank, 1536);
  EXPECT_EQ(m->kv_lora_rank, 512);
  EXPECT_EQ(KeyHeadDim(*m), 192);
  EXPECT_EQ(ValueHeadDim(*m), 128);
  EXPECT_EQ(RotaryDim(*m), 64);
  EXPECT_EQ(m->head_dim, 192);
  EXPECT_TRUE(m->rope_interleave);
  EXPECT_FALSE(MoeLayer(*m, 2));
  EXPECT_TRUE(MoeLayer(*m, 3));
  m = ParseModelConfig(base + R"(, "q_lora_rank": null, "first_k_dense_replace": 0,
      "n_shared_experts": 0, "n_routed_experts": 8, "n_group": 1, "topk_group": 1,
      "num_experts_per_tok": 2, "rope_interleave": false})", "c.json");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->q_lora_rank, 0);  // q_proj
  EXPECT_TRUE(MoeLayer(*m, 0));
  EXPECT_EQ(m->shared_expert_intermediate_size, 0);
  EXPECT_FALSE(m->rope_interleave);
  for (const auto& [fields, message] :
       {std::pair<std::string, std::string>{R"(, "scoring_func": "softmax"})", "scoring_func"},
        {R"(, "topk_method": "greedy"})", "topk_method"},
        {R"(, "moe_layer_freq": 2})", "moe_layer_freq"},
        {R"(, "n_group": 3})", "n_group"},
        {R"(, "topk_group": 9})", "topk_group"},
        {R"(, "n_group": 8, "topk_group": 1, "num_experts_per_tok": 40})", "topk_group"},
        {R"(, "attention_bias": true})", "attention_bias"},
        {R"(, "first_k_dense_replace": -1})", "first_k_dense_replace"},
        {R"(, "routed_scaling_factor": 0})", "routed_scaling_factor"}}) {
    EXPECT_THAT(ParseModelConfig(base + fields, "bad.json").status().message(),
                AllOf(HasSubstr("bad.json"), HasSubstr(message)))
        << fields;
  }
}

}  // namespace
}  // namespace lowp
