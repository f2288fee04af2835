#include "mix/groups.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "codecs/ggml.h"
#include "io/gguf_names.h"

namespace lowp {
namespace {

// ggml's name for a lowp scheme, or null.
const ggml::TypeInfo* GgmlType(const std::string& scheme) {
  static const auto* aliases = new std::map<std::string, std::string>{
      {"fp16", "f16"}, {"fp32", "f32"}, {"ggml-mxfp4", "mxfp4"}, {"ggml-nvfp4", "nvfp4"}};
  auto it = aliases->find(scheme);
  return ggml::FindType(it != aliases->end() ? it->second : scheme);
}

// A regular expression matching `text` literally.
std::string Literal(absl::string_view text) {
  return absl::StrReplaceAll(text, {{".", "\\."}});
}

// A routed expert's matrix ("model.layers.3.mlp.experts.17.gate_proj.weight",
// Mixtral's "...block_sparse_moe.experts.17.w1.weight") as its layer's group
// of that kind: its pattern and llama.cpp's merged tensor; nullopt for
// another matrix.
std::optional<std::pair<std::string, std::string>> ExpertGroup(absl::string_view name,
                                                                int64_t layer) {
  const size_t at = name.find(".experts.");
  if (layer < 0 || at == absl::string_view::npos) return std::nullopt;
  absl::string_view rest = name.substr(at + 9);
  const size_t dot = rest.find('.');
  if (dot == absl::string_view::npos) return std::nullopt;
  const absl::string_view kind = rest.substr(dot + 1);
  const char* merged = kind == "gate_proj.weight" || kind == "w1.weight"   ? "ffn_gate_exps"
                       : kind == "up_proj.weight" || kind == "w3.weight"   ? "ffn_up_exps"
                       : kind == "down_proj.weight" || kind == "w2.weight" ? "ffn_down_exps"
                                                                           : nullptr;
  if (merged == nullptr) return std::nullopt;
  return std::pair{absl::StrCat(name.substr(0, at), ".experts.*.", kind),
                   absl::StrCat("blk.", layer, ".", merged, ".weight")};
}

// A matrix of Phi-3's fused projections as its fused tensor: the Hugging
// Face name the checkpoint stores it under and llama.cpp's; nullopt for
// another matrix or model.
struct Fused {
  std::string name, llama_cpp;
};
std::optional<Fused> FusedGroup(absl::string_view name, int64_t layer, const ModelConfig& c) {
  if (!c.fused_projections || layer < 0) return std::nullopt;
  const std::string p = absl::StrCat("model.layers.", layer, ".");
  for (const char* q : {"self_attn.q_proj.weight", "self_attn.k_proj.weight",
                        "self_attn.v_proj.weight"}) {
    if (name == p + q) return Fused{p + "self_attn.qkv_proj.weight",
                                    absl::StrCat("blk.", layer, ".attn_qkv.weight")};
  }
  for (const char* g : {"mlp.gate_proj.weight", "mlp.up_proj.weight"}) {
    if (name == p + g) return Fused{p + "mlp.gate_up_proj.weight",
                                    absl::StrCat("blk.", layer, ".ffn_up.weight")};
  }
  return std::nullopt;
}

}  // namespace

std::string MixGroup::pattern() const {
  return members.empty() ? name : absl::StrJoin(members, ",");
}

std::vector<MixGroup> MixGroups(const Checkpoint& model, ExpertGroups experts) {
  std::vector<MixGroup> out;
  std::map<std::string, size_t> merged;  // a merged group's pattern -> its place
  const bool tied = model.config().tie_word_embeddings;
  for (const TensorView& m : model.MatrixShapes()) {
    MixGroup g;
    g.name = m.name;
    g.llama_cpp = LlamaCppName(m.name).value_or(m.name);
    g.rows = m.rows();
    g.cols = m.cols();
    constexpr absl::string_view kLayers = "model.layers.";
    if (absl::string_view rest = m.name; absl::ConsumePrefix(&rest, kLayers)) {
      g.layer = std::stoll(std::string(rest.substr(0, rest.find('.'))));
    }
    g.tied = tied && m.name == model.TableName(Table::kEmbedding);
    if (auto fused = FusedGroup(m.name, g.layer, model.config())) {
      if (auto it = merged.find(fused->name); it != merged.end()) {
        out[it->second].rows += g.rows;
        out[it->second].members.push_back(m.name);
        continue;
      }
      g.name = fused->name;
      g.llama_cpp = fused->llama_cpp;
      g.members = {m.name};
      merged.emplace(g.name, out.size());
    }
    if (experts == ExpertGroups::kLayer) {
      if (auto group = ExpertGroup(m.name, g.layer)) {
        if (auto it = merged.find(group->first); it != merged.end()) {
          ++out[it->second].count;
          continue;
        }
        g.name = group->first;
        g.llama_cpp = group->second;
        merged.emplace(g.name, out.size());
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

absl::StatusOr<uint64_t> GroupBytes(const Scheme& scheme, const MixGroup& group) {
  if (const std::string applied = scheme.AppliedName(group.cols); applied != scheme.name()) {
    return absl::InvalidArgumentError(absl::StrCat(
        scheme.name(), " does not apply to ", group.name, " (rows of ", group.cols,
        " elements): llama.cpp would store it as ", applied));
  }
  return (scheme.StorageBits(group.rows, group.cols) + 7) / 8 * static_cast<uint64_t>(group.count);
}

std::vector<std::string> MixRules(const std::vector<MixGroup>& groups,
                                  const MixAssignment& schemes) {
  std::vector<std::string> out;
  for (size_t g = 0; g < groups.size(); ++g) {
    if (groups[g].members.empty()) {
      out.push_back(groups[g].name + "=" + schemes[g]);
    } else {
      for (const std::string& m : groups[g].members) out.push_back(m + "=" + schemes[g]);
    }
  }
  return out;
}

std::string LlamaQuantizeCommand::Line(const std::string& input,
                                       const std::string& output) const {
  auto quote = [](const std::string& item) {
    const bool plain = !item.empty() && std::all_of(item.begin(), item.end(), [](char c) {
      return absl::ascii_isalnum(static_cast<unsigned char>(c)) ||
             std::string_view("_-.=/,:").find(c) != std::string_view::npos;
    });
    return plain ? item : absl::StrCat("'", absl::StrReplaceAll(item, {{"'", "'\\''"}}), "'");
  };
  std::vector<std::string> items = {"llama-quantize"};
  for (const std::string& o : options) items.push_back(quote(o));
  for (const std::string& x : {input, output, type}) items.push_back(quote(x));
  return absl::StrJoin(items, " ");
}

absl::StatusOr<LlamaQuantizeCommand> LlamaQuantizeArguments(const std::vector<MixGroup>& groups,
                                                            const MixAssignment& schemes) {
  std::vector<std::string> tables;
  // (kind, type) -> layers, in first-seen order; and the base type's count.
  std::vector<std::pair<std::string, std::string>> keys;
  std::map<std::pair<std::string, std::string>, std::vector<int64_t>> layers;
  std::map<std::string, int64_t> count;
  for (const MixGroup& group : groups) {
    if (group.layer >= 0 && !absl::StartsWith(group.llama_cpp, "blk.")) {
      return absl::InvalidArgumentError(absl::StrCat(
          group.name, " has no llama.cpp tensor of its own (llama.cpp stores a layer's ",
          "experts merged: --expert-groups layer types them together)"));
    }
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    if (absl::StrContains(schemes[g], ':')) {
      return absl::InvalidArgumentError(absl::StrCat(
          schemes[g], " (", groups[g].name, ") is calibrated: llama-quantize would round the "
          "matrix to nearest again"));
    }
    const ggml::TypeInfo* type = GgmlType(schemes[g]);
    if (type == nullptr || !type->can_encode) {
      return absl::InvalidArgumentError(absl::StrCat(
          schemes[g], " (", groups[g].name, ") is not a type llama-quantize writes"));
    }
    const std::string name(type->name);
    const MixGroup& m = groups[g];
    if (m.layer < 0) {
      // A tied embedding is what llama.cpp quantizes as the output; the
      // explicit type wins either way.
      const bool output = m.llama_cpp == "output.weight";
      tables.push_back(output ? "--output-tensor-type" : "--token-embedding-type");
      tables.push_back(name);
      continue;
    }
    const std::string prefix = absl::StrCat("blk.", m.layer, ".");
    const std::string kind = absl::StartsWith(m.llama_cpp, prefix)
                                 ? m.llama_cpp.substr(prefix.size())
                                 : m.llama_cpp;
    // DeepSeek's kv_b is two tensors in a llama.cpp file of today
    // (attn_k_b transposed, attn_v_b; a legacy file's attn_kv_b).
    const std::vector<std::string> kinds =
        kind == "attn_kv_b.weight" ? std::vector<std::string>{"attn_k_b.weight", "attn_v_b.weight"}
                                   : std::vector<std::string>{kind};
    for (const std::string& k : kinds) {
      const std::pair<std::string, std::string> key{k, name};
      if (!layers.contains(key)) keys.push_back(key);
      layers[key].push_back(m.layer);
    }
    ++count[name];
  }
  LlamaQuantizeCommand out;
  out.options = tables;
  std::string base;
  int64_t most = -1;
  for (const auto& [name, n] : count) {
    if (n > most) base = name, most = n;
  }
  for (const auto& key : keys) {
    const std::vector<int64_t>& l = layers[key];
    const std::string which =
        l.size() == 1 ? absl::StrCat(l[0]) : absl::StrCat("(", absl::StrJoin(l, "|"), ")");
    // Lower case, as llama-quantize lowers the pattern before matching.
    out.options.push_back("--tensor-type");
    out.options.push_back(absl::StrCat(
        absl::AsciiStrToLower(absl::StrCat("blk\\.", which, "\\.", Literal(key.first))), "=",
        key.second));
  }
  // Without layers (no decoder matrices) the tables' type serves.
  out.type = base.empty() ? tables.back() : base;
  return out;
}

}  // namespace lowp
