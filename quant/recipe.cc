// llama.cpp's mixes: llama_tensor_get_type_impl, tensor_type_fallback and
// tensor_requires_imatrix of src/llama-quant.cpp (llama.cpp 007dbbf), for
// arch llama, with or without an importance matrix (RecipeModel::has_imatrix
// changes some choices), no --pure and no per-tensor overrides. The branches
// kept are those the ftypes below reach.
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
  kQ4_0, kQ4_1, kQ5_0, kQ5_1, kQ8_0, kQ2_K, kQ2_K_S, kQ3_K_S, kQ3_K_M, kQ3_K_L,
  kQ4_K_S, kQ4_K_M, kQ5_K_S, kQ5_K_M, kQ6_K, kIQ4_NL, kIQ4_XS,
  kIQ1_S, kIQ1_M, kIQ2_XXS, kIQ2_XS, kIQ2_S, kIQ2_M, kIQ3_XXS, kIQ3_XS, kIQ3_S, kIQ3_M,
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
    // Made with an importance matrix (llama-quantize refuses some without).
    {Ftype::kQ2_K_S, "Q2_K_S", "q2_K"},   {Ftype::kIQ1_S, "IQ1_S", "iq1_s"},
    {Ftype::kIQ1_M, "IQ1_M", "iq1_m"},    {Ftype::kIQ2_XXS, "IQ2_XXS", "iq2_xxs"},
    {Ftype::kIQ2_XS, "IQ2_XS", "iq2_xs"}, {Ftype::kIQ2_S, "IQ2_S", "iq2_xs"},
    {Ftype::kIQ2_M, "IQ2_M", "iq2_s"},    {Ftype::kIQ3_XXS, "IQ3_XXS", "iq3_xxs"},
    {Ftype::kIQ3_XS, "IQ3_XS", "iq3_s"},  {Ftype::kIQ3_S, "IQ3_S", "iq3_s"},
    {Ftype::kIQ3_M, "IQ3_M", "iq3_s"},
};

// The ftypes of llama_tensor_get_type_impl's first branch (IQ1, IQ2).
bool LowestBits(Ftype f) {
  return f == Ftype::kIQ2_XXS || f == Ftype::kIQ2_XS || f == Ftype::kIQ1_S ||
         f == Ftype::kIQ2_S || f == Ftype::kIQ2_M || f == Ftype::kIQ1_M;
}

// tensor_requires_imatrix: the types llama-quantize will not make without
// one (token_embd and output excepted), and q2_K in a Q2_K_S file.
bool TypeRequiresImatrix(const std::string& type, Ftype f) {
  for (const char* t : {"iq3_xxs", "iq2_xxs", "iq2_xs", "iq2_s", "iq1_m", "iq1_s"}) {
    if (type == t) return true;
  }
  return type == "q2_K" && f == Ftype::kQ2_K_S;
}

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
    const bool imatrix = model.has_imatrix;
    const bool iq2_s_or_m = f == Ftype::kIQ2_S || f == Ftype::kIQ2_M;
    if (cat == Category::kOutput || (!model.has_output && cat == Category::kTokenEmbd)) {
      const char* what = cat == Category::kOutput ? "output" : "token_embd tied to the output";
      if (nx % BlockOf(type) != 0) {
        set("q8_0", absl::StrCat(what, ": ", nx, " columns not a multiple of ", BlockOf(type),
                                 " -> q8_0"));
      } else if (LowestBits(f) || f == Ftype::kIQ3_XXS) {
        set("q5_K", absl::StrCat(what, " of ", info_.name, " -> q5_K"));
      } else if (type != "q8_0") {
        set("q6_K", absl::StrCat(what, " -> q6_K"));
      }
    } else if (cat == Category::kTokenEmbd) {
      if (f == Ftype::kIQ2_XXS || f == Ftype::kIQ2_XS || f == Ftype::kIQ1_S || f == Ftype::kIQ1_M) {
        set("q2_K", absl::StrCat("token_embd of ", info_.name));
      } else if (iq2_s_or_m || f == Ftype::kIQ3_XXS) {
        set("iq3_s", absl::StrCat("token_embd of ", info_.name));
      }
    } else if (LowestBits(f)) {
      const char* low = iq2_s_or_m ? "iq3_s" : "q2_K";
      if (cat == Category::kAttnV) {
        if (model.gqa >= 4 || model.experts >= 4) {
          set("q4_K", absl::StrCat("attn_v of ", info_.name, " with gqa ", model.gqa, ", ",
                                   model.experts, " experts"));
        } else {
          set(low, absl::StrCat("attn_v of ", info_.name));
        }
      } else if (eight_experts && cat == Category::kAttnK) {
        set("q4_K", "attn_k of an 8-expert model");
      } else if (cat == Category::kFfnDown) {
        if (layer < model.layers / 8) {
          set(low, absl::StrCat("ffn_down ", layer, " < ", model.layers, "/8 of ", info_.name));
        }
      } else if (cat == Category::kAttnOutput) {
        if (eight_experts) {
          set("q5_K", "attn_output of an 8-expert model");
        } else if (f == Ftype::kIQ1_S || f == Ftype::kIQ1_M) {
          set("iq2_xxs", absl::StrCat("attn_output of ", info_.name));
        } else if (iq2_s_or_m) {
          set("iq3_s", absl::StrCat("attn_output of ", info_.name));
        }
      }
    } else if (cat == Category::kAttnV) {
      const int i = layer, n = model.attention_v;
      if (f == Ftype::kQ2_K) {
        set(model.gqa >= 4 ? "q4_K" : "q3_K", absl::StrCat("attn_v of Q2_K with gqa ", model.gqa));
      } else if (f == Ftype::kQ2_K_S && model.gqa >= 4) {
        set("q4_K", absl::StrCat("attn_v of Q2_K_S with gqa ", model.gqa));
      } else if (f == Ftype::kIQ3_XXS) {
        set(model.gqa >= 4 ? "q4_K" : !imatrix ? "iq3_s" : "iq3_xxs",
            absl::StrCat("attn_v of IQ3_XXS with gqa ", model.gqa,
                         imatrix ? ", an imatrix" : ", no imatrix"));
      } else if ((f == Ftype::kIQ3_XS || f == Ftype::kIQ3_S) && model.gqa >= 4) {
        set("q4_K", absl::StrCat("attn_v with gqa ", model.gqa));
      } else if (f == Ftype::kIQ3_M) {
        set("q4_K", "attn_v of IQ3_M");
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
      if (eight_experts) {
        set("q8_0", "attn_k of an 8-expert model");
      } else if (f == Ftype::kIQ3_XS) {
        set("iq3_xxs", "attn_k of IQ3_XS");
      } else if (f == Ftype::kIQ3_XXS) {
        set("iq2_s", "attn_k of IQ3_XXS");
      }
    } else if (cat == Category::kAttnQ) {
      if (f == Ftype::kIQ3_XS) {
        set("iq3_xxs", "attn_q of IQ3_XS");
      } else if (f == Ftype::kIQ3_XXS) {
        set("iq2_s", "attn_q of IQ3_XXS");
      }
    } else if (cat == Category::kFfnDown) {
      const int i = layer, n = model.layers;
      if (f == Ftype::kQ2_K) {
        set("q3_K", "ffn_down of Q2_K");
      } else if (f == Ftype::kQ2_K_S) {
        if (i < n / 8) set("q4_K", absl::StrCat("ffn_down ", i, " < ", n, "/8 of Q2_K_S"));
      } else if (f == Ftype::kIQ3_XXS && !imatrix) {
        set(i < n / 8 ? "q4_K" : "q3_K",
            absl::StrCat("ffn_down ", i, " of ", n, " of IQ3_XXS without an imatrix"));
      } else if (f == Ftype::kQ3_K_M) {
        set(i < n / 16 ? "q5_K" : "q4_K", absl::StrCat("ffn_down ", i, " of ", n, " of Q3_K_M"));
      } else if (f == Ftype::kIQ3_M && (i < n / 8 || (eight_experts && UseMoreBits(i, n)))) {
        set("q4_K", absl::StrCat("ffn_down ", i, " of ", n, " of IQ3_M"));
      } else if (f == Ftype::kQ3_K_L) {
        set("q5_K", "ffn_down of Q3_K_L");
      } else if (f == Ftype::kQ4_K_M) {
        if (UseMoreBits(i, n)) set("q6_K", absl::StrCat("ffn_down ", i, " of ", n, ": use_more_bits"));
      } else if (i < n / 8 && (f == Ftype::kIQ4_NL || f == Ftype::kIQ4_XS) && !imatrix) {
        set("q5_K", absl::StrCat("ffn_down ", i, " < ", n, "/8 without an imatrix"));
      } else if (f == Ftype::kQ5_K_M && UseMoreBits(i, n)) {
        set("q6_K", absl::StrCat("ffn_down ", i, " of ", n, ": use_more_bits"));
      } else if (f == Ftype::kQ4_K_S && i < n / 8) {
        set("q5_K", absl::StrCat("ffn_down ", i, " < ", n, "/8 of Q4_K_S"));
      } else if ((f == Ftype::kQ4_0 || f == Ftype::kQ5_0) && imatrix && i < n / 8) {
        set(f == Ftype::kQ4_0 ? "q4_1" : "q5_1",
            absl::StrCat("ffn_down ", i, " < ", n, "/8 with an imatrix"));
      }
    } else if (cat == Category::kAttnOutput) {
      if (eight_experts) {
        if (f == Ftype::kQ2_K || f == Ftype::kIQ3_XS || f == Ftype::kIQ3_XXS ||
            f == Ftype::kQ3_K_S || f == Ftype::kQ3_K_M || f == Ftype::kIQ4_NL ||
            f == Ftype::kQ4_K_S || f == Ftype::kQ4_K_M || f == Ftype::kIQ3_S ||
            f == Ftype::kIQ3_M || f == Ftype::kIQ4_XS) {
          set("q5_K", "attn_output of an 8-expert model");
        }
      } else if (f == Ftype::kQ2_K) {
        set("q3_K", "attn_output of Q2_K");
      } else if (f == Ftype::kIQ3_XXS) {
        set("iq3_s", "attn_output of IQ3_XXS");
      } else if (f == Ftype::kQ3_K_M) {
        set("q4_K", "attn_output of Q3_K_M");
      } else if (f == Ftype::kQ3_K_L) {
        set("q5_K", "attn_output of Q3_K_L");
      } else if (f == Ftype::kIQ3_M) {
        set("q4_K", "attn_output of IQ3_M");
      }
    } else if (cat == Category::kFfnGate || cat == Category::kFfnUp) {
      const int i = layer, n = model.layers;
      if (f == Ftype::kIQ3_XS && i >= n / 8 && i < 7 * n / 8) {
        set("iq3_xxs", absl::StrCat(cat == Category::kFfnGate ? "ffn_gate " : "ffn_up ", i,
                                    " of ", n, " of IQ3_XS"));
      }
    }
    // tensor_type_fallback.
    const int64_t block = BlockOf(type);
    if (nx % block != 0) {
      std::string fallback;
      for (const char* t : {"iq1_s", "iq1_m", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s",
                            "iq4_xs"}) {
        if (type == t) fallback = "iq4_nl";
      }
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
    // tensor_requires_imatrix (by category, so Hugging Face's names of
    // token_embd and output count too).
    const bool needs_imatrix = cat != Category::kTokenEmbd && cat != Category::kOutput &&
                          TypeRequiresImatrix(type, f);
    return {type, why, needs_imatrix};
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

absl::Status CheckImatrixRequirement(const Scheme& scheme, const RecipeChoice& choice,
                                     absl::string_view tensor, bool have_imatrix) {
  if (have_imatrix || !choice.requires_imatrix || AsRecipe(scheme) == nullptr) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      scheme.name(), " gives tensor '", tensor, "' ", choice.scheme,
      ", which llama-quantize makes only with an importance matrix: give one (--imatrix; lowp"
      " imatrix makes it)"));
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
           " llama.cpp 007dbbf), upper case as llama-quantize names them (q4_K alone is the plain"
           " type): the ftype's default type (Q4_K_M: q4_K, Q6_K: q6_K, Q8_0: q8_0, IQ2_M: iq2_s,"
           " IQ3_M: iq3_s, ...), with output.weight (and token_embd when tied) in q6_K (q5_K for"
           " the IQ1/IQ2 mixes and IQ3_XXS; q8_0 when its block does not divide the rows), attn_v"
           " and ffn_down given more bits on use_more_bits layers (Q4_K_M, Q5_K_M: q6_K), by"
           " layer, grouped-query ratio or experts for the others, and llama.cpp's fallback on rows"
           " the type's block does not divide (q2_K/q3_K -> q4_0, q4_K -> q5_0, q5_K -> q5_1, q6_K"
           " -> q8_0, iq4_xs and the grid types -> iq4_nl; f16 when that block does not divide"
           " them either, or when llama.cpp has no fallback and fails). Norms, 1-D tensors and"
           " routers stay f32. With an importance matrix (--imatrix) every tensor is quantized with"
           " its entry and llama-quantize's choices change for IQ3_XXS, IQ4_NL, IQ4_XS, Q4_0 and"
           " Q5_0; Q2_K_S and the IQ1/IQ2/IQ3_XXS mixes are refused without one where"
           " llama-quantize refuses (a tensor given iq1_s, iq1_m, iq2_xxs, iq2_xs, iq2_s or"
           " iq3_xxs, or q2_K in Q2_K_S; token_embd and output excepted). Reports give each"
           " tensor's type as applied; a 2-D array whose name is not a model tensor's (no '.': a"
           " NumPy array, a dict key) takes the mix's default type, as does a mix applied alone."
           " The model's layer count, grouped-query ratio, experts and tied output are read off"
           " the tensor names (llama.cpp's or Hugging Face's) and shapes.",
           ""}};
}

}  // namespace internal
}  // namespace lowp
