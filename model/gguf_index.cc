#include "model/gguf_index.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "io/gguf.h"
#include "io/gguf_names.h"

namespace lowp {
namespace {

// A GGUF tensor of a mixture of experts under the Hugging Face name of
// `model_type`'s: the router (ffn_gate_inp) and, for a merged expert tensor
// (blk.N.ffn_gate_exps...), the prefix of its experts' names
// ("model.layers.N.block_sparse_moe.experts.") and their suffix (".w1.weight").
struct MoeName {
  std::string router;          // the router's name; empty: not the router
  std::string prefix, suffix;  // a merged expert tensor's; empty: not one
};
MoeName MoeTensor(absl::string_view name, absl::string_view model_type) {
  MoeName out;
  absl::string_view rest = name;
  if (!absl::ConsumePrefix(&rest, "blk.")) return out;
  const size_t dot = rest.find('.');
  int64_t layer = 0;
  if (dot == absl::string_view::npos || !absl::SimpleAtoi(rest.substr(0, dot), &layer) ||
      layer < 0) {
    return out;
  }
  rest.remove_prefix(dot + 1);
  const bool mixtral = model_type == "mixtral";
  const std::string p = absl::StrCat("model.layers.", layer, ".",
                                     mixtral ? "block_sparse_moe." : "mlp.");
  if (rest == "ffn_gate_inp.weight") {
    out.router = p + (model_type == "gpt_oss" ? "router.weight" : "gate.weight");
    return out;
  }
  const char* kinds[][3] = {{"ffn_gate_exps.weight", ".w1.weight", ".gate_proj.weight"},
                            {"ffn_up_exps.weight", ".w3.weight", ".up_proj.weight"},
                            {"ffn_down_exps.weight", ".w2.weight", ".down_proj.weight"}};
  for (const auto& k : kinds) {
    if (rest != k[0]) continue;
    out.prefix = p + "experts.";
    out.suffix = mixtral ? k[1] : k[2];
  }
  return out;
}

// Bytes [first, first + size) of `t` as a tensor `name` of `shape` (whole
// rows of whole blocks: the callers' to see).
TensorView Part(const TensorView& t, std::string name, std::vector<int64_t> shape, size_t first,
                size_t size) {
  TensorView part = t;
  part.name = std::move(name);
  part.shape = std::move(shape);
  part.bytes = t.bytes.subspan(first, size);
  return part;
}

}  // namespace

absl::string_view LlamaCppArchitectureName(absl::string_view model_type) {
  if (model_type == "mistral" || model_type == "mixtral") return "llama";
  if (model_type == "qwen3_moe") return "qwen3moe";
  if (model_type == "qwen2_moe") return "qwen2moe";
  if (model_type == "gpt_oss") return "gpt-oss";
  if (model_type == "deepseek_v3") return "deepseek2";
  return model_type;
}

// A GGUF file checked against the model before its layout is trusted: its
// general.architecture must be there, a string, and the model's (llama.cpp
// refuses a file without one; a file of another architecture stores q and k
// in another row order), and the hyperparameters it states must be the
// config's (the row order of q and k depends on the head counts).
absl::Status CheckGgufModel(const TensorSet& set, const ModelConfig& config) {
  const ParsedGguf& gguf = *set.gguf();
  const std::string file = absl::StrJoin(set.files(), ", ");
  const GgufValue* arch = gguf.Find("general.architecture");
  const absl::string_view want = LlamaCppArchitectureName(config.model_type);
  if (arch == nullptr || arch->type != GgufType::kString) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": general.architecture is ",
        arch == nullptr ? "missing"
                        : absl::StrCat("a ", GgufTypeName(arch->type), ", not a string"),
        " (llama.cpp refuses such a file; ", config.name, " would be \"", want, "\")"));
  }
  if (arch->s != want) {
    return absl::InvalidArgumentError(absl::StrCat(
        file, ": a GGUF of architecture \"", absl::CHexEscape(arch->s), "\", but ", config.name,
        " is ", config.model_type, " (llama.cpp's \"", want,
        "\"): its tensors are not this model's"));
  }
  struct Key {
    const char* suffix;
    int64_t value;
    const char* field;
  };
  const Key keys[] = {{"block_count", config.num_layers, "num_hidden_layers"},
                      {"embedding_length", config.hidden_size, "hidden_size"},
                      {"attention.head_count", config.num_heads, "num_attention_heads"},
                      // DeepSeek's latent attention is written as one kv head
                      {"attention.head_count_kv", want == "deepseek2" ? 1 : config.num_kv_heads,
                       "num_key_value_heads"}};
  for (const Key& k : keys) {
    const std::string key = absl::StrCat(want, ".", k.suffix);
    const GgufValue* v = gguf.Find(key);
    if (v == nullptr) continue;
    // A count per layer (llama.cpp reads an array too): every one must agree.
    std::vector<GgufValue> values = v->type == GgufType::kArray ? v->Elements()
                                                                : std::vector<GgufValue>{*v};
    for (const GgufValue& e : values) {
      std::optional<int64_t> n;
      if (e.type == GgufType::kU8 || e.type == GgufType::kU16 || e.type == GgufType::kU32 ||
          e.type == GgufType::kU64) {
        if (e.u <= uint64_t{INT64_MAX}) n = static_cast<int64_t>(e.u);
      } else if (e.type == GgufType::kI8 || e.type == GgufType::kI16 ||
                 e.type == GgufType::kI32 || e.type == GgufType::kI64) {
        n = e.i;
      }
      if (!n) {
        return absl::InvalidArgumentError(absl::StrCat(file, ": ", key, " is a ",
                                                       GgufTypeName(e.type), ", not an integer"));
      }
      if (*n != k.value) {
        return absl::InvalidArgumentError(absl::StrCat(file, ": ", key, " is ", *n, ", but ",
                                                       config.name, " has ", k.field, " ", k.value,
                                                       ": the file is another model's"));
      }
    }
  }
  return absl::OkStatus();
}


absl::StatusOr<std::vector<GgufTensorName>> GgufTensorNames(const TensorView& t,
                                                            const ModelConfig& config) {
  std::vector<GgufTensorName> out;
  if (config.num_experts > 0) {
    const MoeName moe = MoeTensor(t.name, config.model_type);
    if (!moe.router.empty()) {
      out.push_back({moe.router, std::nullopt, {}});
      return out;
    }
    if (!moe.prefix.empty() && t.shape.size() == 3 && t.shape[0] > 0) {
      // Expert e's rows are the e-th equal part of the bytes (whole rows
      // of whole blocks).
      const int64_t experts = t.shape[0];
      const size_t part = t.bytes.size() / static_cast<size_t>(experts);
      for (int64_t e = 0; e < experts; ++e) {
        out.push_back({absl::StrCat(moe.prefix, e, moe.suffix),
                       Part(t, absl::StrCat(t.name, "[", e, "]"), {t.shape[1], t.shape[2]},
                            static_cast<size_t>(e) * part, part),
                       {}});
      }
      return out;
    }
  }
  if (absl::EndsWith(t.name, ".attn_k_b.weight") || absl::EndsWith(t.name, ".attn_v_b.weight")) {
    return absl::InvalidArgumentError(absl::StrCat(
        t.file, ": tensor ", t.name, ": lowp does not read llama.cpp's split of kv_b "
        "(attn_k_b transposed, attn_v_b) back into ", config.name, "'s kv_b_proj"));
  }
  if (config.fused_projections && t.shape.size() == 2 && t.shape[0] > 0 &&
      (t.ggml == nullptr || t.shape[1] % t.ggml->block == 0)) {
    // Phi-3's fused attn_qkv and ffn_up: each part's rows, one after
    // another (whole rows of whole blocks).
    absl::string_view stem = t.name;
    std::vector<std::pair<std::string, int64_t>> parts;
    const int64_t q = config.num_heads * config.head_dim;
    const int64_t kv = config.num_kv_heads * config.head_dim;
    if (absl::ConsumeSuffix(&stem, ".attn_qkv.weight")) {
      parts = {{"self_attn.q_proj.weight", q}, {"self_attn.k_proj.weight", kv},
               {"self_attn.v_proj.weight", kv}};
    } else if (absl::ConsumeSuffix(&stem, ".ffn_up.weight")) {
      parts = {{"mlp.gate_proj.weight", config.intermediate_size},
               {"mlp.up_proj.weight", config.intermediate_size}};
    }
    int64_t rows = 0;
    for (const auto& part : parts) rows += part.second;
    int64_t layer = 0;
    if (!parts.empty() && rows == t.shape[0] && absl::ConsumePrefix(&stem, "blk.") &&
        absl::SimpleAtoi(stem, &layer) && layer >= 0) {
      const size_t row_bytes = t.bytes.size() / static_cast<size_t>(t.shape[0]);
      int64_t first = 0;
      for (const auto& [part, count] : parts) {
        out.push_back({absl::StrCat("model.layers.", layer, ".", part),
                       Part(t, absl::StrCat(t.name, "[", first, ":", first + count, "]"),
                            {count, t.shape[1]}, static_cast<size_t>(first) * row_bytes,
                            static_cast<size_t>(count) * row_bytes),
                       {}});
        first += count;
      }
      return out;
    }
  }
  std::optional<std::string> hf = HuggingFaceName(t.name);
  if (!hf.has_value()) return out;
  if (absl::EndsWith(*hf, ".mlp.shared_expert_gate.weight") && t.shape.size() == 1) {
    // Qwen2-MoE's shared expert gate: a vector in the file, [1, hidden] in
    // the model.
    TensorView row = t;
    row.shape = {1, t.shape[0]};
    out.push_back({*std::move(hf), std::move(row), {}});
    return out;
  }
  GgufTensorName n{*std::move(hf), std::nullopt, {}};
  // llama.cpp's converter permutes q and k of architecture "llama" (Llama,
  // Mistral, Mixtral) for its rotary embedding, not those of qwen or gemma.
  if (LlamaCppArchitectureName(config.model_type) == "llama" && t.shape.size() == 2) {
    if (absl::EndsWith(n.name, "self_attn.q_proj.weight")) {
      n.row_of = LlamaRopeRowOrder(t.rows(), config.num_heads);
    } else if (absl::EndsWith(n.name, "self_attn.k_proj.weight")) {
      n.row_of = LlamaRopeRowOrder(t.rows(), config.num_kv_heads);
    }
  }
  out.push_back(std::move(n));
  return out;
}

}  // namespace lowp
