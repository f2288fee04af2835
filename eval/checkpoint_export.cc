#include "eval/checkpoint_export.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "formats/format.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "io/mapped_file.h"
#include "io/packed_writer.h"
#include "io/safetensors.h"
#include "kernels/convert.h"
#include "kernels/thread_pool.h"
#include "nlohmann/json.hpp"

namespace lowp {
namespace {

using Json = nlohmann::ordered_json;

// Files of a model directory that a loader reads beside the weights.
constexpr const char* kCopied[] = {"tokenizer.json",
                                   "tokenizer_config.json",
                                   "tokenizer.model",
                                   "special_tokens_map.json",
                                   "added_tokens.json",
                                   "vocab.json",
                                   "merges.txt",
                                   "generation_config.json",
                                   "chat_template.jinja",
                                   "chat_template.json",
                                   "preprocessor_config.json"};
constexpr uint64_t kMaxCopiedBytes = uint64_t{1} << 30;

absl::Status Refuse(const std::string& matrix, const Scheme& scheme, absl::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("weights: ", scheme.name(), " (for ", matrix, ") ", why));
}

std::string ModuleOf(const std::string& weight) {
  return std::string(absl::StripSuffix(weight, ".weight"));
}

// One matrix the rules quantize: how it is packed, and the compressed-
// tensors weights arguments that say so.
struct Planned {
  const Scheme* scheme = nullptr;
  CodeLayout codes;
  PackSpec spec;
  Json arguments;      // compressed-tensors' "weights"; GPTQ's fields
  std::string format;  // compressed-tensors' group format
};

absl::StatusOr<DType> ScaleDType(const std::string& format) {
  if (format == "fp16") return DType::kF16;
  if (format == "bf16") return DType::kBF16;
  if (format == "fp32" || format == "e8m0fnu") return DType::kF32;  // powers of two: exact
  return absl::InvalidArgumentError(format);
}

absl::StatusOr<Planned> Plan(const RuleMatch& m, CheckpointFormat format) {
  const std::string& name = m.matrix.name;
  const Scheme& scheme = *m.scheme;
  Planned p;
  p.scheme = &scheme;
  p.codes = scheme.Codes();
  const CodeLayout& c = p.codes;
  PackSpec& s = p.spec;
  s.rows = m.matrix.rows();
  s.cols = m.matrix.cols();
  const bool act_order = m.rule != nullptr && m.rule->calibration.act_order;
  if (DecoderLayerOf(name) < 0) {
    return Refuse(name, scheme,
                  absl::StrCat("is outside the decoder layers; ", CheckpointFormatName(format),
                               " checkpoints (as vLLM loads them) keep the "
                               "embedding and lm_head unquantized"));
  }
  if (c.kind == CodeLayout::Kind::kNone ||
      (format == CheckpointFormat::kGptq && c.kind != CodeLayout::Kind::kInt)) {
    return Refuse(name, scheme,
                  format == CheckpointFormat::kGptq
                      ? "has no GPTQ layout (GPTQ stores intN-gG and intN-channel codes)"
                      : "has no compressed-tensors layout (it stores intN groups, channels or "
                        "tensors, FP8 E4M3 scaled per tensor, channel, group or 2-D block, and "
                        "NVFP4)");
  }
  absl::StatusOr<DType> scale = ScaleDType(c.scale);
  Json& a = p.arguments;
  if (c.kind == CodeLayout::Kind::kInt) {
    s.bits = c.bits;
    s.symmetric = !c.asymmetric;
    s.per_tensor = c.per_tensor;
    s.group_cols = c.block_cols > 0 ? std::min(c.block_cols, s.cols) : s.cols;
    if (!scale.ok()) return Refuse(name, scheme, "has scales no checkpoint stores");
    s.scale_dtype = *scale;
    if (format == CheckpointFormat::kGptq) {
      if (c.per_tensor) return Refuse(name, scheme, "has one scale per tensor; GPTQ has groups");
      if (c.bits != 2 && c.bits != 3 && c.bits != 4 && c.bits != 8) {
        return Refuse(name, scheme, "has a width GPTQ does not store (2, 3, 4 or 8 bits)");
      }
      if (*scale != DType::kF16) {
        return Refuse(name, scheme,
                      "has " + c.scale +
                          " scales; GPTQ stores fp16 ones (write "
                          "compressed-tensors, or take :scale=fp16)");
      }
      s.layout = WrittenLayout::kGptq;
      s.g_idx = true;  // AutoGPTQ writes it, act-order or not
      a = {{"bits", c.bits},
           {"group_size", c.block_cols > 0 ? c.block_cols : -1},
           {"desc_act", act_order},
           {"sym", !c.asymmetric}};
      return p;
    }
    s.layout = WrittenLayout::kCompressedInt;
    const bool group = c.block_cols > 0;
    s.g_idx = act_order && group;
    p.format = "pack-quantized";
    a = {{"num_bits", c.bits},
         {"type", "int"},
         {"symmetric", !c.asymmetric},
         {"group_size", group ? Json(c.block_cols) : Json(nullptr)},
         {"strategy", c.per_tensor ? "tensor"
                      : group      ? "group"
                                   : "channel"},
         {"block_structure", nullptr},
         {"dynamic", false},
         {"actorder", s.g_idx ? Json("group") : Json(nullptr)},
         {"observer", "minmax"},
         {"observer_kwargs", Json::object()}};
    return p;
  }
  if (c.kind == CodeLayout::Kind::kNvfp4) {
    s.layout = WrittenLayout::kCompressedNvfp4;
    s.bits = 4;
    s.group_cols = 16;
    p.format = "nvfp4-pack-quantized";
    a = {{"num_bits", 4},
         {"type", "float"},
         {"symmetric", true},
         {"group_size", 16},
         {"strategy", "tensor_group"},
         {"block_structure", nullptr},
         {"dynamic", false},
         {"actorder", nullptr},
         {"observer", "minmax"},
         {"observer_kwargs", Json::object()}};
    return p;
  }
  // Scaled FP8.
  if (c.element != "fp8_e4m3fn") {
    return Refuse(name, scheme,
                  "has " + c.element +
                      " elements; compressed-tensors' 8-bit "
                      "float is fp8_e4m3fn");
  }
  if (!scale.ok()) return Refuse(name, scheme, "has scales no checkpoint stores");
  s.layout = WrittenLayout::kCompressedFp8;
  s.bits = 8;
  s.element_dtype = DType::kF8E4M3;
  s.scale_dtype = *scale;
  s.per_tensor = c.per_tensor;
  s.group_cols = c.block_cols > 0 ? c.block_cols : s.cols;
  s.block_rows = c.block_rows > 1 ? c.block_rows : 0;
  p.format = "float-quantized";
  const char* strategy = c.per_tensor       ? "tensor"
                         : c.block_rows > 1 ? "block"
                         : c.block_cols > 0 ? "group"
                                            : "channel";
  a = {{"num_bits", 8},
       {"type", "float"},
       {"symmetric", true},
       {"group_size", c.block_cols > 0 && c.block_rows <= 1 ? Json(c.block_cols) : Json(nullptr)},
       {"strategy", strategy},
       {"block_structure",
        c.block_rows > 1 ? Json::array({c.block_rows, c.block_cols}) : Json(nullptr)},
       {"dynamic", false},
       {"actorder", nullptr},
       {"observer", "minmax"},
       {"observer_kwargs", Json::object()}};
  return p;
}

// What a packer takes for one matrix.
struct Codes {
  std::vector<int32_t> codes, zeros, g_idx;
  std::vector<float> scales;
  float global_scale = 1;
  size_t inexact_blocks = 0;  // NVFP4: blocks the division reads one rounding away
};

absl::Status Disagree(const std::string& name, int64_t at, int64_t cols, float value,
                      absl::string_view why) {
  if (!std::isfinite(value)) why = "is not finite: no code holds it";
  return absl::InternalError(
      absl::StrCat(name, ": element ", at / cols, ",", at % cols, " (", value, ") ", why));
}

// NVFP4's stored global scale G: compressed-tensors (and transformers'
// decompression) divide each block scale s by it where lowp, as
// TransformerEngine, multiplies by the decode scale g. G is the float32
// within 64 ulps of 1/g for which s / G equals s * g for the most blocks
// (ties: the nearest); `exact` counts those blocks. A block where it does
// not reads back one float32 rounding away (s / G and s * g are both
// rounded once from nearly the same real number).
struct GlobalScale {
  float value = 1;
  size_t exact = 0;
};
GlobalScale DividingGlobalScale(float g, std::span<const float> block_scales) {
  std::map<float, size_t> distinct;  // nonzero block scale -> blocks
  size_t zero_blocks = 0;             // exact under any global scale
  for (float s : block_scales) {
    if (s != 0) {
      ++distinct[s];
    } else {
      ++zero_blocks;
    }
  }
  GlobalScale best{1.0f / g, 0};
  bool found = false;
  float up = 1.0f / g, down = up;
  for (int k = 0; k <= 64; ++k) {
    for (float candidate : {up, down}) {
      if (!std::isfinite(candidate) || candidate <= 0) continue;
      size_t exact = zero_blocks;
      for (const auto& [s, count] : distinct) {
        if (s / candidate == s * g) exact += count;
      }
      if (!found || exact > best.exact) best = {candidate, exact};
      found = true;
    }
    if (best.exact == block_scales.size()) break;
    up = std::nextafter(up, std::numeric_limits<float>::infinity());
    down = std::nextafter(down, 0.0f);
  }
  return best;
}

// Runs body(n0, n1) over row ranges on `threads` threads; the first error
// in row order.
absl::Status ForRows(int64_t rows, int threads,
                     const std::function<absl::Status(int64_t, int64_t)>& body) {
  constexpr int64_t kRows = 64;
  const size_t ranges = static_cast<size_t>((rows + kRows - 1) / kRows);
  std::vector<absl::Status> status(ranges);
  ParallelFor(ranges, threads, [&](size_t i) {
    const int64_t n0 = static_cast<int64_t>(i) * kRows;
    status[i] = body(n0, std::min(rows, n0 + kRows));
  });
  for (const absl::Status& st : status) {
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

// The codes of `values` under the stored scales (and zero points) the
// variant chose: each element's code is the one its scale maps it to, and
// is checked to give the element back exactly (InternalError naming it if
// not: the values and the scales disagree).
// `out`'s vectors are reused (a layer's matrices take the same memory).
absl::Status CodesOf(const std::string& name, const Planned& p, std::span<const float> values,
                     const StoredChunk& stored, int threads, Codes& out) {
  const PackSpec& s = p.spec;
  const int64_t N = s.rows, K = s.cols;
  out.codes.resize(static_cast<size_t>(N * K));
  out.zeros.clear();
  out.g_idx.clear();
  out.global_scale = 1;
  out.inexact_blocks = 0;
  if (p.codes.kind == CodeLayout::Kind::kInt) {
    const int64_t G = (K + s.group_cols - 1) / s.group_cols;
    const int64_t per_row = s.per_tensor ? 1 : G;
    if (stored.scales.size() != static_cast<size_t>(N * per_row)) {
      return absl::InternalError(
          absl::StrCat(name, ": ", stored.scales.size(), " scales kept for ", N, " x ", per_row));
    }
    // The group of each column: act-order's blocks are runs of its order.
    std::vector<int32_t> group(static_cast<size_t>(K));
    for (int64_t k = 0; k < K; ++k) group[k] = static_cast<int32_t>(k / s.group_cols);
    if (!stored.column_order.empty() && !s.per_tensor && G > 1) {
      for (int64_t i = 0; i < K; ++i) {
        group[stored.column_order[i]] = static_cast<int32_t>(i / s.group_cols);
      }
    }
    if (s.g_idx) out.g_idx.assign(group.begin(), group.end());
    const int32_t half = 1 << (s.bits - 1), top = (1 << s.bits) - 1;
    const bool asym = !s.symmetric;
    // Columns in runs that share a group (act-order's groups are not runs).
    const bool runs = stored.column_order.empty() || s.per_tensor || G == 1;
    const int64_t run = s.per_tensor ? K : runs ? s.group_cols : 1;
    const float lo = asym ? 0.0f : static_cast<float>(1 - half);
    const float hi = static_cast<float>(asym ? top : half - 1);
    const int32_t offset = asym ? 0 : half;
    absl::Status st = ForRows(N, threads, [&](int64_t n0, int64_t n1) {
      for (int64_t n = n0; n < n1; ++n) {
        const float* x = values.data() + n * K;
        int32_t* code = out.codes.data() + n * K;
        bool bad = false;
        for (int64_t k0 = 0; k0 < K; k0 += run) {
          const size_t b = static_cast<size_t>(n * per_row + (s.per_tensor ? 0 : group[k0]));
          const float scale = stored.scales[b];
          const float zero = asym ? stored.offsets[b] : 0.0f;
          // x * (1 / s) is within a few ulps of the integer x / s: rounded
          // (half to even by the float32 magic number, |x / s| < 2^22), the
          // same integer; checked all the same.
          const float inverse = scale == 0 ? 0.0f : 1.0f / scale;
          constexpr float kMagic = 12582912.0f;  // 1.5 * 2^23
          for (int64_t k = k0, k1 = std::min(K, k0 + run); k < k1; ++k) {
            float q = (x[k] * inverse + kMagic) - kMagic + zero;
            q = q >= lo && q <= hi ? q : lo - 1;  // out of range, or NaN
            bad |= q < lo || (q - zero) * scale != x[k];
            code[k] = static_cast<int32_t>(q) + offset;
          }
        }
        if (!bad) continue;
        for (int64_t k = 0; k < K; ++k) {
          const size_t b = static_cast<size_t>(n * per_row + (s.per_tensor ? 0 : group[k]));
          const float zero = asym ? stored.offsets[b] : 0.0f;
          const float q = static_cast<float>(code[k] - offset);
          if (q < lo || (q - zero) * stored.scales[b] != x[k]) {
            return Disagree(name, n * K + k, K, x[k], "is no code of its group's scale");
          }
        }
      }
      return absl::OkStatus();
    });
    if (!st.ok()) return st;
    out.scales.assign(stored.scales.begin(), stored.scales.end());
    if (s.per_tensor) out.scales.resize(1);
    if (asym) {
      out.zeros.assign(stored.offsets.begin(), stored.offsets.end());
      if (s.per_tensor) out.zeros.resize(1);
    }
    return absl::OkStatus();
  }

  // Floating elements: x / d rounded to the element format, d the element's
  // multiplier (FP8: its scale; NVFP4: block scale times the tensor's).
  const bool nvfp4 = p.codes.kind == CodeLayout::Kind::kNvfp4;
  const int64_t width = s.group_cols, height = s.block_rows > 0 ? s.block_rows : 1;
  const int64_t col_blocks = (K + width - 1) / width;
  const size_t want = s.per_tensor ? static_cast<size_t>(N)
                                   : static_cast<size_t>((N + height - 1) / height * col_blocks);
  if (stored.scales.size() != want) {
    return absl::InternalError(
        absl::StrCat(name, ": ", stored.scales.size(), " scales kept for ", want));
  }
  absl::StatusOr<Format> element = FindFormat(p.codes.element);
  if (!element.ok()) return element.status();
  const float g = nvfp4 ? stored.tensor_scale : 1.0f;
  ConvertOptions saturate;
  saturate.overflow = Overflow::kSaturate;
  absl::Status st = ForRows(N, threads, [&](int64_t n0, int64_t n1) {
    thread_local std::vector<float> scaled, multiplier, decoded;
    thread_local std::vector<uint8_t> bytes;
    const size_t count = static_cast<size_t>((n1 - n0) * K);
    scaled.resize(count);
    multiplier.resize(count);
    decoded.resize(count);
    bytes.resize(StorageBytes(*element, count));
    for (int64_t n = n0; n < n1; ++n) {
      for (int64_t k = 0; k < K; ++k) {
        const size_t at = s.per_tensor ? static_cast<size_t>(n)
                                       : static_cast<size_t>((n / height) * col_blocks + k / width);
        const float d = stored.scales[at] * g;
        const float x = values[n * K + k];
        const size_t i = static_cast<size_t>((n - n0) * K + k);
        multiplier[i] = d;
        scaled[i] = d == 0 ? std::copysign(0.0f, x) : x / d;
      }
    }
    if (absl::Status e = EncodeArray(*element, scaled, bytes, saturate, {.threads = 1}); !e.ok()) {
      return e;
    }
    if (absl::Status e = DecodeArray(*element, bytes, decoded, {.threads = 1}); !e.ok()) return e;
    for (size_t i = 0; i < count; ++i) {
      const int64_t at = n0 * K + static_cast<int64_t>(i);
      if (decoded[i] * multiplier[i] != values[at]) {
        return Disagree(name, at, K, values[at], "is no code of its block's scale");
      }
      out.codes[at] = nvfp4 ? (bytes[i / 2] >> ((i % 2) * 4)) & 0xF : bytes[i];
    }
    return absl::OkStatus();
  });
  if (!st.ok()) return st;
  if (s.per_tensor) {
    out.scales = {stored.scales[0]};
  } else {
    out.scales.assign(stored.scales.begin(), stored.scales.end());
  }
  if (nvfp4) {
    const GlobalScale global = DividingGlobalScale(g, out.scales);
    out.global_scale = global.value;
    out.inexact_blocks = out.scales.size() - global.exact;
  }
  return absl::OkStatus();
}

class Exporter {
 public:
  Exporter(const Checkpoint& model, WeightVariant& variant, const CheckpointExportOptions& options,
           OutputDirectory& out)
      : model_(model), variant_(variant), options_(options), out_(out) {}

  absl::Status Plan(std::span<const WeightRule> rules, bool with_importance) {
    for (const RuleMatch& m : MatricesByRule(model_, rules, with_importance)) {
      absl::StatusOr<Planned> p = lowp::Plan(m, options_.format);
      if (!p.ok()) return p.status();
      if (absl::StatusOr<std::vector<PackPart>> parts = PackParts(p->spec); !parts.ok()) {
        return Refuse(m.matrix.name, *m.scheme, parts.status().message());
      }
      planned_.emplace(m.matrix.name, *std::move(p));
    }
    if (planned_.empty()) {
      return absl::InvalidArgumentError("weights: no rule quantizes a decoder matrix");
    }
    if (options_.format == CheckpointFormat::kGptq) {
      for (const TensorView& m : model_.MatrixShapes()) {
        // Routers stay float, as GPTQ checkpoints of MoE models keep them.
        if (DecoderLayerOf(m.name) < 0 || IsRouter(m.name)) continue;
        auto it = planned_.find(m.name);
        const Planned& first = planned_.begin()->second;
        if (it == planned_.end() || it->second.arguments != first.arguments) {
          return absl::InvalidArgumentError(absl::StrCat(
              "weights: GPTQ's config quantizes every decoder matrix alike, but ", m.name,
              it == planned_.end() ? " is left as it is"
                                   : absl::StrCat(" gets ", it->second.scheme->name()),
              " and ", planned_.begin()->first, " ", first.scheme->name(),
              " (write compressed-tensors for a mix)"));
        }
      }
    }
    return absl::OkStatus();
  }

  absl::Status Write() {
    // The tensors in the order they are written: those of no layer (the
    // embedding, the final norm, lm_head), then each layer's.
    std::vector<std::vector<const TensorView*>> by_layer(
        static_cast<size_t>(model_.config().num_layers) + 1);
    for (const TensorView& t : model_.set().tensors()) {
      const int64_t layer = DecoderLayerOf(t.name);
      if (layer >= model_.config().num_layers) {
        return absl::InvalidArgumentError(absl::StrCat(
            t.file, ": tensor \"", t.name, "\" names a layer the config does not have"));
      }
      if (t.dtype == DType::kGgml || t.scales != nullptr || t.packed != nullptr) {
        return absl::InvalidArgumentError(absl::StrCat("model: tensor \"", t.name, "\" of ", t.file,
                                                       " is ", t.type_name(),
                                                       ", which the output cannot copy"));
      }
      by_layer[static_cast<size_t>(layer + 1)].push_back(&t);
    }
    std::vector<SafetensorsWriter::Entry> entries;
    for (const auto& tensors : by_layer) {
      for (const TensorView* t : tensors) {
        auto it = planned_.find(t->name);
        if (it == planned_.end()) {
          entries.push_back({t->name, t->dtype, t->shape});
          continue;
        }
        const absl::StatusOr<std::vector<PackPart>> parts = PackParts(it->second.spec);
        for (const PackPart& part : *parts) {
          entries.push_back({ModuleOf(t->name) + part.suffix, part.dtype, part.shape});
        }
      }
    }
    absl::StatusOr<std::unique_ptr<SafetensorsWriter>> writer =
        SafetensorsWriter::Create(out_.Add("model.safetensors"), entries, options_.metadata);
    if (!writer.ok()) return writer.status();
    SafetensorsWriter& w = **writer;
    const int64_t layers = model_.config().num_layers;
    const size_t steps = static_cast<size_t>(layers) + 2;
    auto step = [&](const std::string& what) {
      if (options_.progress) options_.progress(steps, what);
    };
    step("the embedding, norms and lm_head");
    for (const TensorView* t : by_layer[0]) {
      if (absl::Status s = Copy(*t, w); !s.ok()) return s;
    }
    LayerStorage reference_storage, storage;
    storage.keep_stored = true;
    for (int64_t layer = 0; layer < layers; ++layer) {
      step(absl::StrCat("layer ", layer));
      absl::StatusOr<LayerWeights> reference =
          model_.ReadLayer(layer, reference_storage, options_.threads);
      if (!reference.ok()) return reference.status();
      absl::StatusOr<LayerWeights> made = variant_.Layer({.layer = layer,
                                                          .reference = *reference,
                                                          .storage = storage,
                                                          .threads = options_.threads,
                                                          .pass = {.first = true}});
      if (!made.ok()) return made.status();
      std::map<std::string, size_t> entry_of;
      std::vector<LayerWeights::Entry> matrices = made->Matrices(model_.config());
      for (size_t j = 0; j < matrices.size(); ++j) entry_of[matrices[j].matrix->name] = j;
      for (const TensorView* t : by_layer[static_cast<size_t>(layer + 1)]) {
        auto it = planned_.find(t->name);
        auto j = entry_of.find(t->name);
        if (it == planned_.end() || j == entry_of.end()) {
          if (absl::Status s = Copy(*t, w); !s.ok()) return s;
          continue;
        }
        const Matrix& m = *matrices[j->second].matrix;
        const StoredChunk empty;
        const StoredChunk& stored =
            j->second < storage.stored.size() ? storage.stored[j->second] : empty;
        if (absl::Status s = WriteMatrix(m, it->second, stored, w); !s.ok()) return s;
      }
    }
    step("config.json and the tokenizer");
    if (absl::Status s = w.Finish(); !s.ok()) return s;
    if (absl::Status s = WriteConfig(); !s.ok()) return s;
    return CopyFiles();
  }

 private:
  // A tensor copied as stored, its pages dropped as written (an embedding
  // of a GB stays out of the resident set).
  absl::Status Copy(const TensorView& t, SafetensorsWriter& w) const {
    constexpr size_t kPiece = size_t{64} << 20;
    for (size_t at = 0; at < t.bytes.size(); at += kPiece) {
      const std::span<const uint8_t> piece =
          t.bytes.subspan(at, std::min(kPiece, t.bytes.size() - at));
      if (absl::Status s = w.Write(piece); !s.ok()) return s;
      model_.set().Release(piece);
    }
    return absl::OkStatus();
  }

  absl::Status WriteMatrix(const Matrix& m, const Planned& p, const StoredChunk& stored,
                           SafetensorsWriter& w) {
    if (absl::Status s = CodesOf(m.name, p, m.values, stored, options_.threads, codes_); !s.ok()) {
      return s;
    }
    const Codes* codes = &codes_;
    if (p.codes.kind == CodeLayout::Kind::kNvfp4) {
      nvfp4_blocks_ += codes->scales.size();
      nvfp4_inexact_ += codes->inexact_blocks;
    }
    PackInput input;
    input.codes = codes->codes;
    input.scales = codes->scales;
    input.zeros = codes->zeros;
    input.g_idx = codes->g_idx;
    input.global_scale = codes->global_scale;
    absl::StatusOr<std::vector<std::vector<uint8_t>>> parts = Pack(p.spec, input);
    if (!parts.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("weights: ", p.scheme->name(), " (for ",
                                                     m.name, "): ", parts.status().message()));
    }
    for (const std::vector<uint8_t>& bytes : *parts) {
      if (absl::Status s = w.Write(bytes); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  absl::StatusOr<Json> ReadJson(const std::string& file) const {
    const std::string path = (std::filesystem::path(options_.model_dir) / file).string();
    absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxCopiedBytes);
    if (!text.ok()) return text.status();
    Json j = Json::parse(*text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": not a JSON object"));
    }
    return j;
  }

  // config.json as the model's, with its quantization_config.
  absl::Status WriteConfig() {
    absl::StatusOr<Json> config = ReadJson("config.json");
    if (!config.ok()) return config.status();
    Json q;
    if (options_.format == CheckpointFormat::kGptq) {
      const Json& a = planned_.begin()->second.arguments;
      q = {{"quant_method", "gptq"},    {"bits", a["bits"]},      {"group_size", a["group_size"]},
           {"desc_act", a["desc_act"]}, {"sym", a["sym"]},        {"checkpoint_format", "gptq"},
           {"damp_percent", 0.01},      {"static_groups", false}, {"true_sequential", true},
           {"lm_head", false},          {"quantizer", {"lowp"}}};
    } else {
      q = CompressedTensorsConfig();
    }
    (*config)["quantization_config"] = q;
    return WriteFile("config.json", config->dump(2) + "\n");
  }

  // One config group per distinct weights arguments, its targets the
  // modules it takes ("Linear" when one group takes every decoder linear
  // layer); ignore: every linear layer no group takes, lm_head included.
  Json CompressedTensorsConfig() const {
    std::vector<std::pair<const Planned*, std::vector<std::string>>> groups;
    std::vector<std::string> ignore;
    size_t decoder_matrices = 0;
    for (const TensorView& m : model_.MatrixShapes()) {
      const auto it = planned_.find(m.name);
      if (it == planned_.end()) {
        if (m.name != "model.embed_tokens.weight") ignore.push_back(ModuleOf(m.name));
        continue;
      }
      ++decoder_matrices;
      auto g = std::find_if(groups.begin(), groups.end(), [&](const auto& group) {
        return group.first->arguments == it->second.arguments &&
               group.first->format == it->second.format;
      });
      if (g == groups.end()) {
        groups.push_back({&it->second, {}});
        g = groups.end() - 1;
      }
      g->second.push_back(ModuleOf(m.name));
    }
    if (std::find(ignore.begin(), ignore.end(), "lm_head") == ignore.end()) {
      ignore.push_back("lm_head");  // tied: the embedding serves
    }
    const bool whole = groups.size() == 1 && ignore.size() <= 1;
    Json config_groups = Json::object();
    std::set<std::string> formats;
    for (size_t i = 0; i < groups.size(); ++i) {
      const Planned& p = *groups[i].first;
      formats.insert(p.format);
      config_groups[absl::StrCat("group_", i)] = {
          {"targets", whole ? Json::array({"Linear"}) : Json(groups[i].second)},
          {"weights", p.arguments},
          {"input_activations", nullptr},
          {"output_activations", nullptr},
          {"format", p.format}};
    }
    return {{"quant_method", "compressed-tensors"},
            {"format", formats.size() == 1 ? *formats.begin() : "mixed-precision"},
            {"quantization_status", "compressed"},
            {"config_groups", config_groups},
            {"ignore", ignore},
            {"kv_cache_scheme", nullptr}};
  }

  absl::Status WriteFile(const std::string& name, absl::string_view text) {
    absl::StatusOr<std::unique_ptr<OutputFile>> f = OutputFile::Create(out_.Add(name));
    if (!f.ok()) return f.status();
    if (absl::Status s = (*f)->Write(text); !s.ok()) return s;
    return (*f)->Commit();
  }

  // The tokenizer and generation files of the model directory (and a
  // llama2.c tokenizer, tok*.bin), copied as they are.
  absl::Status CopyFiles() {
    std::vector<std::string> names(std::begin(kCopied), std::end(kCopied));
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(options_.model_dir, ec)) {
      const std::string n = e.path().filename().string();
      if (absl::StartsWith(n, "tok") && absl::EndsWith(n, ".bin")) names.push_back(n);
    }
    for (const std::string& name : names) {
      const std::string path = (std::filesystem::path(options_.model_dir) / name).string();
      if (!std::filesystem::exists(path, ec)) continue;
      absl::StatusOr<std::string> text = ReadRegularFile(path, kMaxCopiedBytes);
      if (!text.ok()) return text.status();
      if (absl::Status s = WriteFile(name, *text); !s.ok()) return s;
    }
    return absl::OkStatus();
  }

  const Checkpoint& model_;
  WeightVariant& variant_;
  const CheckpointExportOptions& options_;
  OutputDirectory& out_;
  std::map<std::string, Planned> planned_;
  Codes codes_;  // the matrix being written's
  size_t nvfp4_blocks_ = 0, nvfp4_inexact_ = 0;

 public:
  std::vector<std::string> Notes() const {
    if (nvfp4_inexact_ == 0) return {};
    return {absl::StrCat(
        "NVFP4: ", nvfp4_inexact_, " of ", nvfp4_blocks_, " blocks (",
        absl::SixDigits(100.0 * static_cast<double>(nvfp4_inexact_) /
                        static_cast<double>(nvfp4_blocks_)),
        "%) read back one float32 rounding from the values measured: compressed-tensors divides "
        "each block scale by the global scale, lowp (as TransformerEngine) multiplies it by the "
        "inverse, and no float32 global scale makes the two agree on every block")};
  }
};

}  // namespace

absl::StatusOr<CheckpointFormat> ParseCheckpointFormat(absl::string_view name) {
  if (name == "compressed-tensors") return CheckpointFormat::kCompressedTensors;
  if (name == "gptq") return CheckpointFormat::kGptq;
  return absl::InvalidArgumentError(absl::StrCat("'", name, "': want compressed-tensors or gptq"));
}

const char* CheckpointFormatName(CheckpointFormat format) {
  return format == CheckpointFormat::kGptq ? "GPTQ" : "compressed-tensors";
}

absl::StatusOr<std::vector<std::string>> WriteQuantizedCheckpoint(
    const Checkpoint& model, WeightVariant& variant, std::span<const WeightRule> rules,
    bool with_importance, const CheckpointExportOptions& options, OutputDirectory& out) {
  Exporter exporter(model, variant, options, out);
  if (absl::Status s = exporter.Plan(rules, with_importance); !s.ok()) return s;
  if (absl::Status s = exporter.Write(); !s.ok()) return s;
  return exporter.Notes();
}

}  // namespace lowp
