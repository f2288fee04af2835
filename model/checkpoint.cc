#include "model/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/strip.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "formats/option_error.h"
#include "io/gguf_names.h"
#include "kernels/thread_pool.h"
#include "model/expert_pool.h"
#include "model/gguf_index.h"

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

std::string ShapeText(std::span<const int64_t> shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

enum class Kind { kNorm, kMatrix, kBias };

// One tensor of a layer as the config implies it.
struct Want {
  std::string name;
  std::vector<Dim> dims;
  Kind kind;
  absl::string_view why = "";  // why the config needs it, for messages
};

// Calls get(want) for every tensor of decoder layer `i` in checkpoint order
// and assembles the layer's views from what it returns
// (StatusOr<std::span<const float>>); the first error stops the walk.
template <class Get>
absl::StatusOr<LayerWeights> WalkLayer(const ModelConfig& c, int64_t i, Get&& get) {
  const Dim hidden = Field("hidden_size", c.hidden_size);
  const Dim inter = Field("intermediate_size", c.intermediate_size);
  const Dim q_width = Product("num_attention_heads", c.num_heads, "head_dim", c.head_dim);
  const Dim kv_width = Product("num_key_value_heads", c.num_kv_heads, "head_dim", c.head_dim);
  const std::string p = absl::StrCat("model.layers.", i, ".");
  LayerWeights l;
  absl::Status status;
  auto one = [&](Want want) -> std::span<const float> {
    if (!status.ok()) return {};
    absl::StatusOr<std::span<const float>> got = get(want);
    if (!got.ok()) {
      status = got.status();
      return {};
    }
    return *got;
  };
  auto matrix = [&](const std::string& name, Dim rows, Dim cols, bool bias) {
    Matrix m;
    m.name = name + ".weight";
    m.rows = rows.value;
    m.cols = cols.value;
    m.values = one({m.name, {rows, cols}, Kind::kMatrix});
    if (bias) m.bias = one({name + ".bias", {rows}, Kind::kBias, "the config asks for biases"});
    return m;
  };
  l.input_norm = one({p + "input_layernorm.weight", {hidden}, Kind::kNorm});
  l.post_attention_norm = one({p + "post_attention_layernorm.weight", {hidden}, Kind::kNorm});
  if (c.norms_per_layer == 4) {
    l.pre_feedforward_norm = one({p + "pre_feedforward_layernorm.weight", {hidden}, Kind::kNorm});
    l.post_feedforward_norm = one({p + "post_feedforward_layernorm.weight", {hidden}, Kind::kNorm});
  }
  const std::string a = p + "self_attn.";
  if (c.kv_lora_rank > 0) {  // DeepSeek-V3's latent attention, in DeepseekV3Attention's order
    const int64_t H = c.num_heads, nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim;
    const Dim qk = Product("num_attention_heads", H, "(qk_nope_head_dim + qk_rope_head_dim)",
                           nope + rope);
    const Dim q_rank = Field("q_lora_rank", c.q_lora_rank);
    const Dim kv_rank = Field("kv_lora_rank", c.kv_lora_rank);
    if (c.q_lora_rank > 0) {
      l.q_a = matrix(a + "q_a_proj", q_rank, hidden, false);
      l.q_a_norm = one({a + "q_a_layernorm.weight", {q_rank}, Kind::kNorm});
      l.q_b = matrix(a + "q_b_proj", qk, q_rank, false);
    } else {
      l.q = matrix(a + "q_proj", qk, hidden, false);
    }
    l.kv_a = matrix(a + "kv_a_proj_with_mqa",
                    Dim{c.kv_lora_rank + rope,
                        absl::StrCat("kv_lora_rank + qk_rope_head_dim = ", c.kv_lora_rank, " + ",
                                     rope)},
                    hidden, false);
    l.kv_a_norm = one({a + "kv_a_layernorm.weight", {kv_rank}, Kind::kNorm});
    l.kv_b = matrix(a + "kv_b_proj",
                    Product("num_attention_heads", H, "(qk_nope_head_dim + v_head_dim)",
                            nope + c.v_head_dim),
                    kv_rank, false);
    l.o = matrix(a + "o_proj", hidden, Product("num_attention_heads", H, "v_head_dim", c.v_head_dim),
                 false);
  } else {
    l.q = matrix(a + "q_proj", q_width, hidden, c.attention_bias);
    l.k = matrix(a + "k_proj", kv_width, hidden, c.attention_bias);
    l.v = matrix(a + "v_proj", kv_width, hidden, c.attention_bias);
    l.o = matrix(a + "o_proj", hidden, q_width, c.output_bias);
  }
  if (c.qk_norm) {
    const Dim head = Field("head_dim", c.head_dim);
    l.q_norm = one({a + "q_norm.weight", {head}, Kind::kNorm, "qwen3 normalizes q and k"});
    l.k_norm = one({a + "k_norm.weight", {head}, Kind::kNorm, "qwen3 normalizes q and k"});
  }
  if (c.attention_sinks) {
    l.sinks = one({a + "sinks", {Field("num_attention_heads", c.num_heads)}, Kind::kBias,
                   "gpt_oss has attention sinks"});
  }
  const bool gpt_oss = c.model_type == "gpt_oss";
  const bool deepseek = c.model_type == "deepseek_v3";
  const bool qwen_moe = c.model_type == "qwen3_moe" || c.model_type == "qwen2_moe";
  if (MoeLayer(c, i) && (qwen_moe || gpt_oss || deepseek)) {
    // gpt-oss stores its experts stacked (mlp.experts.gate_up_proj...):
    // Checkpoint::IndexParts finds each expert's matrices under these names.
    const std::string m = p + "mlp.";
    auto expert = [&](const std::string& x, const Dim& width, bool bias) {
      Expert ex;
      ex.gate = matrix(x + "gate_proj", width, hidden, bias);
      ex.up = matrix(x + "up_proj", width, hidden, bias);
      ex.down = matrix(x + "down_proj", hidden, width, bias);
      return ex;
    };
    const Dim width =
        Field(gpt_oss ? "intermediate_size" : "moe_intermediate_size", ExpertWidth(c));
    const Dim experts = Field(gpt_oss    ? "num_local_experts"
                              : deepseek ? "n_routed_experts"
                                         : "num_experts",
                              c.num_experts);
    l.router = matrix(m + (gpt_oss ? "router" : "gate"), experts, hidden, c.router_bias);
    if (c.routing == Routing::kSigmoidGroups) {
      l.score_bias = one({m + "gate.e_score_correction_bias", {experts}, Kind::kBias,
                          "deepseek_v3's routing adds it"});
    }
    for (int64_t e = 0; e < c.num_experts; ++e) {
      l.experts.push_back(expert(absl::StrCat(m, "experts.", e, "."), width, c.expert_bias));
    }
    if (c.shared_expert_intermediate_size > 0) {
      l.shared = expert(m + (deepseek ? "shared_experts." : "shared_expert."),
                        deepseek ? Product("n_shared_experts", c.shared_expert_intermediate_size /
                                                                   ExpertWidth(c),
                                           "moe_intermediate_size", ExpertWidth(c))
                                 : Field("shared_expert_intermediate_size",
                                         c.shared_expert_intermediate_size),
                        false);
      if (c.shared_expert_gated) {
        l.shared_gate = matrix(m + "shared_expert_gate", Field("one gate", 1), hidden, false);
      }
    }
  } else if (MoeLayer(c, i)) {
    const std::string m = p + "block_sparse_moe.";
    l.router = matrix(m + "gate", Field("num_local_experts", c.num_experts), hidden, false);
    for (int64_t e = 0; e < c.num_experts; ++e) {
      const std::string x = absl::StrCat(m, "experts.", e, ".");
      Expert ex;
      ex.gate = matrix(x + "w1", inter, hidden, false);
      ex.up = matrix(x + "w3", inter, hidden, false);
      ex.down = matrix(x + "w2", hidden, inter, false);
      l.experts.push_back(std::move(ex));
    }
  } else {
    const std::string m = p + "mlp.";
    l.gate = matrix(m + "gate_proj", inter, hidden, c.mlp_bias);
    l.up = matrix(m + "up_proj", inter, hidden, c.mlp_bias);
    l.down = matrix(m + "down_proj", hidden, inter, c.mlp_bias);
  }
  if (!status.ok()) return status;
  return l;
}

// Runs read(begin, end) over rows [0, rows) of `cols` elements in pieces of
// about 2^20 elements across the pool; the first error in row order.
absl::Status ForRowPieces(int64_t rows, int64_t cols, int threads,
                          const std::function<absl::Status(int64_t, int64_t)>& read) {
  constexpr int64_t kPieceElements = int64_t{1} << 20;
  const int64_t piece_rows = std::max<int64_t>(1, kPieceElements / cols);
  const int64_t pieces = (rows + piece_rows - 1) / piece_rows;
  std::vector<absl::Status> errors(static_cast<size_t>(pieces));
  ParallelFor(static_cast<size_t>(pieces), threads, [&](size_t p) {
    const int64_t begin = static_cast<int64_t>(p) * piece_rows;
    errors[p] = read(begin, std::min(rows, begin + piece_rows));
  });
  for (const absl::Status& s : errors) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status ReadPart(const Checkpoint::Found& found, int64_t first_row, int64_t rows,
                      std::span<float> out, int threads,
                      const std::function<void(std::span<const uint8_t>)>& release);

// A tensor's elements as float32 into `out`, rows in the original order,
// split into pieces of whole rows across the pool; with `release`, each
// piece's pages are handed to it once read.
absl::Status ReadTensor(const Checkpoint::Found& found, int64_t first_row, int64_t rows,
                        std::span<float> out, int threads,
                        const std::function<void(std::span<const uint8_t>)>& release = {}) {
  if (found.source != nullptr) return ReadPart(found, first_row, rows, out, threads, release);
  const TensorView& t = *found.view;
  const int64_t cols = std::max<int64_t>(1, t.cols());
  return ForRowPieces(rows, cols, threads, [&](int64_t begin, int64_t end) {
    absl::Status s;
    if (found.row_of.empty()) {
      s = ReadAsFloat32(t, (first_row + begin) * cols,
                        out.subspan(static_cast<size_t>(begin * cols),
                                    static_cast<size_t>((end - begin) * cols)));
    } else {
      // Stored row r holds original row row_of[r]: whole tensors only.
      for (int64_t r = begin; r < end && s.ok(); ++r) {
        s = ReadAsFloat32(
            t, r * cols,
            out.subspan(static_cast<size_t>(found.row_of[r] * cols), static_cast<size_t>(cols)));
      }
    }
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat(t.file, ": tensor ", t.name, ": ", s.message()));
    }
    // Stored rows [begin, end) were read (in place or permuted).
    if (release) release(ElementBytes(t, (first_row + begin) * cols, (end - begin) * cols));
    return absl::OkStatus();
  });
}

// Rows [first_row, first_row + rows) of a part (Checkpoint::Found): rows of
// the source read in place when a row's elements are consecutive, else the
// span of the source they lie in read once and gathered.
absl::Status ReadPart(const Checkpoint::Found& found, int64_t first_row, int64_t rows,
                      std::span<float> out, int threads,
                      const std::function<void(std::span<const uint8_t>)>& release) {
  const TensorView& src = *found.source;
  const int64_t cols = std::max<int64_t>(1, found.view->cols());
  auto named = [&](const absl::Status& s) {
    return s.ok() ? s
                  : absl::Status(s.code(), absl::StrCat(src.file, ": tensor ", found.view->name,
                                                        ": ", s.message()));
  };
  if (rows <= 0) return absl::OkStatus();
  if (found.col_stride == 1) {
    return named(ForRowPieces(rows, cols, threads, [&](int64_t begin, int64_t end) {
      for (int64_t r = begin; r < end; ++r) {
        const int64_t at = found.base + (first_row + r) * found.row_stride;
        if (absl::Status s = ReadAsFloat32(
                src, at, out.subspan(static_cast<size_t>(r * cols), static_cast<size_t>(cols)));
            !s.ok()) {
          return s;
        }
        if (release) release(ElementBytes(src, at, cols));
      }
      return absl::OkStatus();
    }));
  }
  const int64_t begin = found.base + first_row * found.row_stride;
  const int64_t last = begin + (rows - 1) * found.row_stride + (cols - 1) * found.col_stride;
  std::vector<float> span(static_cast<size_t>(last - begin + 1));
  if (absl::Status s = ReadAsFloat32(src, begin, span); !s.ok()) return named(s);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) {
      out[static_cast<size_t>(r * cols + c)] =
          span[static_cast<size_t>(r * found.row_stride + c * found.col_stride)];
    }
  }
  if (release) release(ElementBytes(src, begin, static_cast<int64_t>(span.size())));
  return absl::OkStatus();
}

}  // namespace

Checkpoint::Checkpoint(Checkpoint&&) noexcept = default;
Checkpoint& Checkpoint::operator=(Checkpoint&&) noexcept = default;
Checkpoint::~Checkpoint() = default;

absl::Status Checkpoint::Index() {
  const bool gguf = set_->gguf() != nullptr;
  if (gguf) {
    if (absl::Status s = CheckGgufModel(*set_, config_); !s.ok()) return s;
  }
  for (const TensorView& t : set_->tensors()) {
    if (!gguf) {
      by_name_.emplace(t.name, Found{&t, {}});
      continue;
    }
    absl::StatusOr<std::vector<GgufTensorName>> names = GgufTensorNames(t, config_);
    if (!names.ok()) return names.status();
    for (GgufTensorName& n : *names) {
      if (n.view.has_value()) {
        expert_slices_.push_back(*std::move(n.view));
        by_name_.emplace(std::move(n.name), Found{&expert_slices_.back(), {}});
      } else {
        by_name_.emplace(std::move(n.name), Found{&t, std::move(n.row_of)});
      }
    }
  }
  if (!gguf) {
    if (absl::Status s = IndexParts(); !s.ok()) return s;
  }
  // Check every tensor the config implies without reading any.
  auto check = [&](const Want& want) -> absl::StatusOr<std::span<const float>> {
    if (matrices_only_ && want.kind != Kind::kMatrix) return std::span<const float>();
    const Found* f = Find(want.name);
    if (f == nullptr) {
      const std::string why = want.why.empty() ? "" : absl::StrCat(" (", want.why, ")");
      if (!gguf && !matrices_only_) {
        return absl::InvalidArgumentError(
            absl::StrCat(config_.name, ": the checkpoint has no tensor ", want.name, why));
      }
      std::string llama_cpp;
      if (std::optional<std::string> ll = LlamaCppName(want.name); gguf && ll.has_value()) {
        llama_cpp = absl::StrCat(" (llama.cpp's ", *ll, ")");
      }
      return absl::InvalidArgumentError(absl::StrCat(absl::StrJoin(set_->files(), ", "),
                                                     ": no tensor ", want.name, llama_cpp, " of ",
                                                     config_.name, why));
    }
    const TensorView& t = *f->view;
    std::vector<int64_t> shape;
    std::vector<std::string> fields;
    for (const Dim& d : want.dims) {
      shape.push_back(d.value);
      fields.push_back(d.fields);
    }
    if (t.shape != shape) {
      return absl::InvalidArgumentError(absl::StrCat(
          t.file, ": tensor ", t.name, " has shape ", ShapeText(t.shape), "; ", config_.name,
          " makes it ", ShapeText(shape), " (", absl::StrJoin(fields, ", "), ")"));
    }
    if (!IsFloating(t.dtype)) {
      return absl::InvalidArgumentError(
          absl::StrCat(t.file, ": tensor ", t.name, " is ", DTypeName(t.dtype), ", not floating"));
    }
    if (t.dtype == DType::kGgml && (t.ggml == nullptr || !t.ggml->can_decode)) {
      return absl::InvalidArgumentError(absl::StrCat(t.file, ": tensor ", t.name, " is ",
                                                     t.type_name(), ", which lowp cannot decode"));
    }
    return std::span<const float>();
  };
  // In the order of the file's layout: the first error a reader meets.
  const Dim hidden = Field("hidden_size", config_.hidden_size);
  const Dim vocab = Field("vocab_size", config_.vocab_size);
  auto check_one = [&](Want want) { return check(want).status(); };
  if (absl::Status s = check_one({"model.embed_tokens.weight", {vocab, hidden}, Kind::kMatrix});
      !s.ok()) {
    return s;
  }
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    absl::StatusOr<LayerWeights> l = WalkLayer(config_, i, check);
    if (!l.ok()) return l.status();
  }
  if (absl::Status s = check_one({"model.norm.weight", {hidden}, Kind::kNorm}); !s.ok()) return s;
  if (!config_.tie_word_embeddings && !(gguf && Find("lm_head.weight") == nullptr)) {
    if (absl::Status s = check_one(
            {"lm_head.weight", {vocab, hidden}, Kind::kMatrix, "tie_word_embeddings is false"});
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status Checkpoint::IndexParts() {
  const ModelConfig& c = config_;
  const bool gpt_oss = c.model_type == "gpt_oss";
  if (!gpt_oss && !c.fused_projections) return absl::OkStatus();
  const int64_t D = c.hidden_size, E = c.num_experts, I = ExpertWidth(c);
  auto stored = [&](const std::string& name) -> const TensorView* {
    const Found* f = Find(name);
    return f != nullptr && f->source == nullptr ? f->view : nullptr;
  };
  // `name`, of `shape`, as the elements of `source` at base + r *
  // row_stride + c * col_stride; `where` is appended to the source's name.
  auto add = [&](const std::string& name, const TensorView& source, const std::string& where,
                 std::vector<int64_t> shape, int64_t base, int64_t row_stride, int64_t col_stride) {
    TensorView v = source;
    v.name = source.name + where;
    v.shape = std::move(shape);
    // Its bytes and its share of the scales, by count (what stored_bytes()
    // reports; the values are read through `source`): a part's are
    // interleaved with the rest.
    const uint64_t elements = static_cast<uint64_t>(v.elements());
    const uint64_t total = static_cast<uint64_t>(std::max<int64_t>(1, source.elements()));
    const std::span<const uint8_t> first = ElementBytes(source, base, 1);
    const size_t from = static_cast<size_t>(first.data() - source.bytes.data());
    v.bytes = source.bytes.subspan(
        from, std::min<size_t>(source.bytes.size() - from, TypeBytes(source, v.elements())));
    if (source.scales != nullptr) {
      auto scales = std::make_shared<TensorScales>(*source.scales);
      scales->bytes = scales->bytes.subspan(0, scales->bytes.size() * elements / total);
      v.scales = std::move(scales);
    }
    part_views_.push_back(std::move(v));
    by_name_[name] = Found{&part_views_.back(), {}, &source, base, row_stride, col_stride};
  };
  auto check = [&](const TensorView& t, const std::vector<int64_t>& want,
                   absl::string_view fields) -> absl::Status {
    if (t.shape == want) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        t.file, ": tensor ", t.name, " has shape ", ShapeText(t.shape), "; ", c.name, " makes it ",
        ShapeText(want), " (", fields, ")"));
  };
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string p = absl::StrCat("model.layers.", i, ".");
    if (c.fused_projections) {  // Phi-3: q, k, v rows one after another; gate, then up
      const int64_t q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
      if (const TensorView* t = stored(p + "self_attn.qkv_proj.weight")) {
        if (absl::Status s = check(*t, {q + 2 * kv, D},
                                   "(num_attention_heads + 2 num_key_value_heads) * head_dim, "
                                   "hidden_size");
            !s.ok()) {
          return s;
        }
        add(p + "self_attn.q_proj.weight", *t, absl::StrCat("[0:", q, "]"), {q, D}, 0, D, 1);
        add(p + "self_attn.k_proj.weight", *t, absl::StrCat("[", q, ":", q + kv, "]"), {kv, D},
            q * D, D, 1);
        add(p + "self_attn.v_proj.weight", *t, absl::StrCat("[", q + kv, ":", q + 2 * kv, "]"),
            {kv, D}, (q + kv) * D, D, 1);
      }
      const int64_t inter = c.intermediate_size;
      if (const TensorView* t = stored(p + "mlp.gate_up_proj.weight"); t && !MoeLayer(c, i)) {
        if (absl::Status s = check(*t, {2 * inter, D}, "2 * intermediate_size, hidden_size");
            !s.ok()) {
          return s;
        }
        add(p + "mlp.gate_proj.weight", *t, absl::StrCat("[0:", inter, "]"), {inter, D}, 0, D, 1);
        add(p + "mlp.up_proj.weight", *t, absl::StrCat("[", inter, ":", 2 * inter, "]"),
            {inter, D}, inter * D, D, 1);
      }
    }
    if (!gpt_oss || !MoeLayer(c, i)) continue;
    // gpt-oss: experts stacked; gate and up interleaved along the outputs
    // (gate the even ones). MXFP4 blocks are stored [E, out, in], the
    // dequantized layout transformers writes [E, in, out].
    const std::string x = p + "mlp.experts.";
    const TensorView* gate_up = stored(x + "gate_up_proj");
    const TensorView* down = stored(x + "down_proj");
    for (auto [t, name] : {std::pair{gate_up, "gate_up_proj"}, std::pair{down, "down_proj"}}) {
      if (t == nullptr) {
        return absl::InvalidArgumentError(absl::StrCat(
            c.name, ": the checkpoint has no tensor ", x, name, " (nor ", x, name, "_blocks with ",
            name, "_scales): gpt_oss stores its experts there"));
      }
    }
    const bool packed = gate_up->dtype == DType::kF4 && gate_up->scales != nullptr;
    const std::string fields = "num_local_experts, intermediate_size, hidden_size";
    if (absl::Status s = check(*gate_up, packed ? std::vector<int64_t>{E, 2 * I, D}
                                                : std::vector<int64_t>{E, D, 2 * I},
                               packed ? "num_local_experts, 2 * intermediate_size, hidden_size"
                                      : "num_local_experts, hidden_size, 2 * intermediate_size");
        !s.ok()) {
      return s;
    }
    const bool down_packed = down->dtype == DType::kF4 && down->scales != nullptr;
    if (absl::Status s = check(*down, down_packed ? std::vector<int64_t>{E, D, I}
                                                  : std::vector<int64_t>{E, I, D},
                               down_packed ? "num_local_experts, hidden_size, intermediate_size"
                                           : fields);
        !s.ok()) {
      return s;
    }
    const TensorView* gate_up_bias = stored(x + "gate_up_proj_bias");
    const TensorView* down_bias = stored(x + "down_proj_bias");
    if (gate_up_bias != nullptr) {
      if (absl::Status s = check(*gate_up_bias, {E, 2 * I}, "num_local_experts, 2 * intermediate_size");
          !s.ok()) {
        return s;
      }
    }
    if (down_bias != nullptr) {
      if (absl::Status s = check(*down_bias, {E, D}, "num_local_experts, hidden_size"); !s.ok()) {
        return s;
      }
    }
    for (int64_t e = 0; e < E; ++e) {
      const std::string ex = absl::StrCat(x, e, ".");
      for (int64_t half = 0; half < 2; ++half) {  // gate, up
        const std::string proj = ex + (half == 0 ? "gate_proj" : "up_proj");
        const std::string where = absl::StrCat("[", e, ", ", half, "::2]");
        if (packed) {
          add(proj + ".weight", *gate_up, where, {I, D}, (e * 2 * I + half) * D, 2 * D, 1);
        } else {
          add(proj + ".weight", *gate_up, absl::StrCat("[", e, ", :, ", half, "::2]"), {I, D},
              e * D * 2 * I + half, 2, 2 * I);
        }
        if (gate_up_bias != nullptr) {
          add(proj + ".bias", *gate_up_bias, where, {I}, e * 2 * I + half, 0, 2);
        }
      }
      if (down_packed) {
        add(ex + "down_proj.weight", *down, absl::StrCat("[", e, "]"), {D, I}, e * D * I, I, 1);
      } else {
        add(ex + "down_proj.weight", *down, absl::StrCat("[", e, "]^T"), {D, I}, e * I * D, 1, D);
      }
      if (down_bias != nullptr) {
        add(ex + "down_proj.bias", *down_bias, absl::StrCat("[", e, "]"), {D}, e * D, 0, 1);
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Checkpoint> Checkpoint::Open(const ModelConfig& config, TensorSet set,
                                            bool matrices_only) {
  if (absl::Status s = CheckForwardSupport(config); !s.ok()) return s;
  Checkpoint c;
  c.config_ = config;
  c.set_ = std::make_unique<TensorSet>(std::move(set));
  c.matrices_only_ = matrices_only;
  if (absl::Status s = c.Index(); !s.ok()) return s;
  return c;
}

absl::StatusOr<Checkpoint> Checkpoint::OpenModel(const std::string& model,
                                                 const std::vector<std::string>& tensors) {
  std::error_code ec;
  std::vector<std::string> files = tensors;
  absl::StatusOr<ModelConfig> config = FindModel(model);
  if (!config.ok()) return OptionError("model", config.status().message());
  if (files.empty()) {
    if (!std::filesystem::is_directory(model, ec)) {
      return OptionError("tensors",
                         absl::StrCat(model,
                                      " names no checkpoint: give its tensor files, or a "
                                      "directory with config.json and model.safetensors"));
    }
    absl::StatusOr<std::vector<std::string>> found = SnapshotCheckpoint(model);
    if (!found.ok()) return found.status();
    files = *found;
  }
  absl::StatusOr<TensorSet> set = TensorSet::OpenAll(files);
  if (!set.ok()) return set.status();
  return Open(*config, *std::move(set));
}

const Checkpoint::Found* Checkpoint::Find(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : &it->second;
}

uint64_t Checkpoint::LayerBytes() const {
  uint64_t bytes = 0;
  auto count = [&](const Want& want) -> absl::StatusOr<std::span<const float>> {
    if (matrices_only_ && want.kind != Kind::kMatrix) return std::span<const float>();
    uint64_t n = 1;
    for (const Dim& d : want.dims) n *= static_cast<uint64_t>(d.value);
    bytes += n * sizeof(float);
    return std::span<const float>();
  };
  (void)WalkLayer(config_, 0, count);
  return bytes;
}

namespace {

// A routed expert's tensor ("model.layers.N.mlp.experts.E. ...", Mixtral's
// "block_sparse_moe.experts.E."); not a shared expert's.
bool RoutedExpertTensor(absl::string_view name) { return absl::StrContains(name, ".experts."); }

// A layer's experts read from its checkpoint as the forward pass asks.
class CheckpointExperts : public ExpertSource {
 public:
  CheckpointExperts(const Checkpoint& checkpoint, int64_t layer, bool keep_cached,
                    std::shared_ptr<ExpertPool> pool)
      : checkpoint_(checkpoint), layer_(layer), keep_cached_(keep_cached), pool_(std::move(pool)) {}
  absl::StatusOr<std::shared_ptr<const LoadedExpert>> Load(int64_t expert,
                                                           int threads) const override {
    return checkpoint_.ReadExpert(layer_, expert, threads, keep_cached_, pool_->Get());
  }

 private:
  const Checkpoint& checkpoint_;
  const int64_t layer_;
  const bool keep_cached_;
  std::shared_ptr<ExpertPool> pool_;
};

// A layer's matrices read from its checkpoint as the forward pass asks.
class CheckpointMatrices : public MatrixSource {
 public:
  CheckpointMatrices(const Checkpoint& checkpoint, std::shared_ptr<MatrixPool> pool)
      : checkpoint_(checkpoint), pool_(std::move(pool)) {}
  absl::StatusOr<std::shared_ptr<const LoadedMatrix>> Load(const Matrix& m,
                                                           int threads) const override {
    return checkpoint_.ReadMatrix(m, threads, /*keep_cached=*/true, pool_->Get());
  }

 private:
  const Checkpoint& checkpoint_;
  std::shared_ptr<MatrixPool> pool_;
};

}  // namespace

absl::StatusOr<LayerWeights> Checkpoint::ReadLayer(int64_t layer, LayerStorage& storage,
                                                   int threads, bool keep_cached,
                                                   bool experts_later, bool matrices_later) const {
  const auto release = [&](std::span<const uint8_t> bytes) { set_->Release(bytes, keep_cached); };
  const bool later = (experts_later || matrices_later) && MoeLayer(config_, layer);
  size_t index = 0;
  auto read = [&](const Want& want) -> absl::StatusOr<std::span<const float>> {
    if (matrices_only_ && want.kind != Kind::kMatrix) return std::span<const float>();
    if (later && RoutedExpertTensor(want.name)) return std::span<const float>();
    if (matrices_later && want.kind == Kind::kMatrix) return std::span<const float>();
    const Found* f = Find(want.name);
    if (f == nullptr) return absl::InternalError(absl::StrCat("no tensor ", want.name));
    const int64_t elements = f->view->elements();
    std::span<float> out = storage.Buffer(index++, static_cast<size_t>(elements));
    if (absl::Status s = ReadTensor(*f, 0, f->view->rows(), out, threads, release); !s.ok()) {
      return s;
    }
    return std::span<const float>(out);
  };
  absl::StatusOr<LayerWeights> w = WalkLayer(config_, layer, read);
  if (!w.ok()) return w;
  for (const LayerWeights::Entry& e : w->Matrices(config_)) {
    const Found* f = Find(e.matrix->name);
    if (f == nullptr) continue;
    e.matrix->stored_type = StoredGgmlType(*f->view);
  }
  // Each candidate made from this layer reads its experts again: their
  // pages stay in the page cache (out of this process's memory) until then.
  if (later) {
    if (storage.expert_pool == nullptr) storage.expert_pool = ExpertPool::Make();
    w->expert_source =
        std::make_shared<CheckpointExperts>(*this, layer, true, storage.expert_pool);
  }
  // Each candidate reads them again: their pages stay cached, as the experts'.
  if (matrices_later) {
    if (storage.matrix_pool == nullptr) storage.matrix_pool = MatrixPool::Make();
    w->matrix_source = std::make_shared<CheckpointMatrices>(*this, storage.matrix_pool);
  }
  return w;
}

absl::StatusOr<std::shared_ptr<const LoadedMatrix>> Checkpoint::ReadMatrix(
    const Matrix& m, int threads, bool keep_cached, std::shared_ptr<LoadedMatrix> into) const {
  const Found* f = Find(m.name);
  if (f == nullptr || f->view->elements() != m.rows * m.cols) {
    return absl::InvalidArgumentError(
        absl::StrCat(config_.name, ": no matrix ", m.name, " of [", m.rows, ", ", m.cols, "]"));
  }
  std::shared_ptr<LoadedMatrix> loaded =
      into != nullptr ? std::move(into) : std::make_shared<LoadedMatrix>();
  std::span<float> out = loaded->storage.Buffer(0, static_cast<size_t>(m.rows * m.cols));
  const auto release = [&](std::span<const uint8_t> bytes) { set_->Release(bytes, keep_cached); };
  if (absl::Status s = ReadTensor(*f, 0, f->view->rows(), out, threads, release); !s.ok()) return s;
  loaded->matrix = m;
  loaded->matrix.values = out;
  loaded->matrix.stored_type = StoredGgmlType(*f->view);
  return std::shared_ptr<const LoadedMatrix>(std::move(loaded));
}

absl::StatusOr<std::shared_ptr<const LoadedExpert>> Checkpoint::ReadExpert(
    int64_t layer, int64_t expert, int threads, bool keep_cached,
    std::shared_ptr<LoadedExpert> into) const {
  if (!MoeLayer(config_, layer) || expert < 0 || expert >= config_.num_experts) {
    return absl::InvalidArgumentError(
        absl::StrCat("layer ", layer, " has no expert ", expert, " (", config_.name, ")"));
  }
  const auto release = [&](std::span<const uint8_t> bytes) { set_->Release(bytes, keep_cached); };
  std::shared_ptr<LoadedExpert> loaded =
      into != nullptr ? std::move(into) : std::make_shared<LoadedExpert>();
  const std::string mine = absl::StrCat(".experts.", expert, ".");
  size_t index = 0;
  auto read = [&](const Want& want) -> absl::StatusOr<std::span<const float>> {
    if (matrices_only_ && want.kind != Kind::kMatrix) return std::span<const float>();
    if (!absl::StrContains(want.name, mine)) return std::span<const float>();
    const Found* f = Find(want.name);
    if (f == nullptr) return absl::InternalError(absl::StrCat("no tensor ", want.name));
    std::span<float> out =
        loaded->storage.Buffer(index++, static_cast<size_t>(f->view->elements()));
    if (absl::Status s = ReadTensor(*f, 0, f->view->rows(), out, threads, release); !s.ok()) {
      return s;
    }
    return std::span<const float>(out);
  };
  absl::StatusOr<LayerWeights> w = WalkLayer(config_, layer, read);
  if (!w.ok()) return w.status();
  loaded->matrices = w->experts[static_cast<size_t>(expert)];
  for (Matrix* m : {&loaded->matrices.gate, &loaded->matrices.up, &loaded->matrices.down}) {
    if (const Found* f = Find(m->name); f != nullptr) m->stored_type = StoredGgmlType(*f->view);
  }
  return loaded;
}

std::vector<TensorView> Checkpoint::MatrixShapes() const {
  std::vector<TensorView> out;
  auto add = [&](const std::string& name, std::vector<int64_t> shape) {
    TensorView v;
    v.name = name;
    v.dtype = DType::kF32;
    v.shape = std::move(shape);
    out.push_back(std::move(v));
  };
  add("model.embed_tokens.weight", {config_.vocab_size, config_.hidden_size});
  for (int64_t i = 0; i < config_.num_layers; ++i) {
    auto shape = [&](const Want& want) -> absl::StatusOr<std::span<const float>> {
      if (want.kind == Kind::kMatrix) {
        std::vector<int64_t> dims;
        for (const Dim& d : want.dims) dims.push_back(d.value);
        add(want.name, std::move(dims));
      }
      return std::span<const float>();
    };
    (void)WalkLayer(config_, i, shape);
  }
  if (!config_.tie_word_embeddings)
    add("lm_head.weight", {config_.vocab_size, config_.hidden_size});
  return out;
}

const TensorView& Checkpoint::TableView(Table table) const {
  if (table == Table::kLmHead && !config_.tie_word_embeddings) {
    if (const Found* f = Find("lm_head.weight"); f != nullptr) return *f->view;
  }
  return *Find("model.embed_tokens.weight")->view;
}

std::string Checkpoint::TableName(Table table) const {
  return table == Table::kLmHead && !config_.tie_word_embeddings ? "lm_head.weight"
                                                                 : "model.embed_tokens.weight";
}

absl::Status Checkpoint::ReadRows(Table table, int64_t first, int64_t count, std::span<float> out,
                                  int threads) const {
  const TensorView& t = TableView(table);
  if (first < 0 || count < 0 || first + count > t.rows() ||
      static_cast<int64_t>(out.size()) != count * t.cols()) {
    return absl::InvalidArgumentError(absl::StrCat(t.file, ": rows ", first, "..", first + count,
                                                   " of ", t.name, " (", t.rows(), " rows)"));
  }
  return ReadTensor(Found{&t, {}}, first, count, out, threads);
}

absl::Status Checkpoint::ReadFinalNorm(std::vector<float>& out) const {
  const Found* f = Find("model.norm.weight");
  if (f == nullptr) return absl::InternalError("no final norm");
  out.resize(static_cast<size_t>(f->view->elements()));
  return ReadTensor(*f, 0, f->view->rows(), out, 1);
}

void Checkpoint::ReleaseRows(Table table, int64_t first, int64_t count, bool keep_cached) const {
  const TensorView& t = TableView(table);
  set_->Release(ElementBytes(t, first * t.cols(), count * t.cols()), keep_cached);
}

absl::Status Checkpoint::CheckIntact() const { return set_->CheckIntact(); }

absl::StatusOr<std::vector<std::string>> SnapshotCheckpoint(const std::string& dir) {
  std::error_code ec;
  for (const char* name : {"model.safetensors.index.json", "model.safetensors"}) {
    const std::string path = dir + "/" + name;
    if (std::filesystem::exists(path, ec)) return std::vector<std::string>{path};
  }
  return OptionError("tensors", absl::StrCat(dir, " has neither model.safetensors.index.json nor ",
                                             "model.safetensors; give the checkpoint's files"));
}

}  // namespace lowp
