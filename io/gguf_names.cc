#include "io/gguf_names.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace lowp {
namespace {

// Whole-model tensors.
constexpr std::pair<absl::string_view, absl::string_view> kGlobal[] = {
    {"token_embd", "model.embed_tokens"},
    {"output_norm", "model.norm"},
    {"output", "lm_head"},
};

// Per-layer tensors: "blk.N.<key>" -> "model.layers.N.<value>".
constexpr std::pair<absl::string_view, absl::string_view> kLayer[] = {
    {"attn_norm", "input_layernorm"},    {"ffn_norm", "post_attention_layernorm"},
    {"attn_q", "self_attn.q_proj"},      {"attn_k", "self_attn.k_proj"},
    {"attn_v", "self_attn.v_proj"},      {"attn_output", "self_attn.o_proj"},
    {"attn_q_norm", "self_attn.q_norm"}, {"attn_k_norm", "self_attn.k_norm"},
    {"ffn_gate", "mlp.gate_proj"},       {"ffn_up", "mlp.up_proj"},
    {"ffn_down", "mlp.down_proj"},       {"ffn_gate_inp", "block_sparse_moe.gate"},
    // Qwen-MoE (from Hugging Face's side only: llama.cpp's ffn_gate_inp reads
    // back as Mixtral's router)
    {"ffn_gate_inp", "mlp.gate"},
    {"ffn_gate_shexp", "mlp.shared_expert.gate_proj"},
    {"ffn_up_shexp", "mlp.shared_expert.up_proj"},
    {"ffn_down_shexp", "mlp.shared_expert.down_proj"},
    {"ffn_gate_inp_shexp", "mlp.shared_expert_gate"},
    // DeepSeek-V3's latent attention and shared experts, gpt-oss's router
    // and sinks (Hugging Face's side only, as above)
    {"attn_q_a", "self_attn.q_a_proj"},
    {"attn_q_a_norm", "self_attn.q_a_layernorm"},
    {"attn_q_b", "self_attn.q_b_proj"},
    {"attn_kv_a_mqa", "self_attn.kv_a_proj_with_mqa"},
    {"attn_kv_a_norm", "self_attn.kv_a_layernorm"},
    {"attn_kv_b", "self_attn.kv_b_proj"},
    {"ffn_gate_shexp", "mlp.shared_experts.gate_proj"},
    {"ffn_up_shexp", "mlp.shared_experts.up_proj"},
    {"ffn_down_shexp", "mlp.shared_experts.down_proj"},
    {"ffn_gate_inp", "mlp.router"},
    {"attn_sinks", "self_attn.sinks"},
};

}  // namespace

namespace {

// `name` in the naming `from` translated to the other one, through the
// tables' pairs (llama.cpp's name first, Hugging Face's second).
enum class Side { kLlamaCpp, kHuggingFace };
std::optional<std::string> Translate(absl::string_view name, Side from) {
  const auto pick = [from](const std::pair<absl::string_view, absl::string_view>& p, bool source) {
    return (from == Side::kLlamaCpp) == source ? p.first : p.second;
  };
  // The suffix: ".weight" or ".bias".
  absl::string_view suffix;
  for (absl::string_view s : {".weight", ".bias"}) {
    if (absl::EndsWith(name, s)) suffix = s;
  }
  if (suffix.empty()) return std::nullopt;
  absl::string_view stem = name.substr(0, name.size() - suffix.size());
  for (const auto& pair : kGlobal) {
    if (stem == pick(pair, true)) return absl::StrCat(pick(pair, false), suffix);
  }
  const absl::string_view layers[] = {"blk.", "model.layers."};
  const bool llama_cpp = from == Side::kLlamaCpp;
  if (!absl::ConsumePrefix(&stem, layers[llama_cpp ? 0 : 1])) return std::nullopt;
  const size_t dot = stem.find('.');
  if (dot == absl::string_view::npos) return std::nullopt;
  int layer;
  if (!absl::SimpleAtoi(stem.substr(0, dot), &layer) || layer < 0) return std::nullopt;
  const absl::string_view rest = stem.substr(dot + 1);
  for (const auto& pair : kLayer) {
    if (rest == pick(pair, true)) {
      return absl::StrCat(layers[llama_cpp ? 1 : 0], layer, ".", pick(pair, false), suffix);
    }
  }
  return std::nullopt;
}

}  // namespace

std::optional<std::string> HuggingFaceName(absl::string_view name) {
  return Translate(name, Side::kLlamaCpp);
}

std::optional<std::string> LlamaCppName(absl::string_view name) {
  return Translate(name, Side::kHuggingFace);
}

std::vector<int64_t> LlamaRopeRowOrder(int64_t rows, int64_t heads) {
  if (heads <= 0 || rows % heads != 0 || (rows / heads) % 2 != 0) return {};
  const int64_t d = rows / heads;
  std::vector<int64_t> order(static_cast<size_t>(rows));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t b = 0; b < d / 2; ++b) {
      for (int64_t a = 0; a < 2; ++a) {
        order[static_cast<size_t>(h * d + 2 * b + a)] = h * d + a * (d / 2) + b;
      }
    }
  }
  return order;
}

}  // namespace lowp
