#include "model/weights.h"

#include <cstring>
#include <filesystem>
#include <system_error>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "formats/option_error.h"
#include "quant/recipe.h"

namespace lowp {
namespace {

// A dimension the config fixes, with the fields it comes from.
struct Dim {
  int64_t value;
  std::string fields;  // "num_key_value_heads * head_dim = 4 * 8"
};

Dim Field(absl::string_view name, int64_t value) { return {value, std::string(name)}; }
Dim Product(absl::string_view a, int64_t x, absl::string_view b, int64_t y) {
  return {x * y, absl::StrCat(a, " * ", b, " = ", x, " * ", y)};
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

class Loader {
 public:
  Loader(const ModelConfig& config, const TensorSet& set) : config_(config) {
    for (const TensorView& t : set.tensors()) by_name_[t.name] = &t;
  }

  // The tensor `name` with the shape `dims`, as float32; an error names the
  // tensor, its file and the config fields its shape contradicts.
  absl::StatusOr<Values> Read(const std::string& name, const std::vector<Dim>& dims,
                              absl::string_view why_needed = "") {
    auto it = by_name_.find(name);
    if (it == by_name_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(config_.name, ": the checkpoint has no tensor ", name,
                       why_needed.empty() ? "" : absl::StrCat(" (", why_needed, ")")));
    }
    const TensorView& t = *it->second;
    std::vector<int64_t> want;
    std::vector<std::string> fields;
    for (const Dim& d : dims) {
      want.push_back(d.value);
      fields.push_back(d.fields);
    }
    if (t.shape != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          t.file, ": tensor ", name, " has shape ", ShapeText(t.shape), "; ", config_.name,
          " makes it ", ShapeText(want), " (", absl::StrJoin(fields, ", "), ")"));
    }
    if (!IsFloating(t.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat(t.file, ": tensor ", name, " is ",
                                                     DTypeName(t.dtype), ", not floating"));
    }
    auto values = std::make_shared<std::vector<float>>(static_cast<size_t>(t.elements()));
    if (absl::Status s = ReadAsFloat32(t, 0, *values); !s.ok()) return s;
    return Values(std::move(values));
  }

  absl::StatusOr<Matrix> ReadMatrix(const std::string& name, Dim rows, Dim cols, bool bias) {
    Matrix m;
    m.name = name + ".weight";
    m.rows = rows.value;
    m.cols = cols.value;
    absl::StatusOr<Values> values = Read(m.name, {rows, cols});
    if (!values.ok()) return values.status();
    m.values = *std::move(values);
    if (bias) {
      absl::StatusOr<Values> b = Read(name + ".bias", {rows}, "the config asks for biases");
      if (!b.ok()) return b.status();
      m.bias = *std::move(b);
    }
    return m;
  }

 private:
  const ModelConfig& config_;
  std::map<std::string, const TensorView*> by_name_;
};

#define LOWP_ASSIGN(lhs, expr)              \
  do {                                      \
    auto lowp_value_ = (expr);              \
    if (!lowp_value_.ok()) return lowp_value_.status(); \
    lhs = *std::move(lowp_value_);          \
  } while (false)

constexpr const char* kForwardTypes[] = {"llama", "mistral", "qwen2",  "qwen3",
                                         "gemma", "gemma2",  "mixtral"};

}  // namespace

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
  if (!rope.empty() && rope != "linear" && rope != "llama3") {
    return absl::InvalidArgumentError(
        absl::StrCat(c.name, ": rope_scaling type \"", rope,
                     "\" is not supported (supported: none, default, linear, llama3)"));
  }
  return absl::OkStatus();
}

std::vector<ModelWeights::Entry> ModelWeights::Matrices() {
  std::vector<Entry> out = {{&embed, false}};
  for (LayerWeights& l : layers) {
    for (Matrix* m : {&l.q, &l.k, &l.v, &l.o}) out.push_back({m, true});
    if (config.num_experts > 0) {
      out.push_back({&l.router, false});
      for (Expert& e : l.experts) {
        for (Matrix* m : {&e.gate, &e.up, &e.down}) out.push_back({m, true});
      }
    } else {
      for (Matrix* m : {&l.gate, &l.up, &l.down}) out.push_back({m, true});
    }
  }
  if (!config.tie_word_embeddings) out.push_back({&lm_head, false});
  return out;
}

absl::StatusOr<ModelWeights> LoadWeights(const ModelConfig& c, const TensorSet& set) {
  if (absl::Status s = CheckForwardSupport(c); !s.ok()) return s;
  Loader load(c, set);
  ModelWeights w;
  w.config = c;
  const Dim hidden = Field("hidden_size", c.hidden_size);
  const Dim vocab = Field("vocab_size", c.vocab_size);
  const Dim inter = Field("intermediate_size", c.intermediate_size);
  const Dim q_width = Product("num_attention_heads", c.num_heads, "head_dim", c.head_dim);
  const Dim kv_width = Product("num_key_value_heads", c.num_kv_heads, "head_dim", c.head_dim);
  LOWP_ASSIGN(w.embed, load.ReadMatrix("model.embed_tokens", vocab, hidden, false));
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    LayerWeights l;
    LOWP_ASSIGN(l.input_norm, load.Read(p + "input_layernorm.weight", {hidden}));
    LOWP_ASSIGN(l.post_attention_norm, load.Read(p + "post_attention_layernorm.weight", {hidden}));
    if (c.norms_per_layer == 4) {
      LOWP_ASSIGN(l.pre_feedforward_norm,
                  load.Read(p + "pre_feedforward_layernorm.weight", {hidden}));
      LOWP_ASSIGN(l.post_feedforward_norm,
                  load.Read(p + "post_feedforward_layernorm.weight", {hidden}));
    }
    const std::string a = p + "self_attn.";
    LOWP_ASSIGN(l.q, load.ReadMatrix(a + "q_proj", q_width, hidden, c.attention_bias));
    LOWP_ASSIGN(l.k, load.ReadMatrix(a + "k_proj", kv_width, hidden, c.attention_bias));
    LOWP_ASSIGN(l.v, load.ReadMatrix(a + "v_proj", kv_width, hidden, c.attention_bias));
    LOWP_ASSIGN(l.o, load.ReadMatrix(a + "o_proj", hidden, q_width, c.output_bias));
    if (c.qk_norm) {
      const Dim head = Field("head_dim", c.head_dim);
      LOWP_ASSIGN(l.q_norm, load.Read(a + "q_norm.weight", {head}, "qwen3 normalizes q and k"));
      LOWP_ASSIGN(l.k_norm, load.Read(a + "k_norm.weight", {head}, "qwen3 normalizes q and k"));
    }
    if (c.num_experts > 0) {
      const std::string m = p + "block_sparse_moe.";
      LOWP_ASSIGN(l.router,
                  load.ReadMatrix(m + "gate", Field("num_local_experts", c.num_experts), hidden,
                                  false));
      for (int64_t e = 0; e < c.num_experts; ++e) {
        const std::string x = absl::StrCat(m, "experts.", e, ".");
        Expert ex;
        LOWP_ASSIGN(ex.gate, load.ReadMatrix(x + "w1", inter, hidden, false));
        LOWP_ASSIGN(ex.up, load.ReadMatrix(x + "w3", inter, hidden, false));
        LOWP_ASSIGN(ex.down, load.ReadMatrix(x + "w2", hidden, inter, false));
        l.experts.push_back(std::move(ex));
      }
    } else {
      const std::string m = p + "mlp.";
      LOWP_ASSIGN(l.gate, load.ReadMatrix(m + "gate_proj", inter, hidden, c.mlp_bias));
      LOWP_ASSIGN(l.up, load.ReadMatrix(m + "up_proj", inter, hidden, c.mlp_bias));
      LOWP_ASSIGN(l.down, load.ReadMatrix(m + "down_proj", hidden, inter, c.mlp_bias));
    }
    w.layers.push_back(std::move(l));
  }
  LOWP_ASSIGN(w.final_norm, load.Read("model.norm.weight", {hidden}));
  if (c.tie_word_embeddings) {
    w.lm_head = w.embed;
    w.lm_head.name = "lm_head.weight";
  } else {
    absl::StatusOr<Values> head =
        load.Read("lm_head.weight", {vocab, hidden}, "tie_word_embeddings is false");
    if (!head.ok()) return head.status();
    w.lm_head = Matrix{"lm_head.weight", c.vocab_size, c.hidden_size, *std::move(head), nullptr};
  }
  if (absl::Status s = set.CheckIntact(); !s.ok()) return s;
  return w;
}

absl::StatusOr<std::vector<std::string>> SnapshotCheckpoint(const std::string& dir) {
  std::error_code ec;
  for (const char* name : {"model.safetensors.index.json", "model.safetensors"}) {
    const std::string path = dir + "/" + name;
    if (std::filesystem::exists(path, ec)) return std::vector<std::string>{path};
  }
  return OptionError("tensors", absl::StrCat(dir, " has neither model.safetensors.index.json nor ",
                                             "model.safetensors; give the checkpoint's files"));
}

absl::StatusOr<ModelWeights> OpenModel(const std::string& model,
                                       const std::vector<std::string>& tensors) {
  std::error_code ec;
  std::vector<std::string> files = tensors;
  absl::StatusOr<ModelConfig> config = FindModel(model);
  if (!config.ok()) return OptionError("model", config.status().message());
  if (files.empty()) {
    if (!std::filesystem::is_directory(model, ec)) {
      return OptionError("tensors",
                         absl::StrCat(model, " names no checkpoint: give its tensor files, or a "
                                             "directory with config.json and model.safetensors"));
    }
    absl::StatusOr<std::vector<std::string>> found = SnapshotCheckpoint(model);
    if (!found.ok()) return found.status();
    files = *found;
  }
  absl::StatusOr<TensorSet> set = TensorSet::OpenAll(files);
  if (!set.ok()) return set.status();
  return LoadWeights(*config, *set);
}

absl::StatusOr<ModelWeights> QuantizeWeights(const ModelWeights& weights,
                                             const std::vector<WeightRule>& rules, int threads,
                                             WeightReport* report) {
  ModelWeights out = weights;
  WeightReport local;
  WeightReport& r = report != nullptr ? *report : local;
  r = WeightReport{};
  r.total.tensor = "(all)";
  std::string scheme_names;
  // The matrices as views: what a recipe reads the model's facts off.
  std::vector<TensorView> views;
  for (const ModelWeights::Entry& entry : out.Matrices()) {
    const Matrix& m = *entry.matrix;
    TensorView view;
    view.name = m.name;
    view.dtype = DType::kF32;
    view.shape = {m.rows, m.cols};
    view.bytes = {reinterpret_cast<const uint8_t*>(m.values->data()),
                  m.values->size() * sizeof(float)};
    views.push_back(std::move(view));
  }
  const RecipeModel recipe_model = RecipeModel::Of(views);
  size_t index = 0;
  for (const ModelWeights::Entry& entry : out.Matrices()) {
    Matrix& m = *entry.matrix;
    const TensorView& view = views[index++];
    const Scheme* rule_scheme = nullptr;
    for (const WeightRule& rule : rules) {
      // A recipe without a pattern is a whole-model mix: it decides for the
      // embeddings and the output too.
      const bool whole = rule.pattern.empty() && AsRecipe(*rule.scheme) != nullptr;
      if (rule.pattern.empty() ? entry.linear || whole : MatchesPattern(rule.pattern, m.name)) {
        rule_scheme = rule.scheme.get();
        break;
      }
    }
    if (rule_scheme == nullptr) continue;
    RecipeChoice choice;
    const Scheme* scheme = &SchemeForTensor(*rule_scheme, view, recipe_model, &choice);
    auto q = std::make_shared<std::vector<float>>();
    q->reserve(m.values->size());
    MeasureOptions options;
    options.threads = threads;
    QuantReport tensor_report;
    absl::Status s = QuantizeTensor(
        view, *scheme, options,
        [&](std::span<const float> piece) {
          q->insert(q->end(), piece.begin(), piece.end());
          return absl::OkStatus();
        },
        &tensor_report);
    if (!s.ok()) return s;
    NameForRecipe(*rule_scheme, choice, tensor_report);
    m.values = std::move(q);
    r.total.Add(tensor_report);
    if (scheme_names.empty()) {
      scheme_names = rule_scheme->name();
    } else if (scheme_names != rule_scheme->name()) {
      scheme_names = "mixed";
    }
    r.tensors.push_back(std::move(tensor_report));
  }
  r.total.scheme = scheme_names == "mixed" ? "" : scheme_names;
  if (out.config.tie_word_embeddings) {
    out.lm_head.values = out.embed.values;
  }
  return out;
}

}  // namespace lowp
