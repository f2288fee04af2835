// The tensors a config implies, with their shapes and tensor-parallel
// splits, and the parameter counts by component (model/config.h).
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace lowp {
namespace {

// Tensor lists.

// A weight that is not a linear layer's matrix: embeddings, lm_head, norms,
// biases, the router.
TensorSpec Tensor(std::string name, Component component, int64_t rows, int64_t cols, Split split,
                  int64_t count = 1) {
  TensorSpec t;
  t.name = std::move(name);
  t.component = component;
  t.rows = rows;
  t.cols = cols;
  t.count = count;
  t.split = split;
  return t;
}

// A linear layer's weight matrix inside a decoder layer.
TensorSpec Linear(std::string name, Component component, int64_t rows, int64_t cols, Split split,
                  std::string lora_name, int64_t count = 1) {
  TensorSpec t = Tensor(std::move(name), component, rows, cols, split, count);
  t.linear = true;
  t.lora_name = std::move(lora_name);
  return t;
}

// The MLP of a layer, or its `count` experts under `prefix` ("experts.").
// Column-parallel weights (gate, up) split their rows and so their biases;
// the row-parallel down projection's bias is added after the all-reduce, so
// every device holds all of it.
void AddMlp(const ModelConfig& model, const std::string& prefix, int64_t count, int64_t inter,
            std::vector<TensorSpec>& out) {
  const int64_t hidden = model.hidden_size;
  if (model.gated_mlp) {
    out.push_back(
        Linear(prefix + "gate_proj", Component::kMlp, inter, hidden, Split::kRows, "gate", count));
  }
  out.push_back(
      Linear(prefix + "up_proj", Component::kMlp, inter, hidden, Split::kRows, "up", count));
  out.push_back(
      Linear(prefix + "down_proj", Component::kMlp, hidden, inter, Split::kCols, "down", count));
  if (model.linear_bias || model.mlp_bias || (count > 1 && model.expert_bias)) {
    if (model.gated_mlp) {
      out.push_back(
          Tensor(prefix + "gate_proj.bias", Component::kMlp, 1, inter, Split::kRows, count));
    }
    out.push_back(Tensor(prefix + "up_proj.bias", Component::kMlp, 1, inter, Split::kRows, count));
    out.push_back(
        Tensor(prefix + "down_proj.bias", Component::kMlp, 1, hidden, Split::kReplicated, count));
  }
}

// A norm's weight and, for LayerNorm, its bias.
void AddNorm(const ModelConfig& model, const std::string& name, std::vector<TensorSpec>& out) {
  out.push_back(Tensor(name, Component::kNorm, 1, model.hidden_size, Split::kReplicated));
  if (model.norm_bias) {
    out.push_back(
        Tensor(name + ".bias", Component::kNorm, 1, model.hidden_size, Split::kReplicated));
  }
}

// Hugging Face's names for a layer's norms, in order; Gemma 2 has all four.
constexpr const char* kLayerNormNames[] = {"input_layernorm", "post_attention_layernorm",
                                           "pre_feedforward_layernorm",
                                           "post_feedforward_layernorm"};

int64_t& Bucket(ParameterCounts& counts, Component component) {
  switch (component) {
    case Component::kEmbedding:
      return counts.embedding;
    case Component::kAttention:
      return counts.attention;
    case Component::kMlp:
      return counts.mlp;
    case Component::kRouter:
      return counts.router;
    case Component::kNorm:
      return counts.norms;
    case Component::kLmHead:
      return counts.lm_head;
  }
  return counts.norms;  // unreachable: the switch covers every component
}


}  // namespace

absl::string_view ComponentName(Component c) {
  switch (c) {
    case Component::kEmbedding:
      return "embedding";
    case Component::kAttention:
      return "attention";
    case Component::kMlp:
      return "mlp";
    case Component::kRouter:
      return "router";
    case Component::kNorm:
      return "norm";
    case Component::kLmHead:
      return "lm_head";
  }
  return "unknown";
}

std::vector<TensorSpec> InputTensors(const ModelConfig& model) {
  // The vocabulary is split among tensor-parallel ranks (Megatron's
  // vocabulary-parallel embedding); the position table is small and kept whole.
  std::vector<TensorSpec> out = {Tensor("embed_tokens", Component::kEmbedding, model.vocab_size,
                                        model.hidden_size, Split::kRows)};
  if (model.learned_positions) {
    out.push_back(Tensor("embed_positions", Component::kEmbedding, model.max_position_embeddings,
                         model.hidden_size, Split::kReplicated));
  }
  return out;
}

std::vector<TensorSpec> LayerTensors(const ModelConfig& model, int64_t layer) {
  const int64_t hidden = model.hidden_size;
  std::vector<TensorSpec> out;

  // Attention: q, k, v are column-parallel (each device holds whole heads),
  // o is row-parallel.
  if (model.kv_lora_rank > 0) {
    // DeepSeek-V3's latent attention: the low-rank projections into the
    // latents (q_a, kv_a with the shared rotated key part) and their norms
    // are small and every device holds them; q_b and kv_b expand the
    // latents into the heads and are divided with them.
    const int64_t heads = model.num_heads;
    const int64_t q_width = heads * KeyHeadDim(model);
    const int64_t v_width = heads * ValueHeadDim(model);
    if (model.q_lora_rank > 0) {
      out.push_back(Linear("q_a_proj", Component::kAttention, model.q_lora_rank, hidden,
                           Split::kReplicated, "q_a"));
      out.push_back(Tensor("q_a_layernorm", Component::kAttention, 1, model.q_lora_rank,
                           Split::kReplicated));
      out.push_back(Linear("q_b_proj", Component::kAttention, q_width, model.q_lora_rank,
                           Split::kRows, "q_b"));
    } else {
      out.push_back(Linear("q_proj", Component::kAttention, q_width, hidden, Split::kRows, "q"));
    }
    out.push_back(Linear("kv_a_proj_with_mqa", Component::kAttention,
                         model.kv_lora_rank + model.qk_rope_head_dim, hidden, Split::kReplicated,
                         "kv_a"));
    out.push_back(Tensor("kv_a_layernorm", Component::kAttention, 1, model.kv_lora_rank,
                         Split::kReplicated));
    out.push_back(Linear("kv_b_proj", Component::kAttention,
                         heads * (model.qk_nope_head_dim + model.v_head_dim), model.kv_lora_rank,
                         Split::kRows, "kv_b"));
    out.push_back(Linear("o_proj", Component::kAttention, hidden, v_width, Split::kCols, "o"));
  } else {
    const int64_t q_width = model.num_heads * model.head_dim;
    const int64_t kv_width = model.num_kv_heads * model.head_dim;
    out.push_back(Linear("q_proj", Component::kAttention, q_width, hidden, Split::kRows, "q"));
    out.push_back(Linear("k_proj", Component::kAttention, kv_width, hidden, Split::kKvHeads, "k"));
    out.push_back(Linear("v_proj", Component::kAttention, kv_width, hidden, Split::kKvHeads, "v"));
    out.push_back(Linear("o_proj", Component::kAttention, hidden, q_width, Split::kCols, "o"));
    if (model.attention_bias || model.linear_bias) {
      out.push_back(Tensor("q_proj.bias", Component::kAttention, 1, q_width, Split::kRows));
      out.push_back(Tensor("k_proj.bias", Component::kAttention, 1, kv_width, Split::kKvHeads));
      out.push_back(Tensor("v_proj.bias", Component::kAttention, 1, kv_width, Split::kKvHeads));
    }
    if (model.linear_bias || model.output_bias) {
      out.push_back(Tensor("o_proj.bias", Component::kAttention, 1, hidden, Split::kReplicated));
    }
  }
  if (model.qk_norm) {
    // One weight over head_dim, shared by every head (Qwen3's q_norm, k_norm).
    out.push_back(Tensor("q_norm", Component::kAttention, 1, model.head_dim, Split::kReplicated));
    out.push_back(Tensor("k_norm", Component::kAttention, 1, model.head_dim, Split::kReplicated));
  }
  if (model.attention_sinks) {  // gpt-oss: a logit per head, split with the heads
    out.push_back(Tensor("sinks", Component::kAttention, 1, model.num_heads, Split::kRows));
  }

  if (MoeLayer(model, layer)) {
    // The router is one small matrix every device applies in full.
    out.push_back(
        Tensor("gate", Component::kRouter, model.num_experts, hidden, Split::kReplicated));
    if (model.router_bias) {
      out.push_back(Tensor("gate.bias", Component::kRouter, 1, model.num_experts, Split::kReplicated));
    }
    if (model.routing == Routing::kSigmoidGroups) {  // DeepSeek-V3's e_score_correction_bias
      out.push_back(Tensor("gate.e_score_correction_bias", Component::kRouter, 1,
                           model.num_experts, Split::kReplicated));
    }
    AddMlp(model, "experts.", model.num_experts, ExpertWidth(model), out);
    if (model.shared_expert_intermediate_size > 0) {  // every token takes it
      AddMlp(model, model.shared_expert_gated ? "shared_expert." : "shared_experts.", 1,
             model.shared_expert_intermediate_size, out);
      if (model.shared_expert_gated) {  // Qwen2-MoE's sigmoid gate
        out.push_back(
            Tensor("shared_expert_gate", Component::kRouter, 1, hidden, Split::kReplicated));
      }
    }
  } else {
    AddMlp(model, "", 1, model.intermediate_size, out);
  }

  const int norms = std::clamp(model.norms_per_layer, 0, kMaxNormsPerLayer);
  for (int i = 0; i < norms; ++i) AddNorm(model, kLayerNormNames[i], out);
  return out;
}

std::vector<LayerKind> LayerKinds(const ModelConfig& model) {
  std::vector<LayerKind> kinds;
  int dense = -1, moe = -1;  // the index of each kind in `kinds`
  for (int64_t layer = 0; layer < model.num_layers; ++layer) {
    int& kind = MoeLayer(model, layer) ? moe : dense;
    if (kind < 0) {
      kind = static_cast<int>(kinds.size());
      kinds.push_back(
          {.tensors = LayerTensors(model, layer), .moe = &kind == &moe, .layers = {}});
    }
    kinds[static_cast<size_t>(kind)].layers.push_back(layer);
  }
  return kinds;
}

std::vector<TensorSpec> OutputTensors(const ModelConfig& model) {
  std::vector<TensorSpec> out;
  AddNorm(model, "norm", out);
  if (!model.tie_word_embeddings) {
    out.push_back(
        Tensor("lm_head", Component::kLmHead, model.vocab_size, model.hidden_size, Split::kRows));
  }
  return out;
}

ParameterCounts CountParameters(const ModelConfig& model) {
  ParameterCounts counts;
  auto add = [&](const std::vector<TensorSpec>& tensors, int64_t copies) {
    for (const TensorSpec& t : tensors) {
      const int64_t n = t.parameters() * copies;
      Bucket(counts, t.component) += n;
      counts.total += n;
      // Only the experts come in counts above one; a token passes through
      // experts_per_token of them.
      const int64_t used = t.count > 1 ? std::min(t.count, model.experts_per_token) : t.count;
      counts.active += t.rows * t.cols * used * copies;
    }
  };
  add(InputTensors(model), 1);
  for (const LayerKind& kind : LayerKinds(model)) {
    add(kind.tensors, static_cast<int64_t>(kind.layers.size()));
  }
  add(OutputTensors(model), 1);
  return counts;
}
}  // namespace lowp
