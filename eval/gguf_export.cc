#include "eval/gguf_export.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
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
  enum class Kind { kVector, kMatrix, kExperts, kTable, kRopeFreqs };
  std::string name;
  const ggml::TypeInfo* type = nullptr;
  std::vector<int64_t> ne;  // ggml order
  Kind kind = Kind::kVector;
  // kVector: which of the layer's vectors (by the getter) and whether 1 is
  // added (Gemma's norms, as the converter writes them).
  std::function<std::span<const float>(const LayerWeights&)> vector;
  bool add_one = false;
  // kMatrix: the index in LayerWeights::Matrices; kExperts: 0 gate, 1 up,
  // 2 down; kTable: the table.
  size_t entry = 0;
  Table table = Table::kEmbedding;
  int64_t heads = 0;  // q/k rows permuted for these heads (0: not)
};

// Values in `type` (F32, F16 or BF16: the types of a matrix no rule
// changes), appended to `out`.
absl::Status EncodeFloat(std::span<const float> values, const ggml::TypeInfo& type, Bytes& out) {
  const size_t at = out.size();
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
    // The tensors of the layers, from layer 0's (every layer has the same).
    LayerStorage storage;
    absl::StatusOr<LayerWeights> w0 = model_.ReadLayer(0, storage, options_.threads);
    if (!w0.ok()) return w0.status();
    if (config_.rope_scaling.type == "llama3") {
      const std::vector<float> f = Llama3RopeFactors(config_);
      global_.push_back({.name = "rope_freqs.weight", .type = &F32(),
                         .ne = {static_cast<int64_t>(f.size())}, .kind = Item::Kind::kRopeFreqs});
    }
    absl::Status s = AddTable(Table::kEmbedding, "token_embd.weight");
    layers_.resize(static_cast<size_t>(config_.num_layers));
    for (int64_t layer = 0; s.ok() && layer < config_.num_layers; ++layer) {
      s = LayerPlan(*w0, layer);
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
        if (it.kind == Item::Kind::kVector || it.kind == Item::Kind::kRopeFreqs) return;
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
          std::vector<float> v(it.vector(*reference).begin(), it.vector(*reference).end());
          if (it.add_one) {
            for (float& x : v) x += 1.0f;
          }
          s = EncodeFloat(v, F32(), bytes);
          if (s.ok() && it.heads > 0) PermuteRows(bytes, static_cast<int64_t>(v.size()), it.heads);
        } else if (it.kind == Item::Kind::kMatrix) {
          s = MatrixBytes(*entries[it.entry].matrix, it.entry, *it.type, storage, bytes);
          if (s.ok() && it.heads > 0) PermuteRows(bytes, entries[it.entry].matrix->rows, it.heads);
        } else {  // kExperts: each expert's matrix, stacked
          const size_t first = 5;  // q, k, v, o, router
          for (int64_t e = 0; s.ok() && e < config_.num_experts; ++e) {
            const size_t j = first + static_cast<size_t>(e) * 3 + it.entry;
            s = MatrixBytes(*entries[j].matrix, j, *it.type, storage, bytes);
          }
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

  // The tensors of layer `layer`, shaped as layer 0's `w`.
  absl::Status LayerPlan(LayerWeights& w, int64_t layer) {
    std::vector<Item>& layer_ = layers_[static_cast<size_t>(layer)];
    using V = std::span<const float>;
    auto vec = [&](const std::string& name, V probe, std::function<V(const LayerWeights&)> get,
                   bool norm) {
      if (probe.empty()) return;
      layer_.push_back({.name = name, .type = &F32(), .ne = {static_cast<int64_t>(probe.size())},
                        .kind = Item::Kind::kVector, .vector = std::move(get),
                        .add_one = norm && (arch_ == "gemma" || arch_ == "gemma2")});
    };
    std::vector<LayerWeights::Entry> entries = w.Matrices(config_);
    const bool permute = LlamaCppPermutesQk(config_);
    auto matrix = [&](const std::string& name, size_t j, int64_t heads) -> absl::Status {
      const Matrix& m = *entries[j].matrix;
      absl::StatusOr<const ggml::TypeInfo*> t = TypeOf(NameIn(m, layer), m.cols);
      if (!t.ok()) return t.status();
      layer_.push_back({.name = name, .type = *t, .ne = {m.cols, m.rows},
                        .kind = Item::Kind::kMatrix, .entry = j, .heads = permute ? heads : 0});
      return absl::OkStatus();
    };
    vec("attn_norm.weight", w.input_norm, [](const LayerWeights& l) { return l.input_norm; }, true);
    const char* attn[] = {"attn_q", "attn_k", "attn_v", "attn_output"};
    const int64_t heads[] = {config_.num_heads, config_.num_kv_heads, 0, 0};
    for (size_t j = 0; j < 4; ++j) {
      if (absl::Status s = matrix(absl::StrCat(attn[j], ".weight"), j, heads[j]); !s.ok()) return s;
      if (!entries[j].matrix->bias.empty()) {
        vec(absl::StrCat(attn[j], ".bias"), entries[j].matrix->bias,
            [j](const LayerWeights& l) {
              const Matrix* ms[] = {&l.q, &l.k, &l.v, &l.o};
              return ms[j]->bias;
            },
            false);
        // q's and k's biases take their rows' rope order (the converter's
        // permute of "q_proj.bias" / "k_proj.bias").
        if (permute) layer_.back().heads = heads[j];
      }
    }
    vec("attn_q_norm.weight", w.q_norm, [](const LayerWeights& l) { return l.q_norm; }, true);
    vec("attn_k_norm.weight", w.k_norm, [](const LayerWeights& l) { return l.k_norm; }, true);
    if (arch_ == "gemma2") {
      vec("post_attention_norm.weight", w.post_attention_norm,
          [](const LayerWeights& l) { return l.post_attention_norm; }, true);
      vec("ffn_norm.weight", w.pre_feedforward_norm,
          [](const LayerWeights& l) { return l.pre_feedforward_norm; }, true);
    } else {
      vec("ffn_norm.weight", w.post_attention_norm,
          [](const LayerWeights& l) { return l.post_attention_norm; }, true);
    }
    if (config_.num_experts > 0) {
      if (absl::Status s = matrix("ffn_gate_inp.weight", 4, 0); !s.ok()) return s;
      const char* kinds[] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
      for (size_t k = 0; k < 3; ++k) {
        const ggml::TypeInfo* type = nullptr;
        const Matrix* first = nullptr;
        for (int64_t e = 0; e < config_.num_experts; ++e) {
          const Matrix& m = *entries[5 + static_cast<size_t>(e) * 3 + k].matrix;
          absl::StatusOr<const ggml::TypeInfo*> t = TypeOf(NameIn(m, layer), m.cols);
          if (!t.ok()) return t.status();
          if (type != nullptr && *t != type) {
            return absl::InvalidArgumentError(absl::StrCat(
                "weights: ", NameIn(*first, layer), " is ", type->name, " but ", NameIn(m, layer),
                " is ", (*t)->name,
                ": llama.cpp stores a layer's experts as one tensor of one type"));
          }
          type = *t;
          first = &m;
        }
        layer_.push_back({.name = kinds[k], .type = type,
                          .ne = {first->cols, first->rows, config_.num_experts},
                          .kind = Item::Kind::kExperts, .entry = k});
      }
    } else {
      const char* mlp[] = {"ffn_gate", "ffn_up", "ffn_down"};
      for (size_t j = 4; j < 7; ++j) {
        if (absl::Status s = matrix(absl::StrCat(mlp[j - 4], ".weight"), j, 0); !s.ok()) return s;
        if (!entries[j].matrix->bias.empty()) {
          vec(absl::StrCat(mlp[j - 4], ".bias"), entries[j].matrix->bias,
              [j](const LayerWeights& l) {
                const Matrix* ms[] = {&l.gate, &l.up, &l.down};
                return ms[j - 4]->bias;
              },
              false);
        }
      }
    }
    if (arch_ == "gemma2") {
      vec("post_ffw_norm.weight", w.post_feedforward_norm,
          [](const LayerWeights& l) { return l.post_feedforward_norm; }, true);
    }
    return absl::OkStatus();
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
    if (it.kind == Item::Kind::kRopeFreqs) {
      absl::Status s = EncodeFloat(Llama3RopeFactors(config_), F32(), bytes);
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
