// llama.cpp's mixes: llama_tensor_get_type_impl and tensor_type_fallback of
// src/llama-quant.cpp (llama.cpp 007dbbf), for arch llama, no importance
// matrix, no --pure and no per-tensor overrides. The branches kept are those
// the ftypes below reach; the IQ1/IQ2/IQ3 mixes (which need an importance
// matrix or grid codecs lowp lacks) are not recipes here.
#include "quant/recipe.h"

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "codecs/ggml.h"
#include "quant/measure.h"
#include "quant/scheme_families.h"

namespace lowp {
namespace {

enum class Ftype {
  kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0, kQ2_K, kQ3_K_S, kQ3_K_M, kQ3_K_L,
  kQ4_K_S, kQ4_K_M, kQ5_K_S, kQ5_K_M, kQ6_K, kIQ4_NL, kIQ4_XS,
};

struct FtypeInfo {
  Ftype ftype;
  const char* name;
  const char* default_type;
};

constexpr FtypeInfo kFtypes[] = {
    {Ftype::kQ4_0, "Q4_0", "q4_0"},       {Ftype::kQ4_1, "Q4_1", "q4_1"},
    {Ftype::kQ5_0, "Q5_0", "q5_0"},       {Ftype::kQ5_1, "Q5_1", "q5_1"},
    {Ftype::kQ8_0, "Q8_0", "q8_0"},       {Ftype::kQ2_K, "Q2_K", "q2_K"},
    {Ftype::kQ3_K_S, "Q3_K_S", "q3_K"},   {Ftype::kQ3_K_M, "Q3_K_M", "q3_K"},
    {Ftype::kQ3_K_L, "Q3_K_L", "q3_K"},   {Ftype::kQ4_K_S, "Q4_K_S", "q4_K"},
    {Ftype::kQ4_K_M, "Q4_K_M", "q4_K"},   {Ftype::kQ5_K_S, "Q5_K_S", "q5_K"},
    {Ftype::kQ5_K_M, "Q5_K_M", "q5_K"},   {Ftype::kQ6_K, "Q6_K", "q6_K"},
    {Ftype::kIQ4_NL, "IQ4_NL", "iq4_nl"}, {Ftype::kIQ4_XS, "IQ4_XS", "iq4_xs"},
};

// tensor_get_category, for llama.cpp's names and Hugging Face's.
enum class Category {
  kTokenEmbd, kAttnQ, kAttnK, kAttnV, kAttnOutput, kFfnUp, kFfnGate, kFfnDown, kOutput, kOther,
};

Category CategoryOf(absl::string_view n) {
  if (n == "output.weight" || n == "lm_head.weight") return Category::kOutput;
  if (n == "token_embd.weight" || absl::EndsWith(n, "embed_tokens.weight")) {
    return Category::kTokenEmbd;
  }
  // attn_qkv and attn_kv_b count as attn_v (category_is_attn_v).
  for (absl::string_view s : {"attn_qkv.weight", "qkv_proj.weight", "attn_kv_b.weight",
                              "kv_b_proj.weight", "attn_v.weight", "v_proj.weight"}) {
    if (absl::StrContains(n, s)) return Category::kAttnV;
  }
  if (absl::StrContains(n, "attn_k.weight") || absl::StrContains(n, "k_proj.weight")) {
    return Category::kAttnK;
  }
  if (absl::StrContains(n, "attn_q.weight") || absl::StrContains(n, "q_proj.weight")) {
    return Category::kAttnQ;
  }
  if (absl::StrContains(n, "attn_output.weight") || absl::StrContains(n, "o_proj.weight")) {
    return Category::kAttnOutput;
  }
  if (absl::StrContains(n, "ffn_up") || absl::StrContains(n, "up_proj")) return Category::kFfnUp;
  if (absl::StrContains(n, "ffn_gate") || absl::StrContains(n, "gate_proj")) {
    return Category::kFfnGate;
  }
  if (absl::StrContains(n, "ffn_down") || absl::StrContains(n, "down_proj")) {
    return Category::kFfnDown;
  }
  return Category::kOther;
}

// The layer index of "blk.N." or "layers.N.", or -1.
int LayerOf(absl::string_view n) {
  for (absl::string_view prefix : {"blk.", "layers."}) {
    const size_t at = n.find(prefix);
    if (at == absl::string_view::npos) continue;
    absl::string_view rest = n.substr(at + prefix.size());
    const size_t dot = rest.find('.');
    int layer;
    if (dot != absl::string_view::npos && absl::SimpleAtoi(rest.substr(0, dot), &layer)) {
      return layer;
    }
  }
  return -1;
}

// The expert index of Hugging Face's "experts.E.", or -1.
int ExpertOf(absl::string_view n) {
  const size_t at = n.find("experts.");
  if (at == absl::string_view::npos) return -1;
  absl::string_view rest = n.substr(at + 8);
  const size_t dot = rest.find('.');
  int e;
  return dot != absl::string_view::npos && absl::SimpleAtoi(rest.substr(0, dot), &e) ? e : -1;
}

// tensor_allows_quantization: 2-D and up, a weight, not a norm, not the
// experts' router.
bool AllowsQuantization(absl::string_view n, size_t dims) {
  if (dims < 2) return false;
  if (!absl::EndsWith(n, "weight")) return false;
  if (absl::StrContains(n, "_norm.weight") || absl::StrContains(n, "layernorm.weight")) return false;
  if (absl::StrContains(n, "ffn_gate_inp.weight") || absl::EndsWith(n, ".gate.weight")) {
    return false;
  }
  return true;
}

bool UseMoreBits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

int64_t BlockOf(const std::string& type) {
  const ggml::TypeInfo* t = ggml::FindType(type);
  return t == nullptr ? 1 : t->block;
}

class LlamaRecipe final : public Recipe {
 public:
  explicit LlamaRecipe(const FtypeInfo& info)
      : Recipe(info.name), info_(info), default_type_(info.default_type) {}

  const std::string& default_type() const override { return default_type_; }

  uint64_t StorageBits(int64_t rows, int64_t cols) const override {
    return Default().StorageBits(rows, cols);
  }
  std::string AppliedName(int64_t cols) const override { return Default().AppliedName(cols); }
  void Apply(std::span<const float> in, int64_t cols, const TensorContext& context,
             std::span<float> out, SchemeCounts& counts, StoredChunk* stored) const override {
    Default().Apply(in, cols, context, out, counts, stored);
  }

  RecipeChoice Choose(absl::string_view name, std::span<const int64_t> shape,
                      const RecipeModel& model) const override {
    if (shape.size() >= 2 && name.find('.') == absl::string_view::npos) {
      // An array with a name of its own ("array", a dict key), not a tensor of
      // a model: llama.cpp has no rule for it.
      return {default_type_, absl::StrCat("not a model tensor's name: ", info_.name,
                                          "'s default ", default_type_)};
    }
    if (!AllowsQuantization(name, shape.size())) {
      return {"f32", "not quantized (norm, 1-D or router): kept as f32"};
    }
    const Ftype f = info_.ftype;
    const Category cat = CategoryOf(name);
    const int64_t nx = shape.empty() ? 1 : shape.back();
    const int layer = std::max(0, LayerOf(name));
    const bool eight_experts = model.experts == 8;
    std::string type = default_type_;
    std::string why = absl::StrCat(info_.name, "'s default ", type);
    const auto set = [&](const char* t, std::string reason) {
      type = t;
      why = std::move(reason);
    };
    if (cat == Category::kOutput || (!model.has_output && cat == Category::kTokenEmbd)) {
      const char* what = cat == Category::kOutput ? "output" : "token_embd tied to the output";
      if (nx % BlockOf(type) != 0) {
        set("q8_0", absl::StrCat(what, ": ", nx, " columns not a multiple of ", BlockOf(type),
                                 " -> q8_0"));
      } else if (type != "q8_0") {
        set("q6_K", absl::StrCat(what, " -> q6_K"));
      }
    } else if (cat == Category::kTokenEmbd) {
      // No rule for these ftypes.
    } else if (cat == Category::kAttnV) {
      const int i = layer, n = model.attention_v;
      if (f == Ftype::kQ2_K) {
        set(model.gqa >= 4 ? "q4_K" : "q3_K", absl::StrCat("attn_v of Q2_K with gqa ", model.gqa));
      } else if (f == Ftype::kQ3_K_M) {
        set(i < 2 ? "q5_K" : "q4_K", absl::StrCat("attn_v ", i, " of Q3_K_M"));
      } else if (f == Ftype::kQ3_K_L) {
        set("q5_K", "attn_v of Q3_K_L");
      } else if ((f == Ftype::kIQ4_NL || f == Ftype::kIQ4_XS) && model.gqa >= 4) {
        set("q5_K", absl::StrCat("attn_v with gqa ", model.gqa));
      } else if ((f == Ftype::kQ4_K_M || f == Ftype::kQ5_K_M) && UseMoreBits(i, n)) {
        set("q6_K", absl::StrCat("attn_v ", i, " of ", n, ": use_more_bits"));
      } else if (f == Ftype::kQ4_K_S && i < 4) {
        set("q5_K", absl::StrCat("attn_v ", i, " < 4 of Q4_K_S"));
      }
      if (model.layers == 80 && model.gqa > 1 && (type == "q3_K" || type == "q4_K")) {
        set("q5_K", "attn_v of a 70B model (80 layers, grouped-query)");
      }
      if (eight_experts) set("q8_0", "attn_v of an 8-expert model");
    } else if (cat == Category::kAttnK) {
      if (eight_experts) set("q8_0", "attn_k of an 8-expert model");
    } else if (cat == Category::kFfnDown) {
      const int i = layer, n = model.layers;
      if (f == Ftype::kQ2_K) {
        set("q3_K", "ffn_down of Q2_K");
      } else if (f == Ftype::kQ3_K_M) {
        set(i < n / 16 ? "q5_K" : "q4_K", absl::StrCat("ffn_down ", i, " of ", n, " of Q3_K_M"));
      } else if (f == Ftype::kQ3_K_L) {
        set("q5_K", "ffn_down of Q3_K_L");
      } else if (f == Ftype::kQ4_K_M) {
        if (UseMoreBits(i, n)) set("q6_K", absl::StrCat("ffn_down ", i, " of ", n, ": use_more_bits"));
      } else if (i < n / 8 && (f == Ftype::kIQ4_NL || f == Ftype::kIQ4_XS)) {
        set("q5_K", absl::StrCat("ffn_down ", i, " < ", n, "/8"));
      } else if (f == Ftype::kQ5_K_M && UseMoreBits(i, n)) {
        set("q6_K", absl::StrCat("ffn_down ", i, " of ", n, ": use_more_bits"));
      } else if (f == Ftype::kQ4_K_S && i < n / 8) {
        set("q5_K", absl::StrCat("ffn_down ", i, " < ", n, "/8 of Q4_K_S"));
      }
    } else if (cat == Category::kAttnOutput) {
      if (eight_experts) {
        if (f == Ftype::kQ2_K || f == Ftype::kQ3_K_S || f == Ftype::kQ3_K_M ||
            f == Ftype::kIQ4_NL || f == Ftype::kQ4_K_S || f == Ftype::kQ4_K_M ||
            f == Ftype::kIQ4_XS) {
          set("q5_K", "attn_output of an 8-expert model");
        }
      } else if (f == Ftype::kQ2_K) {
        set("q3_K", "attn_output of Q2_K");
      } else if (f == Ftype::kQ3_K_M) {
        set("q4_K", "attn_output of Q3_K_M");
      } else if (f == Ftype::kQ3_K_L) {
        set("q5_K", "attn_output of Q3_K_L");
      }
    }
    // tensor_type_fallback.
    const int64_t block = BlockOf(type);
    if (nx % block != 0) {
      std::string fallback;
      if (type == "iq4_xs") fallback = "iq4_nl";
      if (type == "q2_K" || type == "q3_K") fallback = "q4_0";
      if (type == "q4_K") fallback = "q5_0";
      if (type == "q5_K") fallback = "q5_1";
      if (type == "q6_K") fallback = "q8_0";
      absl::StrAppend(&why, "; ", nx, " columns not a multiple of ", block);
      if (fallback.empty()) {
        // llama.cpp throws ("no tensor type fallback is defined"): no file.
        absl::StrAppend(&why, ": llama.cpp has no fallback for ", type,
                        " and fails; lowp stores f16, as convert_hf_to_gguf.py does");
        type = "f16";
      } else if (nx % BlockOf(fallback) != 0) {
        absl::StrAppend(&why, ", nor of ", BlockOf(fallback), " (", fallback, ") -> f16");
        type = "f16";
      } else {
        absl::StrAppend(&why, " -> ", fallback);
        type = fallback;
      }
    }
    return {type, why};
  }

  const Scheme& SchemeOf(const RecipeChoice& choice) const override {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = schemes_.find(choice.scheme);
    if (it == schemes_.end()) {
      const std::string name =
          choice.scheme == "f32" ? "fp32" : choice.scheme == "f16" ? "fp16" : choice.scheme;
      absl::StatusOr<std::unique_ptr<Scheme>> s = ParseScheme(name);
      it = schemes_.emplace(choice.scheme, std::move(*s)).first;  // every choice is a scheme
    }
    return *it->second;
  }

 private:
  const Scheme& Default() const { return SchemeOf({default_type_, ""}); }

  const FtypeInfo& info_;
  std::string default_type_;
  mutable std::mutex mutex_;
  mutable std::map<std::string, std::unique_ptr<Scheme>> schemes_;
};

}  // namespace

RecipeModel RecipeModel::Of(std::span<const TensorView> tensors) {
  RecipeModel m;
  int64_t q_rows = 0, k_rows = 0;
  std::set<int> experts;
  for (const TensorView& t : tensors) {
    const int layer = LayerOf(t.name);
    if (layer >= 0) m.layers = std::max(m.layers, layer + 1);
    const Category c = CategoryOf(t.name);
    if (c == Category::kOutput) m.has_output = true;
    if (!AllowsQuantization(t.name, t.shape.size())) continue;
    if (c == Category::kAttnV) ++m.attention_v;
    // ggml's merged experts: ne[2] (the first row-major dimension) of a 3-D tensor.
    if (t.shape.size() == 3 && absl::StrContains(t.name, "_exps")) {
      m.experts = std::max<int>(m.experts, static_cast<int>(t.shape[0]));
    }
    if (const int e = ExpertOf(t.name); e >= 0) experts.insert(e);
    if (layer == 0 && c == Category::kAttnQ && t.shape.size() == 2) q_rows = t.shape[0];
    if (layer == 0 && c == Category::kAttnK && t.shape.size() == 2) k_rows = t.shape[0];
  }
  m.experts = std::max<int>(m.experts, static_cast<int>(experts.size()));
  if (q_rows > 0 && k_rows > 0 && q_rows % k_rows == 0) m.gqa = q_rows / k_rows;
  return m;
}

const Recipe* AsRecipe(const Scheme& scheme) { return dynamic_cast<const Recipe*>(&scheme); }

const Scheme& SchemeForTensor(const Scheme& scheme, const TensorView& tensor,
                              const RecipeModel& model, RecipeChoice* choice) {
  const Recipe* recipe = AsRecipe(scheme);
  if (recipe == nullptr) return scheme;
  RecipeChoice c = recipe->Choose(tensor.name, tensor.shape, model);
  const Scheme& chosen = recipe->SchemeOf(c);
  if (choice != nullptr) *choice = std::move(c);
  return chosen;
}

void NameForRecipe(const Scheme& scheme, const RecipeChoice& choice, QuantReport& report) {
  if (AsRecipe(scheme) == nullptr) return;
  report.scheme = scheme.name();
  report.applied = choice.scheme;
  report.applied_reason = choice.reason;
}

std::vector<std::string> RecipeNames() {
  std::vector<std::string> names;
  for (const FtypeInfo& f : kFtypes) names.push_back(f.name);
  return names;
}

namespace internal {

absl::StatusOr<std::unique_ptr<Scheme>> MakeRecipe(absl::string_view base,
                                                   const SchemeOptions& options) {
  for (const FtypeInfo& info : kFtypes) {
    if (base != info.name) continue;
    if (!options.empty()) return UnknownOption(base, options.front().first, "");
    return std::make_unique<LlamaRecipe>(info);
  }
  return absl::NotFoundError(absl::StrCat("not a llama.cpp recipe: ", base));
}

std::vector<SchemeFamily> RecipeFamilies() {
  std::vector<std::string> names = RecipeNames();
  return {{"llama.cpp mixes",
           names,
           "llama-quantize's type for each tensor of a llama-family model (llama_tensor_get_type,"
           " llama.cpp 007dbbf, no importance matrix), upper case as llama-quantize names them"
           " (q4_K alone is the plain type): the ftype's default type (Q4_K_M: q4_K, Q6_K: q6_K,"
           " Q8_0: q8_0, ...), with output.weight (and token_embd when tied) in q6_K (q8_0 when"
           " 256 does not divide its rows), attn_v and ffn_down given more bits on"
           " use_more_bits layers (Q4_K_M, Q5_K_M: q6_K), by layer or grouped-query ratio for"
           " the others, and llama.cpp's fallback on rows the type's block does not divide"
           " (q2_K/q3_K -> q4_0, q4_K -> q5_0, q5_K -> q5_1, q6_K -> q8_0, iq4_xs -> iq4_nl;"
           " f16 when that block does not divide them either, or when llama.cpp has no fallback"
           " and fails). Norms, 1-D tensors and routers stay f32. Reports give each tensor's"
           " type as applied; a 2-D array whose name is not a model tensor's (no '.': a NumPy"
           " array, a dict key) takes the mix's default type, as does a mix applied alone. The"
           " model's layer count, grouped-query ratio, experts and tied output are read"
           " off the tensor names (llama.cpp's or Hugging Face's) and shapes.",
           ""}};
}

}  // namespace internal
}  // namespace lowp
