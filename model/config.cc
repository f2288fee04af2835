// The rules a model description obeys, whether it was parsed from a
// config.json or built in code (model/config.h), and the layers a sliding
// window applies to.
#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/config.h"

namespace lowp {
namespace {

// 2^48 parameters is ~1,000 times the largest model ever trained. The bound
// lets the memory model multiply counts by bytes per value and by devices
// without overflowing int64.
constexpr double kMaxParameters = 281474976710656.0;  // 2^48

// Messages use the config.json field names, since that is where a user
// fixes them.
absl::Status FieldError(absl::string_view source, absl::string_view field,
                        absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(source, ": \"", field, "\" ", message));
}

absl::Status CheckRange(absl::string_view source, absl::string_view field, int64_t value,
                        int64_t min) {
  if (value < min) {
    return FieldError(
        source, field,
        absl::StrCat("is ", value, "; it must be ", min == 0 ? "zero or " : "", "positive"));
  }
  if (value > kMaxModelDimension) {
    return FieldError(source, field, absl::StrCat("is ", value, ", above the limit of 2^40"));
  }
  return absl::OkStatus();
}

// The rules between fields, once each is in range. Parameter counts are
// estimated in double first: with every field up to 2^40 the exact products
// could overflow int64, and a double is exact enough to compare to 2^48.
absl::Status CheckModel(const ModelConfig& m, absl::string_view source) {
  struct Field {
    const char* name;
    int64_t value;
    int64_t min;
  };
  const Field fields[] = {
      {"hidden_size", m.hidden_size, 1},
      {"intermediate_size", m.intermediate_size, 1},
      {"num_hidden_layers", m.num_layers, 1},
      {"num_attention_heads", m.num_heads, 1},
      {"num_key_value_heads", m.num_kv_heads, 1},
      {"head_dim", m.head_dim, 1},
      {"vocab_size", m.vocab_size, 1},
      {"max_position_embeddings", m.max_position_embeddings, m.learned_positions ? 1 : 0},
      {"num_local_experts", m.num_experts, 0},
      {"num_experts_per_tok", m.experts_per_token, m.num_experts > 0 ? 1 : 0},
      {"moe_intermediate_size", m.moe_intermediate_size, 0},
      {"decoder_sparse_step", m.decoder_sparse_step, 1},
      {"shared_expert_intermediate_size", m.shared_expert_intermediate_size, 0},
  };
  for (const Field& f : fields) {
    if (absl::Status s = CheckRange(source, f.name, f.value, f.min); !s.ok()) return s;
  }
  if (m.num_kv_heads > m.num_heads || m.num_heads % m.num_kv_heads != 0) {
    return FieldError(source, "num_key_value_heads",
                      absl::StrCat("is ", m.num_kv_heads, "; it must divide num_attention_heads (",
                                   m.num_heads, ")"));
  }
  if (m.experts_per_token > m.num_experts) {
    return FieldError(source, "num_experts_per_tok",
                      absl::StrCat("is ", m.experts_per_token, ", more than num_local_experts (",
                                   m.num_experts, ")"));
  }
  if (m.rotary_dim < 0 || m.rotary_dim > m.head_dim || m.rotary_dim % 2 != 0) {
    return FieldError(source, "partial_rotary_factor",
                      absl::StrCat("makes ", m.rotary_dim, " rotated values of a head of ",
                                   m.head_dim, "; it must be an even count up to head_dim"));
  }
  if (!(m.swiglu_limit >= 0)) {
    return FieldError(source, "swiglu_limit", absl::StrCat("is ", m.swiglu_limit, "; it must be positive"));
  }
  if (m.norms_per_layer < 0 || m.norms_per_layer > kMaxNormsPerLayer) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": norms_per_layer is ",
                                                   m.norms_per_layer, "; it must be 0 to ",
                                                   kMaxNormsPerLayer));
  }
  // Every tensor's dimensions are products of at most two fields; the
  // largest product bounds them all.
  const double hidden = static_cast<double>(m.hidden_size);
  const double widest =
      std::max({hidden, static_cast<double>(m.intermediate_size),
                static_cast<double>(m.moe_intermediate_size),
                static_cast<double>(m.shared_expert_intermediate_size),
                static_cast<double>(m.num_heads) * static_cast<double>(m.head_dim)});
  const double experts = static_cast<double>(std::max<int64_t>(m.num_experts, 1));
  const double estimate =
      static_cast<double>(m.num_layers) * (4 * widest * hidden + 3 * experts * widest * hidden) +
      2 * static_cast<double>(m.vocab_size + m.max_position_embeddings) * hidden;
  if (estimate > kMaxParameters) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": the model would have up to about ",
                                                   estimate,
                                                   " parameters, above the limit of 2^48"));
  }
  return absl::OkStatus();
}

}  // namespace

bool MoeLayer(const ModelConfig& model, int64_t layer) {
  if (model.num_experts <= 0 || layer < model.first_k_dense_replace) return false;
  for (int64_t l : model.mlp_only_layers) {
    if (l == layer) return false;
  }
  return model.decoder_sparse_step > 0 && (layer + 1) % model.decoder_sparse_step == 0;
}

int64_t RotaryDim(const ModelConfig& model) {
  if (model.kv_lora_rank > 0) return model.qk_rope_head_dim;
  return model.rotary_dim > 0 ? model.rotary_dim : model.head_dim;
}

int64_t KeyHeadDim(const ModelConfig& model) {
  return model.kv_lora_rank > 0 ? model.qk_nope_head_dim + model.qk_rope_head_dim : model.head_dim;
}

int64_t ValueHeadDim(const ModelConfig& model) {
  return model.kv_lora_rank > 0 ? model.v_head_dim : model.head_dim;
}

int64_t ExpertWidth(const ModelConfig& model) {
  return model.moe_intermediate_size > 0 ? model.moe_intermediate_size : model.intermediate_size;
}

bool SlidingLayer(const ModelConfig& model, int64_t layer) {
  if (model.sliding_window <= 0) return false;
  switch (model.sliding_layers) {
    case SlidingLayers::kAll:
      return true;
    case SlidingLayers::kEven:
      return layer % 2 == 0;
    case SlidingLayers::kFrom:
      return layer >= model.first_sliding_layer;
    case SlidingLayers::kListed:
      return layer >= 0 && layer < static_cast<int64_t>(model.window_layers.size()) &&
             model.window_layers[static_cast<size_t>(layer)];
  }
  return true;
}

absl::Status ValidateModel(const ModelConfig& model) {
  return CheckModel(model, model.name.empty() ? "model" : model.name);
}

}  // namespace lowp
