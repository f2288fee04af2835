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
};

}  // namespace

std::optional<std::string> HuggingFaceName(absl::string_view name) {
  // The suffix: ".weight" or ".bias".
  absl::string_view suffix;
  for (absl::string_view s : {".weight", ".bias"}) {
    if (absl::EndsWith(name, s)) suffix = s;
  }
  if (suffix.empty()) return std::nullopt;
  absl::string_view stem = name.substr(0, name.size() - suffix.size());
  for (const auto& [gguf, hf] : kGlobal) {
    if (stem == gguf) return absl::StrCat(hf, suffix);
  }
  if (!absl::ConsumePrefix(&stem, "blk.")) return std::nullopt;
  const size_t dot = stem.find('.');
  if (dot == absl::string_view::npos) return std::nullopt;
  int layer;
  if (!absl::SimpleAtoi(stem.substr(0, dot), &layer) || layer < 0) return std::nullopt;
  const absl::string_view rest = stem.substr(dot + 1);
  for (const auto& [gguf, hf] : kLayer) {
    if (rest == gguf) return absl::StrCat("model.layers.", layer, ".", hf, suffix);
  }
  return std::nullopt;
}

std::optional<std::string> LlamaCppName(absl::string_view name) {
  absl::string_view suffix;
  for (absl::string_view s : {".weight", ".bias"}) {
    if (absl::EndsWith(name, s)) suffix = s;
  }
  if (suffix.empty()) return std::nullopt;
  absl::string_view stem = name.substr(0, name.size() - suffix.size());
  for (const auto& [gguf, hf] : kGlobal) {
    if (stem == hf) return absl::StrCat(gguf, suffix);
  }
  if (!absl::ConsumePrefix(&stem, "model.layers.")) return std::nullopt;
  const size_t dot = stem.find('.');
  if (dot == absl::string_view::npos) return std::nullopt;
  int layer;
  if (!absl::SimpleAtoi(stem.substr(0, dot), &layer) || layer < 0) return std::nullopt;
  const absl::string_view rest = stem.substr(dot + 1);
  for (const auto& [gguf, hf] : kLayer) {
    if (rest == hf) return absl::StrCat("blk.", layer, ".", gguf, suffix);
  }
  return std::nullopt;
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
