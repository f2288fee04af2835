#include "io/packed_tensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "formats/format.h"
#include "formats/reference.h"

namespace lowp {
namespace {

// Sides of a Linear layer beyond this are refused, so that every product
// below (N * K, K * b) fits int64.
constexpr int64_t kMaxSide = int64_t{1} << 31;

// The AWQ GEMM interleave: column 8c + j of a word is field kAwqField[j].
constexpr int kAwqField[8] = {0, 4, 1, 5, 2, 6, 3, 7};

// OCP e2m1 (fp4) values by code: sign in bit 3.
constexpr float kE2m1[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                             -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

const Format& ScaleFormat(DType dtype) {
  static const Format fp16 = *FindFormat("fp16");
  static const Format bf16 = *FindFormat("bf16");
  static const Format e4m3 = *FindFormat("fp8_e4m3fn");
  switch (dtype) {
    case DType::kF16:
      return fp16;
    case DType::kBF16:
      return bf16;
    default:
      return e4m3;
  }
}

// Element `i` of a float part (F32, F16, BF16 or F8_E4M3), widened exactly.
float FloatAt(const PackedPart& part, size_t i) {
  switch (part.dtype) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, part.bytes.data() + 4 * i, 4);
      return v;
    }
    case DType::kF16:
    case DType::kBF16: {
      uint16_t code;
      std::memcpy(&code, part.bytes.data() + 2 * i, 2);
      return DecodeToFloat32(ScaleFormat(part.dtype), code);
    }
    default:
      return DecodeToFloat32(ScaleFormat(part.dtype), part.bytes[i]);
  }
}

uint32_t WordAt(const PackedPart& part, size_t i) {
  uint32_t w;
  std::memcpy(&w, part.bytes.data() + 4 * i, 4);
  return w;
}

int32_t Int32At(const PackedPart& part, size_t i) {
  int32_t v;
  std::memcpy(&v, part.bytes.data() + 4 * i, 4);
  return v;
}

// Field `index` of `bits` bits of a stream of words: the words at
// word(0), word(1), ... in order, value `index` at stream bit bits * index
// (it may straddle two words when 32 is not a multiple of bits).
template <typename WordOf>
uint32_t StreamField(int bits, int64_t index, const WordOf& word) {
  const int64_t bit = static_cast<int64_t>(bits) * index;
  const int64_t w = bit >> 5;
  const int shift = static_cast<int>(bit & 31);
  uint64_t v = word(w) >> shift;
  if (shift + bits > 32) v |= static_cast<uint64_t>(word(w + 1)) << (32 - shift);
  return static_cast<uint32_t>(v) & ((1u << bits) - 1);
}

int64_t CeilDiv(int64_t a, int64_t b) { return b <= 0 ? 0 : (a + b - 1) / b; }

PackedPart PartOf(const TensorView& t) { return {t.name, t.dtype, t.shape, t.bytes}; }

// The parts of one prefix found in the set, by suffix.
struct Found {
  std::map<std::string, const TensorView*> parts;  // suffix -> tensor
  const TensorView* Get(const std::string& suffix) const {
    auto it = parts.find(suffix);
    return it == parts.end() ? nullptr : it->second;
  }
};

// Builds one packed weight; errors name the file, the tensor and the config.
class Builder {
 public:
  Builder(const std::string& prefix, const Found& found, const CheckpointQuantization& q,
          const TensorView& codes)
      : prefix_(prefix), found_(found), q_(q), codes_(codes) {}

  absl::StatusOr<PackedWeight> Gptq() const;
  absl::StatusOr<PackedWeight> Awq() const;
  absl::StatusOr<PackedWeight> CompressedInt(const CompressedTensorsGroup& g) const;
  absl::StatusOr<PackedWeight> CompressedNvfp4(const CompressedTensorsGroup& g) const;

 private:
  absl::Status Fail(const TensorView& t, absl::string_view why) const {
    return absl::InvalidArgumentError(
        absl::StrCat(t.file, ": tensor \"", t.name, "\" ", ShapeText(t.shape), " (",
                     DTypeName(t.dtype), "), part of the packed weight \"", prefix_,
                     ".weight\": ", why));
  }
  // A part that must be there.
  absl::StatusOr<const TensorView*> Need(const std::string& suffix, absl::string_view why) const {
    const TensorView* t = found_.Get(suffix);
    if (t == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          codes_.file, ": tensor \"", codes_.name, "\" has no \"", prefix_, ".", suffix,
          "\" beside it, which ", why, " (", q_.source, ")"));
    }
    return t;
  }
  absl::Status Dtype(const TensorView& t, std::initializer_list<DType> allowed) const {
    for (DType d : allowed) {
      if (t.dtype == d) return absl::OkStatus();
    }
    std::vector<std::string> names;
    for (DType d : allowed) names.emplace_back(DTypeName(d));
    return Fail(t, absl::StrCat("must be ", absl::StrJoin(names, " or ")));
  }
  absl::Status Shape(const TensorView& t, const std::vector<int64_t>& want,
                     absl::string_view because) const {
    if (t.shape == want) return absl::OkStatus();
    return Fail(t, absl::StrCat("expected shape ", ShapeText(want), " from ", because));
  }
  absl::Status Sides(const TensorView& t) const {
    for (int64_t d : t.shape) {
      if (d > kMaxSide) return Fail(t, "a dimension exceeds 2^31");
    }
    return absl::OkStatus();
  }
  // Reads a g_idx part ([K] I32) into `w.g_idx` when it is not column order:
  // every entry in [0, groups), or all -1 (compressed-tensors' unset buffer).
  // Returns whether the order differs from k / group_cols.
  absl::StatusOr<bool> GroupIndex(const TensorView* t, PackedWeight& w,
                                  absl::string_view groups_from) const;

  const std::string& prefix_;
  const Found& found_;
  const CheckpointQuantization& q_;
  const TensorView& codes_;
};

absl::StatusOr<bool> Builder::GroupIndex(const TensorView* t, PackedWeight& w,
                                         absl::string_view groups_from) const {
  if (t == nullptr) return false;
  if (absl::Status s = Dtype(*t, {DType::kI32}); !s.ok()) return s;
  if (absl::Status s = Shape(*t, {w.cols}, absl::StrCat("\"", codes_.name, "\": one group per input column"));
      !s.ok()) {
    return s;
  }
  const PackedPart part = PartOf(*t);
  bool all_unset = w.cols > 0, monotone = true;
  for (int64_t k = 0; k < w.cols; ++k) {
    const int32_t g = Int32At(part, static_cast<size_t>(k));
    all_unset = all_unset && g == -1;
    if (g != -1 && (g < 0 || g >= w.groups)) {
      return Fail(*t, absl::StrCat("entry ", k, " is group ", g, ", but ", groups_from,
                                   " give ", w.groups, " groups"));
    }
    monotone = monotone && g == k / w.group_cols;
  }
  if (all_unset) {
    w.other.push_back(part);
    return false;
  }
  for (int64_t k = 0; k < w.cols; ++k) {
    if (Int32At(part, static_cast<size_t>(k)) == -1) {
      return Fail(*t, absl::StrCat("entry ", k, " is -1 but others are groups"));
    }
  }
  w.g_idx = part;
  return !monotone;
}

std::string GroupText(int64_t group_size) {
  return group_size < 0 ? "channel" : absl::StrCat("g", group_size);
}

absl::StatusOr<PackedWeight> Builder::Gptq() const {
  PackedWeight w;
  w.layout = PackedLayout::kGptq;
  w.bits = q_.bits;
  w.zero_plus_one = q_.checkpoint_format != "gptq_v2";
  const int b = q_.bits;
  const std::string config = absl::StrCat(q_.source, "'s quantization_config.bits ", b,
                                          " and group_size ", q_.group_size);
  if (absl::Status s = Dtype(codes_, {DType::kI32}); !s.ok()) return s;
  if (codes_.shape.size() != 2) return Fail(codes_, "must have two dimensions [K*bits/32, N]");
  if (absl::Status s = Sides(codes_); !s.ok()) return s;
  const int64_t words = codes_.shape[0];
  w.rows = codes_.shape[1];
  if (words * 32 % b != 0) {
    return Fail(codes_, absl::StrCat(words, " rows of words do not hold whole ", b,
                                     "-bit columns (", config, ")"));
  }
  w.cols = words * 32 / b;
  if (w.rows * b % 32 != 0) {
    return Fail(codes_, absl::StrCat(w.rows, " output columns do not pack into whole words of ",
                                     b, "-bit zeros (", config, ")"));
  }
  w.group_cols = q_.group_size < 0 ? std::max<int64_t>(1, w.cols) : q_.group_size;
  w.groups = CeilDiv(w.cols, w.group_cols);
  w.codes = PartOf(codes_);
  const std::string because = absl::StrCat("\"", codes_.name, "\" ", ShapeText(codes_.shape),
                                           " and ", config);
  absl::StatusOr<const TensorView*> zeros = Need("qzeros", "GPTQ's zero points are");
  if (!zeros.ok()) return zeros.status();
  if (absl::Status s = Dtype(**zeros, {DType::kI32}); !s.ok()) return s;
  if (absl::Status s = Shape(**zeros, {w.groups, w.rows * b / 32}, because); !s.ok()) return s;
  absl::StatusOr<const TensorView*> scales = Need("scales", "GPTQ's scales are");
  if (!scales.ok()) return scales.status();
  if (absl::Status s = Dtype(**scales, {DType::kF16, DType::kBF16, DType::kF32}); !s.ok()) {
    return s;
  }
  if (absl::Status s = Shape(**scales, {w.groups, w.rows}, because); !s.ok()) return s;
  w.zeros = PartOf(**zeros);
  w.scales = PartOf(**scales);
  const TensorView* g_idx = found_.Get("g_idx");
  if (g_idx == nullptr && q_.desc_act) {
    return absl::InvalidArgumentError(
        absl::StrCat(codes_.file, ": tensor \"", codes_.name, "\" has no \"", prefix_,
                     ".g_idx\" beside it, but ", q_.source,
                     "'s quantization_config.desc_act is true (act-order needs it)"));
  }
  absl::StatusOr<bool> act = GroupIndex(g_idx, w, because);
  if (!act.ok()) return act.status();
  w.type_name = absl::StrCat("gptq-int", b, "-", GroupText(q_.group_size), *act ? "-act" : "");
  return w;
}

absl::StatusOr<PackedWeight> Builder::Awq() const {
  PackedWeight w;
  w.layout = PackedLayout::kAwqGemm;
  w.bits = 4;
  const std::string config = absl::StrCat(q_.source, "'s quantization_config.bits 4 and group_size ",
                                          q_.group_size, " (version gemm)");
  if (absl::Status s = Dtype(codes_, {DType::kI32}); !s.ok()) return s;
  if (codes_.shape.size() != 2) return Fail(codes_, "must have two dimensions [K, N/8]");
  if (absl::Status s = Sides(codes_); !s.ok()) return s;
  w.cols = codes_.shape[0];
  w.rows = codes_.shape[1] * 8;
  w.group_cols = q_.group_size < 0 ? std::max<int64_t>(1, w.cols) : q_.group_size;
  w.groups = CeilDiv(w.cols, w.group_cols);
  w.codes = PartOf(codes_);
  const std::string because = absl::StrCat("\"", codes_.name, "\" ", ShapeText(codes_.shape),
                                           " and ", config);
  absl::StatusOr<const TensorView*> zeros = Need("qzeros", "AWQ's zero points are");
  if (!zeros.ok()) return zeros.status();
  if (absl::Status s = Dtype(**zeros, {DType::kI32}); !s.ok()) return s;
  if (absl::Status s = Shape(**zeros, {w.groups, codes_.shape[1]}, because); !s.ok()) return s;
  absl::StatusOr<const TensorView*> scales = Need("scales", "AWQ's scales are");
  if (!scales.ok()) return scales.status();
  if (absl::Status s = Dtype(**scales, {DType::kF16, DType::kBF16, DType::kF32}); !s.ok()) {
    return s;
  }
  if (absl::Status s = Shape(**scales, {w.groups, w.rows}, because); !s.ok()) return s;
  if (const TensorView* g_idx = found_.Get("g_idx"); g_idx != nullptr) {
    return Fail(*g_idx, absl::StrCat("AutoAWQ's GEMM layout has no g_idx (", q_.source,
                                     " declares quant_method \"awq\")"));
  }
  w.zeros = PartOf(**zeros);
  w.scales = PartOf(**scales);
  w.type_name = absl::StrCat("awq-int4-", GroupText(q_.group_size));
  return w;
}

// weight_shape: I64 or I32 [2] = [N, K].
absl::StatusOr<std::vector<int64_t>> ShapeValues(const TensorView& t) {
  std::vector<int64_t> v;
  if ((t.dtype != DType::kI64 && t.dtype != DType::kI32) || t.shape != std::vector<int64_t>{2}) {
    return v;
  }
  for (size_t i = 0; i < 2; ++i) {
    if (t.dtype == DType::kI64) {
      int64_t x;
      std::memcpy(&x, t.bytes.data() + 8 * i, 8);
      v.push_back(x);
    } else {
      int32_t x;
      std::memcpy(&x, t.bytes.data() + 4 * i, 4);
      v.push_back(x);
    }
  }
  return v;
}

absl::StatusOr<PackedWeight> Builder::CompressedInt(const CompressedTensorsGroup& g) const {
  PackedWeight w;
  w.layout = PackedLayout::kCompressedInt;
  const std::string field = absl::StrCat(q_.source, "'s quantization_config.config_groups.",
                                         g.name, ".weights");
  if (g.num_bits < 2 || g.num_bits > 8) {
    return Fail(codes_, absl::StrCat(field, ".num_bits is ", g.num_bits,
                                     g.num_bits == 0 ? " (missing)" : "",
                                     ": pack-quantized weights have 2 to 8 bits"));
  }
  if (!g.type.empty() && g.type != "int") {
    return Fail(codes_, absl::StrCat(field, ".type is \"", g.type,
                                     "\": pack-quantized weights are \"int\""));
  }
  const int b = g.num_bits;
  const int64_t pf = 32 / b;
  w.bits = b;
  std::string strategy = g.strategy;
  if (strategy.empty()) {
    strategy = g.group_size > 0 ? "group" : g.group_size < 0 ? "channel" : "tensor";
  }
  if (strategy != "group" && strategy != "channel" && strategy != "tensor") {
    return Fail(codes_, absl::StrCat(field, ".strategy is \"", strategy,
                                     "\": pack-quantized weights are read per group, channel or "
                                     "tensor"));
  }
  if (strategy == "group" && g.group_size <= 0) {
    return Fail(codes_, absl::StrCat(field, ".group_size is ", g.group_size,
                                     ": strategy group needs a positive group_size"));
  }
  if (absl::Status s = Dtype(codes_, {DType::kI32}); !s.ok()) return s;
  if (codes_.shape.size() != 2) return Fail(codes_, "must have two dimensions [N, ceil(K/pf)]");
  if (absl::Status s = Sides(codes_); !s.ok()) return s;
  absl::StatusOr<const TensorView*> shape_t = Need("weight_shape", "holds the weight's [N, K]");
  if (!shape_t.ok()) return shape_t.status();
  absl::StatusOr<std::vector<int64_t>> nk = ShapeValues(**shape_t);
  if (nk->size() != 2) return Fail(**shape_t, "must be I64 or I32 of shape [2] ([N, K])");
  if ((*nk)[0] < 0 || (*nk)[1] < 0 || (*nk)[0] > kMaxSide || (*nk)[1] > kMaxSide) {
    return Fail(**shape_t, absl::StrCat("holds ", ShapeText(*nk), ", not a weight's [N, K]"));
  }
  w.other.push_back(PartOf(**shape_t));
  w.rows = (*nk)[0];
  w.cols = (*nk)[1];
  if (codes_.shape != std::vector<int64_t>{w.rows, CeilDiv(w.cols, pf)}) {
    return Fail(codes_, absl::StrCat("does not hold a [", w.rows, ", ", w.cols, "] weight (\"",
                                     (*shape_t)->name, "\") in ", b, "-bit fields (", field,
                                     ".num_bits): expected ",
                                     ShapeText({w.rows, CeilDiv(w.cols, pf)})));
  }
  w.codes = PartOf(codes_);
  std::vector<int64_t> scale_shape;
  if (strategy == "group") {
    w.group_cols = g.group_size;
    w.groups = CeilDiv(w.cols, w.group_cols);
    scale_shape = {w.rows, w.groups};
  } else {
    w.group_cols = std::max<int64_t>(1, w.cols);
    w.groups = 1;
    w.per_tensor = strategy == "tensor";
    if (!w.per_tensor) scale_shape = {w.rows, 1};
  }
  const std::string because =
      absl::StrCat("\"", (*shape_t)->name, "\" ", ShapeText(*nk), " and ", field, " (strategy ",
                   strategy, strategy == "group" ? absl::StrCat(", group_size ", g.group_size) : "",
                   ")");
  absl::StatusOr<const TensorView*> scales = Need("weight_scale", "holds the scales");
  if (!scales.ok()) return scales.status();
  if (absl::Status s = Dtype(**scales, {DType::kBF16, DType::kF16, DType::kF32}); !s.ok()) {
    return s;
  }
  if (w.per_tensor) {
    if ((*scales)->elements() != 1 || (*scales)->shape.size() > 1) {
      return Fail(**scales, absl::StrCat("expected shape [1] or [] from ", because));
    }
  } else if (absl::Status s = Shape(**scales, scale_shape, because); !s.ok()) {
    return s;
  }
  w.scales = PartOf(**scales);
  const TensorView* zeros = found_.Get("weight_zero_point");
  if (g.symmetric && zeros != nullptr) {
    return Fail(*zeros, absl::StrCat(field, ".symmetric is true, which stores no zero points"));
  }
  if (!g.symmetric) {
    if (w.per_tensor) {
      return Fail(codes_, absl::StrCat(field, " is asymmetric per tensor, a layout lowp does not "
                                              "read (it reads asymmetric group and channel)"));
    }
    absl::StatusOr<const TensorView*> z =
        Need("weight_zero_point", absl::StrCat(field, ".symmetric false needs"));
    if (!z.ok()) return z.status();
    if (absl::Status s = Dtype(**z, {DType::kI32}); !s.ok()) return s;
    if (absl::Status s = Shape(**z, {CeilDiv(w.rows, pf), w.groups}, because); !s.ok()) return s;
    w.zeros = PartOf(**z);
  }
  bool act = false;
  if (const TensorView* g_idx = found_.Get("weight_g_idx"); g_idx != nullptr) {
    if (strategy != "group") {
      return Fail(*g_idx, absl::StrCat(field, ".strategy is ", strategy, ": no groups to index"));
    }
    absl::StatusOr<bool> a = GroupIndex(g_idx, w, because);
    if (!a.ok()) return a.status();
    act = *a;
  }
  w.type_name =
      absl::StrCat("ct-int", b, "-",
                   strategy == "group" ? absl::StrCat("g", g.group_size) : strategy,
                   g.symmetric ? "" : "-asym", act ? "-act" : "");
  return w;
}

absl::StatusOr<PackedWeight> Builder::CompressedNvfp4(const CompressedTensorsGroup& g) const {
  PackedWeight w;
  w.layout = PackedLayout::kCompressedNvfp4;
  w.bits = 4;
  const std::string field = absl::StrCat(q_.source, "'s quantization_config.config_groups.",
                                         g.name, ".weights");
  if (g.num_bits != 0 && g.num_bits != 4) {
    return Fail(codes_, absl::StrCat(field, ".num_bits is ", g.num_bits, ": NVFP4 has 4 bits"));
  }
  if (!g.type.empty() && g.type != "float") {
    return Fail(codes_, absl::StrCat(field, ".type is \"", g.type, "\": NVFP4 is \"float\""));
  }
  if (g.group_size != 0 && g.group_size != 16) {
    return Fail(codes_, absl::StrCat(field, ".group_size is ", g.group_size,
                                     ": NVFP4 has groups of 16"));
  }
  if (absl::Status s = Dtype(codes_, {DType::kU8}); !s.ok()) return s;
  if (codes_.shape.size() != 2) return Fail(codes_, "must have two dimensions [N, K/2]");
  if (absl::Status s = Sides(codes_); !s.ok()) return s;
  w.rows = codes_.shape[0];
  w.cols = codes_.shape[1] * 2;
  if (const TensorView* shape_t = found_.Get("weight_shape"); shape_t != nullptr) {
    absl::StatusOr<std::vector<int64_t>> nk = ShapeValues(*shape_t);
    if (nk->size() != 2) return Fail(*shape_t, "must be I64 or I32 of shape [2] ([N, K])");
    if (*nk != std::vector<int64_t>{w.rows, w.cols}) {
      return Fail(codes_, absl::StrCat("holds a [", w.rows, ", ", w.cols, "] weight, but \"",
                                       shape_t->name, "\" says ", ShapeText(*nk)));
    }
    w.other.push_back(PartOf(*shape_t));
  }
  w.group_cols = 16;
  w.groups = CeilDiv(w.cols, 16);
  w.codes = PartOf(codes_);
  const std::string because = absl::StrCat("\"", codes_.name, "\" ", ShapeText(codes_.shape),
                                           " and ", field, " (NVFP4, groups of 16)");
  absl::StatusOr<const TensorView*> scales = Need("weight_scale", "holds NVFP4's group scales");
  if (!scales.ok()) return scales.status();
  if (absl::Status s = Dtype(**scales, {DType::kF8E4M3}); !s.ok()) return s;
  if (absl::Status s = Shape(**scales, {w.rows, w.groups}, because); !s.ok()) return s;
  absl::StatusOr<const TensorView*> global =
      Need("weight_global_scale", "holds NVFP4's global scale");
  if (!global.ok()) return global.status();
  if (absl::Status s = Dtype(**global, {DType::kF32}); !s.ok()) return s;
  if ((*global)->elements() != 1 || (*global)->shape.size() > 1) {
    return Fail(**global, "expected shape [1] or []: one global scale");
  }
  // Each group scale is divided by it.
  if (const float g = FloatAt(PartOf(**global), 0); !(std::isfinite(g) && g > 0)) {
    return Fail(**global, absl::StrCat("holds ", g, "; a global scale must be finite and positive"));
  }
  if (const TensorView* z = found_.Get("weight_zero_point"); z != nullptr) {
    return Fail(*z, "NVFP4 has no zero points");
  }
  w.scales = PartOf(**scales);
  w.global_scale = PartOf(**global);
  w.type_name = "ct-nvfp4";
  return w;
}

constexpr const char* kGptqParts[] = {"qweight", "qzeros", "scales", "g_idx"};
constexpr const char* kCtParts[] = {"weight_packed",     "weight_scale",       "weight_zero_point",
                                    "weight_shape",      "weight_g_idx",       "weight_global_scale"};

bool CompressedFormatFits(const CompressedTensorsGroup& g, bool nvfp4) {
  if (!g.format.empty()) return g.format == (nvfp4 ? "nvfp4-pack-quantized" : "pack-quantized");
  return nvfp4 ? g.type == "float" && g.num_bits == 4 : g.type != "float";
}

}  // namespace

uint64_t PackedWeight::stored_bytes() const {
  uint64_t n = codes.bytes.size() + scales.bytes.size() + zeros.bytes.size() +
               g_idx.bytes.size() + global_scale.bytes.size();
  for (const PackedPart& p : other) n += p.bytes.size();
  return n;
}

absl::Status AttachPacked(std::vector<TensorView>& tensors,
                          const CheckpointQuantization& quantization) {
  const bool gptq = quantization.method == "gptq", awq = quantization.method == "awq";
  const bool ct = quantization.method == "compressed-tensors";
  if (!gptq && !awq && !ct) return absl::OkStatus();
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < tensors.size(); ++i) index.emplace(tensors[i].name, i);
  const absl::string_view codes_suffix = ct ? ".weight_packed" : ".qweight";
  std::vector<bool> consumed(tensors.size(), false);
  std::vector<std::pair<size_t, TensorView>> composed;  // at the codes' place
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorView& codes = tensors[i];
    if (!absl::EndsWith(codes.name, codes_suffix)) continue;
    const std::string prefix(codes.name.substr(0, codes.name.size() - codes_suffix.size()));
    Found found;
    std::vector<size_t> parts;
    for (const char* suffix : ct ? std::span<const char* const>(kCtParts)
                                 : std::span<const char* const>(kGptqParts)) {
      auto it = index.find(absl::StrCat(prefix, ".", suffix));
      if (it == index.end()) continue;
      found.parts[suffix] = &tensors[it->second];
      parts.push_back(it->second);
    }
    const std::string name = prefix + ".weight";
    if (index.count(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          codes.file, ": tensor \"", codes.name, "\" is a packed weight, but \"", name,
          "\" is there as well (", tensors[index[name]].file, "): which one is the weight is "
          "unclear"));
    }
    Builder builder(prefix, found, quantization, codes);
    absl::StatusOr<PackedWeight> weight;
    if (gptq) {
      weight = builder.Gptq();
    } else if (awq) {
      weight = builder.Awq();
    } else {
      if (std::find(quantization.ignore.begin(), quantization.ignore.end(), prefix) !=
          quantization.ignore.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            codes.file, ": tensor \"", codes.name, "\" is packed, but ", quantization.source,
            "'s quantization_config.ignore names \"", prefix, "\" (left unquantized)"));
      }
      const bool nvfp4 = codes.dtype == DType::kU8;
      std::vector<std::string> formats;
      std::vector<PackedWeight> fits;
      absl::Status first_error = absl::OkStatus();
      for (const CompressedTensorsGroup& g : quantization.groups) {
        formats.push_back(absl::StrCat(g.name, ": \"", g.format, "\""));
        if (!CompressedFormatFits(g, nvfp4)) continue;
        absl::StatusOr<PackedWeight> w =
            nvfp4 ? builder.CompressedNvfp4(g) : builder.CompressedInt(g);
        if (w.ok()) {
          fits.push_back(*std::move(w));
        } else if (first_error.ok()) {
          first_error = w.status();
        }
      }
      if (fits.empty()) {
        if (!first_error.ok()) return first_error;
        return absl::InvalidArgumentError(absl::StrCat(
            codes.file, ": tensor \"", codes.name, "\" (", DTypeName(codes.dtype),
            ") is packed, but no group of ", quantization.source,
            "'s quantization_config.config_groups has the format \"",
            nvfp4 ? "nvfp4-pack-quantized" : "pack-quantized", "\" (groups: ",
            formats.empty() ? "none" : absl::StrJoin(formats, ", "), "; top-level format \"",
            quantization.format, "\")"));
      }
      for (const PackedWeight& w : fits) {
        if (w.type_name != fits[0].type_name) {
          return absl::InvalidArgumentError(absl::StrCat(
              codes.file, ": tensor \"", codes.name, "\" fits several config groups of ",
              quantization.source, " that read it differently (", fits[0].type_name, ", ",
              w.type_name, ")"));
        }
      }
      weight = std::move(fits[0]);
    }
    if (!weight.ok()) return weight.status();
    TensorView view;
    view.name = name;
    view.dtype = DType::kPacked;
    view.shape = {weight->rows, weight->cols};
    view.bytes = codes.bytes;
    view.file = codes.file;
    view.packed = std::make_shared<const PackedWeight>(*std::move(weight));
    for (size_t p : parts) consumed[p] = true;
    composed.emplace_back(i, std::move(view));
  }
  if (composed.empty()) return absl::OkStatus();
  ReplaceParts(tensors, std::move(composed), consumed);
  return absl::OkStatus();
}

absl::Status AttachQuantizedParts(std::vector<TensorView>& tensors,
                                  const CheckpointQuantization& quantization) {
  if (absl::Status s = AttachPacked(tensors, quantization); !s.ok()) return s;
  if (absl::Status s = AttachMxfp4Blocks(tensors, quantization); !s.ok()) return s;
  return AttachScales(tensors, quantization);
}

absl::Status ReadPacked(const TensorView& tensor, int64_t first, std::span<float> out) {
  const int64_t total = tensor.elements();
  if (tensor.packed == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(tensor.file, ": tensor \"", tensor.name, "\" is not a packed weight"));
  }
  if (first < 0 || first > total || static_cast<uint64_t>(total - first) < out.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        tensor.file, ": tensor \"", tensor.name, "\": elements [", first, ", ",
        static_cast<uint64_t>(first) + out.size(), ") are outside its ", total, " elements"));
  }
  const PackedWeight& w = *tensor.packed;
  const int64_t N = w.rows, K = w.cols;
  const int b = w.bits;
  const uint32_t mask = (1u << b) - 1;
  const bool has_g_idx = w.g_idx.present();
  const auto group_of = [&](int64_t k) -> int64_t {
    return has_g_idx ? Int32At(w.g_idx, static_cast<size_t>(k)) : k / w.group_cols;
  };
  const float global =
      w.layout == PackedLayout::kCompressedNvfp4 ? FloatAt(w.global_scale, 0) : 1.0f;
  int64_t at = first;
  const int64_t end = first + static_cast<int64_t>(out.size());
  float* o = out.data();
  while (at < end) {
    const int64_t n = at / K, k0 = at % K;
    const int64_t k1 = std::min(K, k0 + (end - at));
    switch (w.layout) {
      case PackedLayout::kGptq: {
        // Column n of qweight [K*b/32, N]; row g of qzeros [groups, N*b/32].
        const int64_t zero_words = N * b / 32;
        for (int64_t k = k0; k < k1; ++k) {
          const uint32_t q = StreamField(b, k, [&](int64_t r) {
            return WordAt(w.codes, static_cast<size_t>(r * N + n));
          });
          const int64_t g = group_of(k);
          const uint32_t z = StreamField(b, n, [&](int64_t c) {
            return WordAt(w.zeros, static_cast<size_t>(g * zero_words + c));
          }) + (w.zero_plus_one ? 1 : 0);
          const float s = FloatAt(w.scales, static_cast<size_t>(g * N + n));
          *o++ = s * static_cast<float>(static_cast<int32_t>(q) - static_cast<int32_t>(z));
        }
        break;
      }
      case PackedLayout::kAwqGemm: {
        const int64_t words = N / 8, c = n / 8;
        const int shift = 4 * kAwqField[n % 8];
        for (int64_t k = k0; k < k1; ++k) {
          const uint32_t q = (WordAt(w.codes, static_cast<size_t>(k * words + c)) >> shift) & 15;
          const int64_t g = k / w.group_cols;
          const uint32_t z = (WordAt(w.zeros, static_cast<size_t>(g * words + c)) >> shift) & 15;
          const float s = FloatAt(w.scales, static_cast<size_t>(g * N + n));
          *o++ = static_cast<float>(static_cast<int32_t>(q) - static_cast<int32_t>(z)) * s;
        }
        break;
      }
      case PackedLayout::kCompressedInt: {
        const int64_t pf = 32 / b, words = CeilDiv(K, pf);
        const uint32_t offset = 1u << (b - 1);
        for (int64_t k = k0; k < k1; ++k) {
          const uint32_t q =
              (WordAt(w.codes, static_cast<size_t>(n * words + k / pf)) >> (b * (k % pf))) & mask;
          const int64_t g = w.groups == 1 ? 0 : group_of(k);
          uint32_t z = offset;
          if (w.zeros.present()) {
            z = (WordAt(w.zeros, static_cast<size_t>((n / pf) * w.groups + g)) >> (b * (n % pf))) &
                mask;
          }
          const float s =
              FloatAt(w.scales, w.per_tensor ? 0 : static_cast<size_t>(n * w.groups + g));
          *o++ = static_cast<float>(static_cast<int32_t>(q) - static_cast<int32_t>(z)) * s;
        }
        break;
      }
      case PackedLayout::kCompressedNvfp4: {
        const int64_t bytes = K / 2;
        for (int64_t k = k0; k < k1; ++k) {
          const uint8_t byte = w.codes.bytes[static_cast<size_t>(n * bytes + k / 2)];
          const float value = kE2m1[(byte >> (4 * (k % 2))) & 15];
          const float s = FloatAt(w.scales, static_cast<size_t>(n * w.groups + k / 16)) / global;
          *o++ = value * s;
        }
        break;
      }
    }
    at += k1 - k0;
  }
  return absl::OkStatus();
}

std::span<const uint8_t> PackedElementBytes(const PackedWeight& w, int64_t first, int64_t count) {
  const int64_t total = w.rows * w.cols;
  if (first < 0 || count <= 0 || first >= total) return {};
  const int64_t last = std::min(total, first + count) - 1;
  const std::span<const uint8_t> all = w.codes.bytes;
  uint64_t begin = 0, end = 0;
  switch (w.layout) {
    case PackedLayout::kGptq:
    case PackedLayout::kAwqGemm:
      return last == total - 1 ? all : std::span<const uint8_t>();
    case PackedLayout::kCompressedInt: {
      const int64_t pf = 32 / w.bits, words = CeilDiv(w.cols, pf);
      begin = 4 * static_cast<uint64_t>(first / w.cols * words + first % w.cols / pf);
      end = 4 * static_cast<uint64_t>(last / w.cols * words + last % w.cols / pf + 1);
      break;
    }
    case PackedLayout::kCompressedNvfp4:
      begin = static_cast<uint64_t>(first) / 2;
      end = static_cast<uint64_t>(last) / 2 + 1;
      break;
  }
  end = std::min<uint64_t>(end, all.size());
  begin = std::min(begin, end);
  return all.subspan(begin, end - begin);
}

}  // namespace lowp
