#include "model/weights.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "io/tensor_set.h"
#include "quant/recipe.h"

namespace lowp {
namespace {

constexpr const char* kForwardTypes[] = {"llama",     "mistral",   "qwen2",  "qwen3",
                                         "gemma",     "gemma2",    "gemma3_text", "mixtral",
                                         "qwen2_moe", "qwen3_moe", "gpt_oss", "phi3",
                                         "deepseek_v3"};

}  // namespace

std::vector<LayerWeights::Entry> LayerWeights::Matrices(const ModelConfig& config) {
  std::vector<Entry> out;
  (void)config;  // a layer's own experts say which MLP it has (MoeLayer)
  if (kv_a.rows > 0) {  // DeepSeek-V3's latent attention
    for (Matrix* m : {&q_a, &q_b, &q, &kv_a, &kv_b, &o}) {
      if (m->rows > 0) out.push_back({m, true});
    }
  } else {
    for (Matrix* m : {&q, &k, &v, &o}) out.push_back({m, true});
  }
  if (!experts.empty()) {
    out.push_back({&router, false});
    for (Expert& e : experts) {
      for (Matrix* m : {&e.gate, &e.up, &e.down}) out.push_back({m, true});
    }
    if (shared.gate.rows > 0) {
      for (Matrix* m : {&shared.gate, &shared.up, &shared.down}) out.push_back({m, true});
      if (shared_gate.rows > 0) out.push_back({&shared_gate, false});
    }
  } else {
    for (Matrix* m : {&gate, &up, &down}) out.push_back({m, true});
  }
  return out;
}

bool IsRouter(absl::string_view name) {
  return absl::EndsWith(name, ".block_sparse_moe.gate.weight") ||
         absl::EndsWith(name, ".mlp.gate.weight") ||
         absl::EndsWith(name, ".mlp.shared_expert_gate.weight") ||
         absl::EndsWith(name, ".mlp.router.weight");
}

std::span<float> LayerStorage::Buffer(size_t index, size_t size) {
  if (buffers.size() <= index) buffers.resize(index + 1);
  std::vector<float>& b = buffers[index];
  if (b.size() < size) b.resize(size);
  return std::span<float>(b.data(), size);
}

StoredChunk& LayerStorage::Stored(size_t index) {
  if (stored.size() <= index) stored.resize(index + 1);
  stored[index] = StoredChunk();
  return stored[index];
}

std::string ForwardModelTypes() { return absl::StrJoin(kForwardTypes, ", "); }

absl::Status CheckForwardSupport(const ModelConfig& c) {
  bool known = false;
  for (const char* type : kForwardTypes) known |= c.model_type == type;
  if (!known || !c.gated_mlp || c.learned_positions || c.norm_bias) {
    return absl::InvalidArgumentError(
        absl::StrCat(c.name, ": model_type \"", c.model_type,
                     "\" has no forward pass (supported: ", ForwardModelTypes(), ")"));
  }
  if (c.activation != "silu" && c.activation != "swish" && c.activation != "gelu" &&
      c.activation != "gelu_pytorch_tanh") {
    return absl::InvalidArgumentError(
        absl::StrCat(c.name, ": activation \"", c.activation,
                     "\" is not supported (supported: silu, gelu, gelu_pytorch_tanh)"));
  }
  const std::string& rope = c.rope_scaling.type;
  if (!rope.empty() && rope != "linear" && rope != "llama3" && rope != "yarn" &&
      rope != "longrope") {
    return absl::InvalidArgumentError(absl::StrCat(
        c.name, ": rope_scaling type \"", rope,
        "\" is not supported (supported: none, default, linear, llama3, yarn, longrope)"));
  }
  if (rope == "longrope") {
    const size_t half = static_cast<size_t>(RotaryDim(c) / 2);
    if (c.rope_scaling.short_factor.size() != half || c.rope_scaling.long_factor.size() != half) {
      return absl::InvalidArgumentError(absl::StrCat(
          c.name, ": rope_scaling's short_factor and long_factor hold ",
          c.rope_scaling.short_factor.size(), " and ", c.rope_scaling.long_factor.size(),
          " values; longrope needs one per rotated pair (", half, ")"));
    }
  }
  return absl::OkStatus();
}

const WeightRule* RuleFor(std::span<const WeightRule> rules, const std::string& name, bool linear) {
  for (const WeightRule& rule : rules) {
    // A recipe without a pattern is a whole-model mix: it decides for the
    // embeddings and the output too.
    const bool whole =
        rule.pattern.empty() && rule.scheme != nullptr && AsRecipe(*rule.scheme) != nullptr;
    if (rule.pattern.empty() ? linear || whole : MatchesPattern(rule.pattern, name)) return &rule;
  }
  return nullptr;
}

}  // namespace lowp
