#include "eval/gguf_export.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "codecs/ggml.h"
#include "formats/format.h"
#include "io/gguf_names.h"
#include "io/gguf_writer.h"
#include "kernels/convert.h"
#include "model/gguf_layout.h"

namespace lowp {
namespace {

using Bytes = std::vector<uint8_t>;

// One tensor of the file and where its bytes come from.
struct Item {
  enum class Kind { kVector, kMatrix, kHeadRows, kTable, kConstant };
  std::string name{};
  const ggml::TypeInfo* type = nullptr;
  std::vector<int64_t> ne{};  // ggml order
  Kind kind = Kind::kVector;
  // kVector: the values, from the layer (its norms, biases, sinks), and
  // whether 1 is added (Gemma's norms, as the converter writes them).
  std::function<std::vector<float>(const LayerWeights&)> vector{};
  bool add_one = false;
  // kConstant: the values, from the config (Llama 3's rope_freqs, Phi-3's
  // rope factors).
  std::vector<float> values{};
  // kMatrix: the matrices (indices in LayerWeights::Matrices) whose rows
  // follow one another: one, Phi-3's q, k, v or gate, up, a layer's
  // experts stacked. kHeadRows: the one matrix (DeepSeek's kv_b), of which
  // each head's `per` rows give rows [first, first + count), transposed
  // when `transpose` (attn_k_b) and otherwise as stored (attn_v_b); the
  // matrix's bytes are made in `source`.
  std::vector<size_t> entries{};
  int64_t per = 0, first = 0, count = 0;
  bool transpose = false;
  const ggml::TypeInfo* source = nullptr;
  Table table = Table::kEmbedding;  // kTable
  int64_t heads = 0;  // q/k rows permuted for these heads (0: not)
};

// Values in `type` (F32, F16 or BF16: the types of a matrix no rule
// changes; or MXFP4, gpt-oss's experts as stored, whose values the type
// holds exactly: checked), appended to `out`.
absl::Status EncodeFloat(std::span<const float> values, const ggml::TypeInfo& type, Bytes& out) {
  const size_t at = out.size();
  if (type.type == ggml::Type::kMXFP4) {
    out.resize(at + static_cast<size_t>(ggml::RowBytes(type, static_cast<int64_t>(values.size()))));
    std::span<uint8_t> bytes = std::span<uint8_t>(out).subspan(at);
    if (absl::Status s = ggml::Encode(type.type, values, bytes); !s.ok()) return s;
    std::vector<float> back(values.size());
    if (absl::Status s = ggml::Decode(type.type, bytes, back); !s.ok()) return s;
    if (!std::equal(back.begin(), back.end(), values.begin())) {
      return absl::InternalError("MXFP4 values as stored did not encode to themselves");
    }
    return absl::OkStatus();
  }
  if (type.type == ggml::Type::kF32) {
    out.resize(at + values.size_bytes());
    if (!values.empty()) std::memcpy(out.data() + at, values.data(), values.size_bytes());
    return absl::OkStatus();
  }
  const Format half = *FindFormat(type.type == ggml::Type::kF16 ? "fp16" : "bf16");
  out.resize(at + values.size() * 2);
  return EncodeArray(half, values, std::span<uint8_t>(out).subspan(at));
}

// The rows of `bytes` (rows of `row_bytes`) in llama.cpp's rope order.
void PermuteRows(Bytes& bytes, int64_t rows, int64_t heads) {
  const std::vector<int64_t> order = LlamaRopeRowOrder(rows, heads);
  if (order.empty()) return;
  const size_t row_bytes = bytes.size() / static_cast<size_t>(rows);
  Bytes out(bytes.size());
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(out.data() + static_cast<size_t>(r) * row_bytes,
                bytes.data() + static_cast<size_t>(order[static_cast<size_t>(r)]) * row_bytes,
                row_bytes);
  }
  bytes = std::move(out);
}

// Llama 3's rope_freqs.weight, as convert_hf_to_gguf.py's
// LlamaModel.generate_extra_tensors computes it (freqs in float32, the rest
// in double).
std::vector<float> Llama3RopeFactors(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  const double low_wavelen = static_cast<double>(s.original_max_position_embeddings) / s.low_freq_factor;
  const double high_wavelen = static_cast<double>(s.original_max_position_embeddings) / s.high_freq_factor;
  std::vector<float> factors;
  for (int64_t i = 0; i < c.head_dim; i += 2) {
    const float freq = 1.0f / std::pow(static_cast<float>(c.rope_theta),
                                       static_cast<float>(i) / static_cast<float>(c.head_dim));
    const double wavelen = 2 * M_PI / static_cast<double>(freq);
    double f;
    if (wavelen < high_wavelen) {
      f = 1;
    } else if (wavelen > low_wavelen) {
      f = s.factor;
    } else {
      const double smooth =
          (static_cast<double>(s.original_max_position_embeddings) / wavelen - s.low_freq_factor) /
          (s.high_freq_factor - s.low_freq_factor);
      f = 1 / ((1 - smooth) / s.factor + smooth);
    }
    factors.push_back(static_cast<float>(f));
  }
  return factors;
}

class Exporter {
 public:
  Exporter(const Checkpoint& model, WeightVariant& variant, std::span<const WeightRule> rules,
           bool with_importance, const GgufExportOptions& options)
      : model_(model), config_(model.config()), variant_(variant), options_(options) {
    for (const RuleMatch& m : MatricesByRule(model, rules, with_importance)) {
      schemes_[m.matrix.name] = m.scheme;
    }
  }

  absl::Status Plan(const LlamaCppVocab& vocab) {
    absl::StatusOr<std::string> arch = LlamaCppArchitecture(config_);
    if (!arch.ok()) return arch.status();
    arch_ = *arch;
    // The tensors of the layers, from the first layer of each kind's.
    LayerStorage storage[2];
    std::optional<LayerWeights> first[2];  // dense, mixture of experts
    for (int64_t layer = 0; layer < config_.num_layers; ++layer) {
      const int kind = MoeLayer(config_, layer) ? 1 : 0;
      std::optional<LayerWeights>& w = first[kind];
      if (w.has_value()) continue;
      absl::StatusOr<LayerWeights> read = model_.ReadLayer(layer, storage[kind], options_.threads);
      if (!read.ok()) return read.status();
      w = *std::move(read);
    }
    auto constant = [&](const std::string& name, std::vector<float> values) {
      global_.push_back({.name = name, .type = &F32(),
                         .ne = {static_cast<int64_t>(values.size())},
                         .kind = Item::Kind::kConstant, .values = std::move(values)});
    };
    const RopeScaling& rope = config_.rope_scaling;
    if (rope.type == "llama3") constant("rope_freqs.weight", Llama3RopeFactors(config_));
    if (arch_ == "phi3" && !rope.long_factor.empty()) {
      constant("rope_factors_long.weight", {rope.long_factor.begin(), rope.long_factor.end()});
      constant("rope_factors_short.weight", {rope.short_factor.begin(), rope.short_factor.end()});
    }
    absl::Status s = AddTable(Table::kEmbedding, "token_embd.weight");
    layers_.resize(static_cast<size_t>(config_.num_layers));
    for (int64_t layer = 0; s.ok() && layer < config_.num_layers; ++layer) {
      s = LayerPlan(*first[MoeLayer(config_, layer) ? 1 : 0], layer);
    }
    if (!s.ok()) return s;
    if (!config_.tie_word_embeddings) s = AddTable(Table::kLmHead, "output.weight");
    if (!s.ok()) return s;
    if (static_cast<int64_t>(vocab.tokens.size()) != config_.vocab_size) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the tokenizer has ", vocab.tokens.size(), " tokens, but ", config_.name, " has ",
          "vocab_size ", config_.vocab_size, " (llama.cpp takes the embedding's rows from the "
          "tokenizer's count)"));
    }
    uint32_t file_type = 0;
    if (options_.file_type.has_value()) {
      file_type = *options_.file_type;
    } else {
      // The type of the most elements among the matrices.
      std::map<ggml::Type, int64_t> elements;
      auto count = [&](const Item& it) {
        if (it.kind != Item::Kind::kMatrix && it.kind != Item::Kind::kTable) return;
        int64_t n = 1;
        for (int64_t d : it.ne) n *= d;
        elements[it.type->type] += n;
      };
      for (const Item& it : global_) count(it);
      for (const std::vector<Item>& layer : layers_) {
        for (const Item& it : layer) count(it);
      }
      const auto most = std::max_element(
          elements.begin(), elements.end(),
          [](const auto& a, const auto& b) { return a.second < b.second; });
      if (most != elements.end()) file_type = LlamaCppTypeFileType(most->first).value_or(0);
    }
    if (absl::Status k = AddLlamaCppModelKeys(config_, options_.name, file_type, writer_); !k.ok()) {
      return k;
    }
    vocab.AddTo(writer_);
    // Tensor infos in the order their bytes are written: the whole-model
    // ones before the layers (rope_freqs, token_embd), the layers, then
    // output_norm and output.
    for (const Item& it : global_) {
      if (it.table != Table::kLmHead || it.kind != Item::Kind::kTable) Info(it, "");
    }
    for (int64_t layer = 0; layer < config_.num_layers; ++layer) {
      for (const Item& it : layers_[static_cast<size_t>(layer)]) {
        Info(it, absl::StrCat("blk.", layer, "."));
      }
    }
    writer_.AddTensor("output_norm.weight", F32(), {config_.hidden_size});
    for (const Item& it : global_) {
      if (it.table == Table::kLmHead && it.kind == Item::Kind::kTable) Info(it, "");
    }
    return absl::OkStatus();
  }

  absl::Status Write(OutputFile& out) {
    if (absl::Status s = writer_.WriteHeader(out); !s.ok()) return s;
    const ByteSink sink = [&](std::span<const uint8_t> b) { return writer_.WriteTensorBytes(out, b); };
    const size_t steps = static_cast<size_t>(config_.num_layers) + 2;
    auto step = [&](const std::string& what) {
      if (options_.progress) options_.progress(steps, what);
    };
    step("token_embd");
    for (const Item& it : global_) {
      if (it.table == Table::kLmHead && it.kind == Item::Kind::kTable) continue;
      if (absl::Status s = WriteGlobal(it, sink); !s.ok()) return s;
    }
    LayerStorage reference_storage, storage;
    storage.keep_stored = true;
    storage.values_unused = true;
    Bytes bytes;
    for (int64_t layer = 0; layer < config_.num_layers; ++layer) {
      step(absl::StrCat("layer ", layer));
      absl::StatusOr<LayerWeights> reference =
          model_.ReadLayer(layer, reference_storage, options_.threads);
      if (!reference.ok()) return reference.status();
      absl::StatusOr<LayerWeights> w = variant_.Layer({.layer = layer, .reference = *reference,
                                                       .storage = storage,
                                                       .threads = options_.threads,
                                                       .pass = {.first = true}});
      if (!w.ok()) return w.status();
      std::vector<LayerWeights::Entry> entries = w->Matrices(config_);
      for (const Item& it : layers_[static_cast<size_t>(layer)]) {
        bytes.clear();
        absl::Status s;
        if (it.kind == Item::Kind::kVector) {
          std::vector<float> v = it.vector(*reference);
          if (it.add_one) {
            for (float& x : v) x += 1.0f;
          }
          s = EncodeFloat(v, F32(), bytes);
          if (s.ok() && it.heads > 0) PermuteRows(bytes, static_cast<int64_t>(v.size()), it.heads);
        } else if (it.kind == Item::Kind::kMatrix) {
          for (size_t j : it.entries) {
            if (s.ok()) s = MatrixBytes(*entries[j].matrix, j, *it.type, storage, bytes);
          }
          if (s.ok() && it.heads > 0) {
            PermuteRows(bytes, entries[it.entries[0]].matrix->rows, it.heads);
          }
        } else {  // kHeadRows
          s = HeadRowBytes(it, *entries[it.entries[0]].matrix, storage, bytes);
        }
        if (s.ok()) s = sink(bytes);
        if (!s.ok()) return s;
      }
    }
    step("output");
    std::vector<float> norm;
    if (absl::Status s = model_.ReadFinalNorm(norm); !s.ok()) return s;
    if (arch_ == "gemma" || arch_ == "gemma2") {
      for (float& x : norm) x += 1.0f;
    }
    bytes.clear();
    if (absl::Status s = EncodeFloat(norm, F32(), bytes); !s.ok()) return s;
    if (absl::Status s = sink(bytes); !s.ok()) return s;
    for (const Item& it : global_) {
      if (it.table != Table::kLmHead || it.kind != Item::Kind::kTable) continue;
      if (absl::Status s = WriteGlobal(it, sink); !s.ok()) return s;
    }
    return writer_.Finish();
  }

 private:
  static const ggml::TypeInfo& F32() { return ggml::Info(ggml::Type::kF32); }

  void Info(const Item& it, const std::string& prefix) {
    writer_.AddTensor(prefix + it.name, *it.type, it.ne);
  }

  // The type a matrix is stored as: its scheme's llama.cpp type, or, left
  // as it is, its checkpoint's F16 or BF16 (F32 for any other).
  absl::StatusOr<const ggml::TypeInfo*> TypeOf(const std::string& name, int64_t cols) const {
    auto it = schemes_.find(name);
    if (it != schemes_.end()) {
      const ggml::TypeInfo* t = it->second->GgmlLayout(cols);
      if (t == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            "weights: ", it->second->name(), " (for ", name, ") has no llama.cpp type; a GGUF "
            "file holds llama.cpp's types (q4_0 ... q8_0, the k-quants, the i-quants, "
            "ggml-mxfp4, ggml-nvfp4, fp16, bf16, fp32) and their recipes"));
      }
      if (cols % t->block != 0) {
        return absl::InvalidArgumentError(absl::StrCat("weights: ", name, " has rows of ", cols,
                                                       ", not whole blocks of ", t->name));
      }
      return t;
    }
    // A router no rule takes is F32, as the converter forces it (llama.cpp
    // would otherwise round the router's input to the stored type's).
    if (IsRouter(name)) return &F32();
    const Checkpoint::Found* f = model_.Find(name);
    const DType d = f != nullptr ? f->view->dtype : DType::kF32;
    // gpt-oss's experts as OpenAI ships them stay MXFP4, as the converter
    // repacks them.
    if (d == DType::kF4 && f->view->scales != nullptr && cols % 32 == 0) {
      return &ggml::Info(ggml::Type::kMXFP4);
    }
    return &ggml::Info(d == DType::kF16    ? ggml::Type::kF16
                       : d == DType::kBF16 ? ggml::Type::kBF16
                                           : ggml::Type::kF32);
  }

  absl::Status AddTable(Table table, const std::string& gguf_name) {
    absl::StatusOr<const ggml::TypeInfo*> t = TypeOf(model_.TableName(table), config_.hidden_size);
    if (!t.ok()) return t.status();
    global_.push_back({.name = gguf_name, .type = *t,
                       .ne = {config_.hidden_size, config_.vocab_size},
                       .kind = Item::Kind::kTable, .table = table});
    return absl::OkStatus();
  }

  // Layer `layer`'s name of layer 0's matrix `m`.
  static std::string NameIn(const Matrix& m, int64_t layer) {
    absl::string_view name = m.name;
    if (!absl::ConsumePrefix(&name, "model.layers.0.")) return m.name;
    return absl::StrCat("model.layers.", layer, ".", name);
  }

  // The tensors of layer `layer`, shaped as `w`, the first layer of its
  // kind, in the converter's names for the architecture.
  absl::Status LayerPlan(LayerWeights& w, int64_t layer) {
    std::vector<Item>& out = layers_[static_cast<size_t>(layer)];
    using Get = std::function<std::vector<float>(const LayerWeights&)>;
    const bool gemma = arch_ == "gemma" || arch_ == "gemma2";
    auto vec = [&](const std::string& name, size_t size, Get get, bool norm = false) {
      if (size == 0) return;
      out.push_back({.name = name, .type = &F32(), .ne = {static_cast<int64_t>(size)},
                     .kind = Item::Kind::kVector, .vector = std::move(get),
                     .add_one = norm && gemma});
    };
    auto copy = [](std::span<const float> v) { return std::vector<float>(v.begin(), v.end()); };
    auto norm = [&](const std::string& name, std::span<const float> LayerWeights::*field) {
      vec(name, (w.*field).size(), [field, copy](const LayerWeights& l) { return copy(l.*field); },
          true);
    };
    std::vector<LayerWeights::Entry> entries = w.Matrices(config_);
    auto index = [&](const Matrix& m) {
      for (size_t j = 0; j < entries.size(); ++j) {
        if (entries[j].matrix == &m) return j;
      }
      return entries.size();  // not one of the layer's (never: callers pass its own)
    };
    // One tensor of the rows of `parts` (one matrix, or several stored one
    // after another), of one type.
    auto matrix = [&](const std::string& name, std::vector<const Matrix*> parts, int64_t heads,
                      int64_t stack = 1) -> absl::Status {
      Item it{.name = name, .kind = Item::Kind::kMatrix,
              .heads = LlamaCppPermutesQk(config_) ? heads : 0};
      int64_t rows = 0;
      for (const Matrix* m : parts) {
        absl::StatusOr<const ggml::TypeInfo*> t = TypeOf(NameIn(*m, layer), m->cols);
        if (!t.ok()) return t.status();
        if (it.type != nullptr && *t != it.type) {
          return absl::InvalidArgumentError(absl::StrCat(
              "weights: ", NameIn(*parts[0], layer), " is ", it.type->name, " but ",
              NameIn(*m, layer), " is ", (*t)->name, ": llama.cpp stores them as one tensor ",
              name, " of one type"));
        }
        it.type = *t;
        it.entries.push_back(index(*m));
        rows += m->rows;
      }
      it.ne = stack > 1 ? std::vector<int64_t>{parts[0]->cols, parts[0]->rows, stack}
                        : std::vector<int64_t>{parts[0]->cols, rows};
      out.push_back(std::move(it));
      return absl::OkStatus();
    };
    auto bias = [&](const std::string& name, const Matrix LayerWeights::*field) {
      vec(name, (w.*field).bias.size(),
          [field, copy](const LayerWeights& l) { return copy((l.*field).bias); });
    };
    absl::Status s;
    auto then = [&s](absl::Status next) {
      if (s.ok()) s = std::move(next);
    };

    norm("attn_norm.weight", &LayerWeights::input_norm);
    if (w.kv_a.rows > 0) {  // DeepSeek's latent attention (DeepseekV2Model)
      if (w.q_a.rows > 0) {
        then(matrix("attn_q_a.weight", {&w.q_a}, 0));
        norm("attn_q_a_norm.weight", &LayerWeights::q_a_norm);
        then(matrix("attn_q_b.weight", {&w.q_b}, 0));
      } else {
        then(matrix("attn_q.weight", {&w.q}, 0));
      }
      then(matrix("attn_kv_a_mqa.weight", {&w.kv_a}, 0));
      norm("attn_kv_a_norm.weight", &LayerWeights::kv_a_norm);
      then(HeadRowsPlan(w.kv_b, index(w.kv_b), layer, out));
      then(matrix("attn_output.weight", {&w.o}, 0));
    } else if (config_.fused_projections) {  // Phi-3: q, k, v as one tensor
      then(matrix("attn_qkv.weight", {&w.q, &w.k, &w.v}, 0));
      then(matrix("attn_output.weight", {&w.o}, 0));
    } else {
      const char* attn[] = {"attn_q", "attn_k", "attn_v", "attn_output"};
      const Matrix LayerWeights::*fields[] = {&LayerWeights::q, &LayerWeights::k, &LayerWeights::v,
                                              &LayerWeights::o};
      const int64_t heads[] = {config_.num_heads, config_.num_kv_heads, 0, 0};
      for (size_t j = 0; j < 4; ++j) {
        then(matrix(absl::StrCat(attn[j], ".weight"), {&(w.*fields[j])}, heads[j]));
        bias(absl::StrCat(attn[j], ".bias"), fields[j]);
        // q's and k's biases take their rows' rope order (the converter's
        // permute of "q_proj.bias" / "k_proj.bias").
        if (!(w.*fields[j]).bias.empty() && LlamaCppPermutesQk(config_)) {
          out.back().heads = heads[j];
        }
      }
    }
    norm("attn_q_norm.weight", &LayerWeights::q_norm);
    norm("attn_k_norm.weight", &LayerWeights::k_norm);
    vec("attn_sinks.weight", w.sinks.size(),
        [copy](const LayerWeights& l) { return copy(l.sinks); });
    if (arch_ == "gemma2") {
      norm("post_attention_norm.weight", &LayerWeights::post_attention_norm);
      norm("ffn_norm.weight", &LayerWeights::pre_feedforward_norm);
    } else {  // gpt-oss names the norm before its experts post_attention_norm
      norm(arch_ == "gpt-oss" ? "post_attention_norm.weight" : "ffn_norm.weight",
           &LayerWeights::post_attention_norm);
    }
    if (!w.experts.empty()) {
      then(matrix("ffn_gate_inp.weight", {&w.router}, 0));
      bias("ffn_gate_inp.bias", &LayerWeights::router);
      vec("exp_probs_b.bias", w.score_bias.size(),
          [copy](const LayerWeights& l) { return copy(l.score_bias); });
      const char* kinds[] = {"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"};
      const Matrix Expert::*fields[] = {&Expert::gate, &Expert::up, &Expert::down};
      for (size_t k = 0; k < 3; ++k) {
        std::vector<const Matrix*> stack;
        for (const Expert& e : w.experts) stack.push_back(&(e.*fields[k]));
        then(matrix(absl::StrCat(kinds[k], ".weight"), stack, 0,
                    static_cast<int64_t>(stack.size())));
        const Matrix& first = *stack[0];
        if (first.bias.empty()) continue;
        // gpt-oss's expert biases, one row per expert.
        out.push_back({.name = absl::StrCat(kinds[k], ".bias"), .type = &F32(),
                       .ne = {first.rows, static_cast<int64_t>(stack.size())},
                       .kind = Item::Kind::kVector,
                       .vector = [field = fields[k]](const LayerWeights& l) {
                         std::vector<float> v;
                         for (const Expert& e : l.experts) {
                           v.insert(v.end(), (e.*field).bias.begin(), (e.*field).bias.end());
                         }
                         return v;
                       }});
      }
      if (w.shared.gate.rows > 0) {
        then(matrix("ffn_gate_shexp.weight", {&w.shared.gate}, 0));
        then(matrix("ffn_up_shexp.weight", {&w.shared.up}, 0));
        then(matrix("ffn_down_shexp.weight", {&w.shared.down}, 0));
      }
      if (w.shared_gate.rows > 0) {  // Qwen2-MoE's sigmoid gate: a vector, F32
        const std::string name = NameIn(w.shared_gate, layer);
        if (schemes_.contains(name)) {
          then(absl::InvalidArgumentError(absl::StrCat(
              "weights: ", name, " has a rule, but llama.cpp holds ffn_gate_inp_shexp in F32")));
        }
        vec("ffn_gate_inp_shexp.weight", w.shared_gate.values.size(),
            [copy](const LayerWeights& l) { return copy(l.shared_gate.values); });
      }
    } else if (config_.fused_projections) {  // Phi-3: gate, then up, as ffn_up
      then(matrix("ffn_up.weight", {&w.gate, &w.up}, 0));
      then(matrix("ffn_down.weight", {&w.down}, 0));
    } else {
      const char* mlp[] = {"ffn_gate", "ffn_up", "ffn_down"};
      const Matrix LayerWeights::*fields[] = {&LayerWeights::gate, &LayerWeights::up,
                                              &LayerWeights::down};
      for (size_t j = 0; j < 3; ++j) {
        then(matrix(absl::StrCat(mlp[j], ".weight"), {&(w.*fields[j])}, 0));
        bias(absl::StrCat(mlp[j], ".bias"), fields[j]);
      }
    }
    if (arch_ == "gemma2") norm("post_ffw_norm.weight", &LayerWeights::post_feedforward_norm);
    return s;
  }

  // DeepSeek's kv_b as the converter splits it for MLA's absorption: each
  // head's nope rows transposed (attn_k_b, [heads][kv_lora_rank][nope]) and
  // its value rows (attn_v_b, [heads][v][kv_lora_rank]). attn_v_b holds
  // kv_b's own bytes; attn_k_b holds its values in kv_b's type when that is
  // a float (exact) and in F32 otherwise (the variant's values exactly: a
  // quantized type's blocks run along kv_b's rows, not along the
  // transposed ones).
  absl::Status HeadRowsPlan(const Matrix& kv_b, size_t entry, int64_t layer,
                            std::vector<Item>& out) {
    absl::StatusOr<const ggml::TypeInfo*> t = TypeOf(NameIn(kv_b, layer), kv_b.cols);
    if (!t.ok()) return t.status();
    const int64_t heads = config_.num_heads, nope = config_.qk_nope_head_dim;
    const int64_t v = config_.v_head_dim, rank = config_.kv_lora_rank;
    const ggml::Type k_type = (*t)->type == ggml::Type::kF16 || (*t)->type == ggml::Type::kBF16
                                  ? (*t)->type
                                  : ggml::Type::kF32;
    out.push_back({.name = "attn_k_b.weight", .type = &ggml::Info(k_type),
                   .ne = {nope, rank, heads}, .kind = Item::Kind::kHeadRows, .entries = {entry},
                   .per = nope + v, .first = 0, .count = nope, .transpose = true, .source = *t});
    out.push_back({.name = "attn_v_b.weight", .type = *t, .ne = {rank, v, heads},
                   .kind = Item::Kind::kHeadRows, .entries = {entry}, .per = nope + v,
                   .first = nope, .count = v, .source = *t});
    return absl::OkStatus();
  }

  // Item `it`'s bytes (kHeadRows) from kv_b `m`, appended to `out`.
  absl::Status HeadRowBytes(const Item& it, const Matrix& m, const LayerStorage& storage,
                            Bytes& out) const {
    const size_t entry = it.entries[0];
    Bytes whole;
    const ggml::TypeInfo& stored = *it.source;
    if (absl::Status s = MatrixBytes(m, entry, stored, storage, whole); !s.ok()) return s;
    const size_t row_bytes = static_cast<size_t>(ggml::RowBytes(stored, m.cols));
    const int64_t heads = m.rows / it.per;
    if (!it.transpose) {
      for (int64_t h = 0; h < heads; ++h) {
        const size_t at = static_cast<size_t>(h * it.per + it.first) * row_bytes;
        out.insert(out.end(), whole.begin() + static_cast<ptrdiff_t>(at),
                   whole.begin() + static_cast<ptrdiff_t>(at + it.count * row_bytes));
      }
      return absl::OkStatus();
    }
    // The values the bytes hold, then each head's rows transposed.
    std::vector<float> values(static_cast<size_t>(m.rows * m.cols));
    for (int64_t r = 0; r < m.rows; ++r) {
      absl::Status s = DecodeRow(stored, std::span<const uint8_t>(whole).subspan(
                                             static_cast<size_t>(r) * row_bytes, row_bytes),
                                 std::span<float>(values).subspan(static_cast<size_t>(r * m.cols),
                                                                  static_cast<size_t>(m.cols)));
      if (!s.ok()) return s;
    }
    std::vector<float> t(static_cast<size_t>(heads * it.count * m.cols));
    size_t at = 0;
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t c = 0; c < m.cols; ++c) {
        for (int64_t r = 0; r < it.count; ++r) {
          t[at++] = values[static_cast<size_t>((h * it.per + it.first + r) * m.cols + c)];
        }
      }
    }
    return EncodeFloat(t, *it.type, out);
  }

  // One row of `type` decoded (F32, F16 and BF16 included).
  static absl::Status DecodeRow(const ggml::TypeInfo& type, std::span<const uint8_t> in,
                                std::span<float> out) {
    if (type.type == ggml::Type::kF32) {
      std::memcpy(out.data(), in.data(), out.size_bytes());
      return absl::OkStatus();
    }
    if (type.type == ggml::Type::kF16 || type.type == ggml::Type::kBF16) {
      const Format half = *FindFormat(type.type == ggml::Type::kF16 ? "fp16" : "bf16");
      return DecodeArray(half, in, out);
    }
    return ggml::Decode(type.type, in, out);
  }

  // A matrix's bytes appended to `out`: the variant's own, or its values
  // (left as they were) encoded.
  absl::Status MatrixBytes(const Matrix& m, size_t entry, const ggml::TypeInfo& type,
                           const LayerStorage& storage, Bytes& out) const {
    const uint64_t want = static_cast<uint64_t>(m.rows) *
                          static_cast<uint64_t>(ggml::RowBytes(type, m.cols));
    if (entry < storage.stored.size() && !storage.stored[entry].bytes.empty()) {
      const Bytes& b = storage.stored[entry].bytes;
      if (b.size() != want) {
        return absl::InternalError(absl::StrCat(m.name, ": ", b.size(), " bytes made for ",
                                                type.name, "'s ", want));
      }
      out.insert(out.end(), b.begin(), b.end());
      return absl::OkStatus();
    }
    if (schemes_.contains(m.name)) {
      return absl::InternalError(absl::StrCat(m.name, ": the variant kept no bytes"));
    }
    return EncodeFloat(m.values, type, out);
  }

  absl::Status WriteGlobal(const Item& it, const ByteSink& sink) {
    Bytes bytes;
    if (it.kind == Item::Kind::kConstant) {
      absl::Status s = EncodeFloat(it.values, F32(), bytes);
      return s.ok() ? sink(bytes) : s;
    }
    if (variant_.Changes(it.table)) return variant_.TableBytes(it.table, options_.threads, sink);
    constexpr int64_t kRows = 1024;
    std::vector<float> rows;
    for (int64_t first = 0; first < config_.vocab_size; first += kRows) {
      const int64_t count = std::min(kRows, config_.vocab_size - first);
      rows.resize(static_cast<size_t>(count * config_.hidden_size));
      absl::Status s = model_.ReadRows(it.table, first, count, rows, options_.threads);
      bytes.clear();
      if (s.ok()) s = EncodeFloat(rows, *it.type, bytes);
      if (s.ok()) s = sink(bytes);
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }

  const Checkpoint& model_;
  const ModelConfig& config_;
  WeightVariant& variant_;
  const GgufExportOptions& options_;
  std::map<std::string, const Scheme*> schemes_;
  std::string arch_;
  std::vector<Item> global_;
  std::vector<std::vector<Item>> layers_;  // per layer
  GgufWriter writer_;
};

}  // namespace

absl::Status WriteGgufModel(const Checkpoint& model, WeightVariant& variant,
                            std::span<const WeightRule> rules, bool with_importance,
                            LlamaCppVocab vocab, const GgufExportOptions& options,
                            OutputFile& out) {
  vocab.PadTo(model.config().vocab_size);
  Exporter exporter(model, variant, rules, with_importance, options);
  if (absl::Status s = exporter.Plan(vocab); !s.ok()) return s;
  return exporter.Write(out);
}

}  // namespace lowp
