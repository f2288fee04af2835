// Packed quantized checkpoints as people download them (io/packed_tensors.h):
// small files written here by packers that follow each writer's own loops
// (AutoGPTQ's pack for 2, 3, 4 and 8 bits, v1 and v2 zeros, with and without
// an act-order g_idx; AutoAWQ's GEMM interleave; compressed-tensors'
// pack_to_int32 for weights along K and zero points along N, and NVFP4's
// nibble pairs), opened through TensorSet::Open with their config.json, and
// read back element by element against values computed here from the
// integers and scales; ranges at every misalignment; parts leaving the set;
// tensors that disagree with the config refused naming both.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <limits>
#include <string>
#include <vector>

#include <stdlib.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/packed_tensors.h"
#include "io/safetensors.h"
#include "io/tensor_set.h"
#include "tests/checkpoint_files.h"

namespace lowp {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

using testing::Bytes;
using testing::TempDir;
using testing::Tensor;

// A checkpoint: the tensors in model.safetensors, `quantization` as
// config.json's quantization_config.
class TestCheckpoint {
 public:
  void Add(Tensor t) { tensors_.push_back(std::move(t)); }
  absl::StatusOr<TensorSet> Open(const std::string& quantization) {
    const std::string path = dir_ / "model.safetensors";
    if (absl::Status s = testing::WriteSafetensors(path, tensors_); !s.ok()) return s;
    std::ofstream(dir_ / "config.json")
        << R"({"architectures": ["LlamaForCausalLM"], "quantization_config": )" << quantization
        << "}";
    return TensorSet::Open(path);
  }
  std::vector<Tensor>& tensors() { return tensors_; }
  Tensor* Find(const std::string& name) {
    for (Tensor& t : tensors_) {
      if (t.name == name) return &t;
    }
    return nullptr;
  }
  void Remove(const std::string& name) {
    std::erase_if(tensors_, [&](const Tensor& t) { return t.name == name; });
  }

 private:
  TempDir dir_;
  std::vector<Tensor> tensors_;
};

// Scales, as the test knows their values.
struct Scales {
  DType dtype;
  std::vector<float> values;
  std::vector<uint8_t> bytes;
};

// Random scales of `dtype`: F16 normal (and a few subnormal) codes, BF16
// codes, F32 values; the values from the codes by their definitions.
Scales MakeScales(DType dtype, size_t n, std::mt19937& rng) {
  Scales s{dtype, {}, {}};
  for (size_t i = 0; i < n; ++i) {
    if (dtype == DType::kF16) {
      const uint16_t mant = rng() % 1024;
      const int exp = i % 17 == 5 ? 0 : 3 + static_cast<int>(rng() % 14);  // 2^-12 .. 2^1
      const uint16_t code = static_cast<uint16_t>(exp << 10 | mant);
      s.values.push_back(exp == 0 ? std::ldexp(mant / 1024.0f, -14)
                                  : std::ldexp(1.0f + mant / 1024.0f, exp - 15));
      s.bytes.push_back(code & 0xFF);
      s.bytes.push_back(code >> 8);
    } else if (dtype == DType::kBF16) {
      const uint16_t code = static_cast<uint16_t>((118 + rng() % 12) << 7 | (rng() % 128));
      const uint32_t bits = uint32_t{code} << 16;
      float v;
      std::memcpy(&v, &bits, 4);
      s.values.push_back(v);
      s.bytes.push_back(code & 0xFF);
      s.bytes.push_back(code >> 8);
    } else {
      const float v = std::uniform_real_distribution<float>(1e-4f, 0.05f)(rng);
      s.values.push_back(v);
      uint8_t b[4];
      std::memcpy(b, &v, 4);
      s.bytes.insert(s.bytes.end(), b, b + 4);
    }
  }
  return s;
}

// AutoGPTQ's pack loop (qlinear_cuda.py::pack) over one run of values along
// the packed axis, written as that code writes it: 32 / b values a word for
// b = 2, 4, 8; for b = 3, 32 values in 3 words with values 10 and 21 split.
std::vector<uint32_t> GptqPackRun(const std::vector<uint32_t>& v, int bits) {
  std::vector<uint32_t> words(v.size() * bits / 32, 0);
  size_t i = 0, row = 0;
  if (bits != 3) {
    while (row < words.size()) {
      for (size_t j = i; j < i + 32 / bits; ++j) words[row] |= v[j] << (bits * (j - i));
      i += 32 / bits;
      ++row;
    }
    return words;
  }
  while (row < words.size()) {
    for (size_t j = i; j < i + 10; ++j) words[row] |= v[j] << (3 * (j - i));
    i += 10;
    words[row] |= v[i] << 30;
    ++row;
    words[row] |= (v[i] >> 2) & 1;
    ++i;
    for (size_t j = i; j < i + 10; ++j) words[row] |= v[j] << (3 * (j - i) + 1);
    i += 10;
    words[row] |= v[i] << 31;
    ++row;
    words[row] |= (v[i] >> 1) & 0x3;
    ++i;
    for (size_t j = i; j < i + 10; ++j) words[row] |= v[j] << (3 * (j - i) + 2);
    i += 10;
    ++row;
  }
  return words;
}

// The composed weight `name`, with its [N, K] shape, read whole.
std::vector<float> ReadWeight(const TensorSet& set, const std::string& name, int64_t n,
                              int64_t k) {
  for (const TensorView& t : set.tensors()) {
    if (t.name != name) continue;
    EXPECT_EQ(t.dtype, DType::kPacked);
    EXPECT_EQ(t.shape, (std::vector<int64_t>{n, k}));
    EXPECT_TRUE(IsFloating(t.dtype));
    std::vector<float> out(static_cast<size_t>(n * k));
    const absl::Status s = ReadAsFloat32(t, 0, out);
    EXPECT_TRUE(s.ok()) << s;
    return out;
  }
  ADD_FAILURE() << "no tensor " << name;
  return {};
}

const TensorView* Find(const TensorSet& set, const std::string& name) {
  for (const TensorView& t : set.tensors()) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

std::vector<std::string> Names(const TensorSet& set) {
  std::vector<std::string> names;
  for (const TensorView& t : set.tensors()) names.push_back(t.name);
  return names;
}

// Every element equal, bit for bit (-0 and +0 told apart).
void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &got[i], 4);
    std::memcpy(&b, &want[i], 4);
    if (a != b && ++bad <= 5) {
      ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0u);
}

// Reads [first, first + len) at many misaligned places and compares with the
// whole tensor read at once; the stored bytes are the parts' total.
void ExpectRangesAgree(const TensorView& t, const std::vector<float>& whole) {
  std::mt19937 rng(7);
  const int64_t total = t.elements();
  for (int i = 0; i < 60; ++i) {
    const int64_t first = static_cast<int64_t>(rng() % static_cast<uint32_t>(total));
    const int64_t len =
        std::min<int64_t>(total - first, 1 + static_cast<int64_t>(rng() % 300));
    std::vector<float> part(static_cast<size_t>(len));
    ASSERT_TRUE(ReadAsFloat32(t, first, part).ok());
    ExpectSameBits(part, std::vector<float>(whole.begin() + first, whole.begin() + first + len));
  }
  std::vector<float> past(2);
  EXPECT_FALSE(ReadAsFloat32(t, total - 1, past).ok());
  EXPECT_FALSE(ReadAsFloat32(t, -1, std::span<float>(past).first(1)).ok());
  const std::span<const uint8_t> all = ElementBytes(t, 0, total);
  EXPECT_EQ(all.data(), t.bytes.data());
  EXPECT_EQ(all.size(), t.bytes.size());
}

// ---------------------------------------------------------------- GPTQ

struct GptqCase {
  int bits;
  bool v2;
  bool sym;
  bool act_order;   // a permuted, non-monotone g_idx
  bool with_g_idx;  // g_idx present (trivial k / G when not act_order)
  int64_t group;    // -1: one group
  DType scale_dtype = DType::kF16;
};

std::string GptqConfig(const GptqCase& c) {
  return absl::StrCat(R"({"bits": )", c.bits, R"(, "group_size": )", c.group,
                      R"(, "damp_percent": 0.01, "desc_act": )", c.act_order ? "true" : "false",
                      R"(, "static_groups": false, "sym": )", c.sym ? "true" : "false",
                      R"(, "true_sequential": true, "quant_method": "gptq", "checkpoint_format": ")",
                      c.v2 ? "gptq_v2" : "gptq", R"("})");
}

// Writes layer "model.layers.0.mlp.down_proj" quantized by GPTQ's rules;
// returns the values it stands for, [N, K] row-major.
std::vector<float> WriteGptq(TestCheckpoint& ckpt, const GptqCase& c, int64_t n, int64_t k,
                             uint32_t seed) {
  std::mt19937 rng(seed);
  const int b = c.bits;
  const uint32_t maxq = (1u << b) - 1;
  const int64_t g_size = c.group < 0 ? k : c.group;
  const int64_t groups = (k + g_size - 1) / g_size;
  std::vector<int32_t> g_idx(static_cast<size_t>(k));
  std::vector<int64_t> perm(static_cast<size_t>(k));
  std::iota(perm.begin(), perm.end(), 0);
  if (c.act_order) std::shuffle(perm.begin(), perm.end(), rng);
  // GPTQ forms groups in the permuted order: column perm[i] is in group i / G.
  for (int64_t i = 0; i < k; ++i) g_idx[static_cast<size_t>(perm[i])] = static_cast<int32_t>(i / g_size);
  std::vector<uint32_t> q(static_cast<size_t>(k * n));  // [K, N], as intweight after .t()
  for (uint32_t& v : q) v = rng() % (maxq + 1);
  q[0] = 0;
  q[1] = maxq;
  std::vector<uint32_t> z(static_cast<size_t>(groups * n));  // [groups, N], the true zeros
  for (uint32_t& v : z) {
    // v1 cannot store a zero of 0 (it wrote -1 over its neighbours).
    v = c.sym ? (1u << (b - 1)) : (c.v2 ? rng() % (maxq + 1) : 1 + rng() % maxq);
  }
  if (!c.sym && c.v2) z[0] = 0;
  if (!c.sym) z[1] = maxq;
  const Scales s = MakeScales(c.scale_dtype, static_cast<size_t>(groups * n), rng);
  std::vector<float> want(static_cast<size_t>(n * k));
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t col = 0; col < k; ++col) {
      const int64_t g = g_idx[static_cast<size_t>(col)];
      const int diff = static_cast<int>(q[col * n + row]) - static_cast<int>(z[g * n + row]);
      want[row * k + col] = s.values[g * n + row] * static_cast<float>(diff);
    }
  }
  // qweight [K*b/32, N]: each column packed along K.
  const int64_t wrows = k * b / 32;
  std::vector<uint32_t> qweight(static_cast<size_t>(wrows * n));
  for (int64_t col = 0; col < n; ++col) {
    std::vector<uint32_t> run(static_cast<size_t>(k));
    for (int64_t i = 0; i < k; ++i) run[i] = q[i * n + col];
    const std::vector<uint32_t> words = GptqPackRun(run, b);
    for (int64_t r = 0; r < wrows; ++r) qweight[r * n + col] = words[r];
  }
  // qzeros [groups, N*b/32]: each row packed along N; v1 stores z - 1.
  const int64_t zcols = n * b / 32;
  std::vector<uint32_t> qzeros(static_cast<size_t>(groups * zcols));
  for (int64_t g = 0; g < groups; ++g) {
    std::vector<uint32_t> run(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) run[i] = z[g * n + i] - (c.v2 ? 0 : 1);
    const std::vector<uint32_t> words = GptqPackRun(run, b);
    for (int64_t w = 0; w < zcols; ++w) qzeros[g * zcols + w] = words[w];
  }
  const std::string p = "model.layers.0.mlp.down_proj";
  ckpt.Add({p + ".qweight", DType::kI32, {wrows, n}, Bytes(qweight)});
  ckpt.Add({p + ".qzeros", DType::kI32, {groups, zcols}, Bytes(qzeros)});
  ckpt.Add({p + ".scales", c.scale_dtype, {groups, n}, s.bytes});
  if (c.with_g_idx || c.act_order) ckpt.Add({p + ".g_idx", DType::kI32, {k}, Bytes(g_idx)});
  ckpt.Add({p + ".bias", DType::kF32, {n}, std::vector<uint8_t>(static_cast<size_t>(4 * n), 0)});
  return want;
}

TEST(PackedTensorsTest, GptqEveryBitsVersionAndOrder) {
  for (int bits : {2, 3, 4, 8}) {
    for (bool v2 : {false, true}) {
      for (bool sym : {true, false}) {
        for (int order = 0; order < 3; ++order) {  // no g_idx, trivial g_idx, act-order
          GptqCase c{bits, v2, sym, order == 2, order >= 1, 64};
          SCOPED_TRACE(GptqConfig(c));
          TestCheckpoint ckpt;
          const std::vector<float> want = WriteGptq(ckpt, c, 64, 256, 100 * bits + order);
          absl::StatusOr<TensorSet> set = ckpt.Open(GptqConfig(c));
          ASSERT_TRUE(set.ok()) << set.status();
          const std::string name = "model.layers.0.mlp.down_proj.weight";
          EXPECT_THAT(Names(*set), ::testing::UnorderedElementsAre(
                                       name, "model.layers.0.mlp.down_proj.bias"));
          ExpectSameBits(ReadWeight(*set, name, 64, 256), want);
          const TensorView& t = *Find(*set, name);
          EXPECT_EQ(t.type_name(),
                    absl::StrCat("gptq-int", bits, "-g64", order == 2 ? "-act" : ""));
          uint64_t parts = 0;
          for (const Tensor& x : ckpt.tensors()) {
            if (!absl::EndsWith(x.name, ".bias")) parts += x.bytes.size();
          }
          EXPECT_EQ(t.stored_bytes(), parts);
          ExpectRangesAgree(t, want);
          // Transposed: nothing to release before the last row.
          EXPECT_TRUE(ElementBytes(t, 0, 256).empty());
        }
      }
    }
  }
}

TEST(PackedTensorsTest, GptqOneGroupAndOtherScaleTypes) {
  for (DType scale : {DType::kBF16, DType::kF32}) {
    GptqCase c{4, false, false, false, true, -1, scale};
    TestCheckpoint ckpt;
    const std::vector<float> want = WriteGptq(ckpt, c, 32, 128, 9);
    absl::StatusOr<TensorSet> set = ckpt.Open(GptqConfig(c));
    ASSERT_TRUE(set.ok()) << set.status();
    ExpectSameBits(ReadWeight(*set, "model.layers.0.mlp.down_proj.weight", 32, 128), want);
    EXPECT_EQ(Find(*set, "model.layers.0.mlp.down_proj.weight")->type_name(),
              "gptq-int4-channel");
  }
}

// ---------------------------------------------------------------- AWQ

// AutoAWQ's WQLinear_GEMM.from_linear packing of intweight [K, N] along N.
std::vector<uint32_t> AwqPack(const std::vector<uint32_t>& v, int64_t rows, int64_t n) {
  constexpr int kOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};
  std::vector<uint32_t> out(static_cast<size_t>(rows * n / 8), 0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t col = 0; col < n / 8; ++col) {
      for (int i = 0; i < 8; ++i) {
        out[r * (n / 8) + col] |= v[r * n + col * 8 + kOrder[i]] << (i * 4);
      }
    }
  }
  return out;
}

constexpr char kAwqConfig[] =
    R"({"quant_method": "awq", "zero_point": true, "group_size": 32, "bits": 4,
        "version": "gemm", "modules_to_not_convert": null})";

std::vector<float> WriteAwq(TestCheckpoint& ckpt, int64_t n, int64_t k, int64_t group) {
  std::mt19937 rng(5);
  const int64_t groups = k / group;
  std::vector<uint32_t> q(static_cast<size_t>(k * n)), z(static_cast<size_t>(groups * n));
  for (uint32_t& v : q) v = rng() % 16;
  for (uint32_t& v : z) v = rng() % 16;
  const Scales s = MakeScales(DType::kF16, static_cast<size_t>(groups * n), rng);
  std::vector<float> want(static_cast<size_t>(n * k));
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t col = 0; col < k; ++col) {
      const int64_t g = col / group;
      want[row * k + col] =
          static_cast<float>(static_cast<int>(q[col * n + row]) - static_cast<int>(z[g * n + row])) *
          s.values[g * n + row];
    }
  }
  const std::string p = "model.layers.1.self_attn.q_proj";
  ckpt.Add({p + ".qweight", DType::kI32, {k, n / 8}, Bytes(AwqPack(q, k, n))});
  ckpt.Add({p + ".qzeros", DType::kI32, {groups, n / 8}, Bytes(AwqPack(z, groups, n))});
  ckpt.Add({p + ".scales", DType::kF16, {groups, n}, s.bytes});
  return want;
}

TEST(PackedTensorsTest, AwqGemm) {
  TestCheckpoint ckpt;
  const std::vector<float> want = WriteAwq(ckpt, 48, 128, 32);
  absl::StatusOr<TensorSet> set = ckpt.Open(kAwqConfig);
  ASSERT_TRUE(set.ok()) << set.status();
  const std::string name = "model.layers.1.self_attn.q_proj.weight";
  EXPECT_THAT(Names(*set), ::testing::ElementsAre(name));
  ExpectSameBits(ReadWeight(*set, name, 48, 128), want);
  EXPECT_EQ(Find(*set, name)->type_name(), "awq-int4-g32");
  ExpectRangesAgree(*Find(*set, name), want);
}

// ---------------------------------------------------------- compressed-tensors

// compressed-tensors' pack_to_int32 along the last axis of [rows, cols]
// signed values: value + 2^(b-1) as a byte, columns padded with 0 to a
// multiple of 32 // b, field i of word c = column c * pf + i.
std::vector<uint32_t> CtPackRows(const std::vector<int32_t>& v, int64_t rows, int64_t cols,
                                 int bits) {
  const int64_t pf = 32 / bits, words = (cols + pf - 1) / pf;
  std::vector<uint32_t> out(static_cast<size_t>(rows * words), 0);
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < words * pf; ++c) {
      const uint32_t u = c < cols ? static_cast<uint8_t>(v[r * cols + c] + (1 << (bits - 1))) : 0;
      out[r * words + c / pf] += u << (bits * (c % pf));
    }
  }
  return out;
}

// The same along the first axis (packed_dim=0, zero points): [ceil(rows/pf), cols].
std::vector<uint32_t> CtPackColumns(const std::vector<int32_t>& v, int64_t rows, int64_t cols,
                                    int bits) {
  std::vector<int32_t> t(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = v[r * cols + c];
  }
  const std::vector<uint32_t> packed = CtPackRows(t, cols, rows, bits);  // [cols, words]
  const int64_t pf = 32 / bits, words = (rows + pf - 1) / pf;
  std::vector<uint32_t> out(static_cast<size_t>(words * cols));
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t w = 0; w < words; ++w) out[w * cols + c] = packed[c * words + w];
  }
  return out;
}

struct CtCase {
  int bits;
  std::string strategy;  // group, channel, tensor
  int64_t group;
  bool symmetric;
  bool g_idx;
  int64_t n, k;
  DType shape_dtype = DType::kI64;
};

std::string CtConfig(const CtCase& c) {
  return absl::StrCat(
      R"({"config_groups": {"group_0": {"format": "pack-quantized", "input_activations": null,
          "output_activations": null, "targets": ["Linear"], "weights": {"actorder": )",
      c.g_idx ? R"("group")" : "null",
      R"(, "block_structure": null, "dynamic": false, "group_size": )",
      c.strategy == "group" ? absl::StrCat(c.group) : "null",
      R"(, "num_bits": )", c.bits, R"(, "observer": "minmax", "observer_kwargs": {},
          "strategy": ")", c.strategy, R"(", "symmetric": )", c.symmetric ? "true" : "false",
      R"(, "type": "int"}}}, "format": "pack-quantized", "global_compression_ratio": null,
        "ignore": ["lm_head"], "kv_cache_scheme": null, "quant_method": "compressed-tensors",
        "quantization_status": "compressed", "sparsity_config": {}, "transform_config": {},
        "version": "0.12.2"})");
}

std::vector<float> WriteCt(TestCheckpoint& ckpt, const CtCase& c, uint32_t seed) {
  std::mt19937 rng(seed);
  const int b = c.bits;
  const int lo = -(1 << (b - 1)), hi = (1 << (b - 1)) - 1;
  const int64_t n = c.n, k = c.k;
  const int64_t groups = c.strategy == "group" ? (k + c.group - 1) / c.group : 1;
  std::vector<int32_t> g_idx(static_cast<size_t>(k));
  std::vector<int64_t> perm(static_cast<size_t>(k));
  std::iota(perm.begin(), perm.end(), 0);
  if (c.g_idx) std::shuffle(perm.begin(), perm.end(), rng);
  for (int64_t i = 0; i < k; ++i) {
    g_idx[static_cast<size_t>(perm[i])] =
        c.strategy == "group" ? static_cast<int32_t>(i / c.group) : 0;
  }
  std::vector<int32_t> q(static_cast<size_t>(n * k)), zp(static_cast<size_t>(n * groups), 0);
  for (int32_t& v : q) v = lo + static_cast<int32_t>(rng() % (hi - lo + 1));
  q[0] = lo;
  q[1] = hi;
  if (!c.symmetric) {
    for (int32_t& v : zp) v = lo + static_cast<int32_t>(rng() % (hi - lo + 1));
    zp[0] = lo;
  }
  const size_t scale_count = c.strategy == "tensor" ? 1 : static_cast<size_t>(n * groups);
  const Scales s = MakeScales(DType::kBF16, scale_count, rng);
  std::vector<float> want(static_cast<size_t>(n * k));
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t col = 0; col < k; ++col) {
      const int64_t g = g_idx[static_cast<size_t>(col)];
      const float scale = c.strategy == "tensor" ? s.values[0] : s.values[row * groups + g];
      want[row * k + col] =
          static_cast<float>(q[row * k + col] - zp[row * groups + g]) * scale;
    }
  }
  const std::string p = "model.layers.2.mlp.up_proj";
  const int64_t pf = 32 / b;
  ckpt.Add({p + ".weight_packed", DType::kI32, {n, (k + pf - 1) / pf},
            Bytes(CtPackRows(q, n, k, b))});
  std::vector<int64_t> scale_shape = {n, groups};
  if (c.strategy == "tensor") scale_shape = {1};
  ckpt.Add({p + ".weight_scale", DType::kBF16, scale_shape, s.bytes});
  if (!c.symmetric) {
    ckpt.Add({p + ".weight_zero_point", DType::kI32, {(n + pf - 1) / pf, groups},
              Bytes(CtPackColumns(zp, n, groups, b))});
  }
  if (c.shape_dtype == DType::kI64) {
    ckpt.Add({p + ".weight_shape", DType::kI64, {2}, Bytes(std::vector<int64_t>{n, k})});
  } else {
    ckpt.Add({p + ".weight_shape", DType::kI32, {2},
              Bytes(std::vector<int32_t>{static_cast<int32_t>(n), static_cast<int32_t>(k)})});
  }
  if (c.g_idx) ckpt.Add({p + ".weight_g_idx", DType::kI32, {k}, Bytes(g_idx)});
  ckpt.Add({"lm_head.weight", DType::kF32, {2, 3}, std::vector<uint8_t>(24, 0)});
  return want;
}

TEST(PackedTensorsTest, CompressedTensorsPackQuantized) {
  const std::vector<std::pair<CtCase, std::string>> cases = {
      // K = 196: the last word of each row padded; the last group short.
      {{4, "group", 64, true, false, 48, 196}, "ct-int4-g64"},
      // N = 20: the zero points' last word padded.
      {{4, "group", 32, false, false, 20, 128}, "ct-int4-g32-asym"},
      {{8, "channel", 0, true, false, 16, 100, DType::kI32}, "ct-int8-channel"},
      {{8, "channel", 0, false, false, 12, 64}, "ct-int8-channel-asym"},
      {{4, "group", 32, true, true, 24, 128}, "ct-int4-g32-act"},
      {{4, "group", 16, false, true, 10, 64}, "ct-int4-g16-asym-act"},
      {{4, "tensor", 0, true, false, 8, 40}, "ct-int4-tensor"},
      // 3 bits: 10 a word, 2 bits unused (unlike GPTQ's 3-bit stream).
      {{3, "group", 32, true, false, 8, 70}, "ct-int3-g32"},
  };
  uint32_t seed = 1;
  for (const auto& [c, type] : cases) {
    SCOPED_TRACE(type);
    TestCheckpoint ckpt;
    const std::vector<float> want = WriteCt(ckpt, c, seed++);
    absl::StatusOr<TensorSet> set = ckpt.Open(CtConfig(c));
    ASSERT_TRUE(set.ok()) << set.status();
    const std::string name = "model.layers.2.mlp.up_proj.weight";
    EXPECT_THAT(Names(*set), ::testing::UnorderedElementsAre(name, "lm_head.weight"));
    ExpectSameBits(ReadWeight(*set, name, c.n, c.k), want);
    const TensorView& t = *Find(*set, name);
    EXPECT_EQ(t.type_name(), type);
    uint64_t parts = 0;
    for (const Tensor& x : ckpt.tensors()) {
      if (x.name != "lm_head.weight") parts += x.bytes.size();
    }
    EXPECT_EQ(t.stored_bytes(), parts);
    ExpectRangesAgree(t, want);
    // Row-major: a row's words, no more.
    const int64_t words = (c.k + 32 / c.bits - 1) / (32 / c.bits);
    const std::span<const uint8_t> row1 = ElementBytes(t, c.k, c.k);
    EXPECT_EQ(row1.data(), t.bytes.data() + 4 * words);
    EXPECT_EQ(row1.size(), static_cast<size_t>(4 * words));
  }
}

// An all -1 weight_g_idx (compressed-tensors' unset buffer) is column order.
TEST(PackedTensorsTest, CompressedTensorsUnsetGroupIndex) {
  CtCase c{4, "group", 32, true, false, 8, 64};
  TestCheckpoint ckpt;
  const std::vector<float> want = WriteCt(ckpt, c, 3);
  ckpt.Add({"model.layers.2.mlp.up_proj.weight_g_idx", DType::kI32, {64},
            Bytes(std::vector<int32_t>(64, -1))});
  absl::StatusOr<TensorSet> set = ckpt.Open(CtConfig(c));
  ASSERT_TRUE(set.ok()) << set.status();
  ExpectSameBits(ReadWeight(*set, "model.layers.2.mlp.up_proj.weight", 8, 64), want);
  EXPECT_EQ(Find(*set, "model.layers.2.mlp.up_proj.weight")->type_name(), "ct-int4-g32");
}

// OCP e4m3fn by its definition: bias 7, subnormals below exponent 1.
float E4m3(uint8_t code) {
  const int sign = code >> 7, exp = (code >> 3) & 15, mant = code & 7;
  const float v = exp == 0 ? std::ldexp(mant / 8.0f, -6) : std::ldexp(1.0f + mant / 8.0f, exp - 7);
  return sign ? -v : v;
}

constexpr char kNvfp4Config[] =
    R"({"config_groups": {"group_0": {"format": "nvfp4-pack-quantized", "targets": ["Linear"],
        "weights": {"actorder": null, "block_structure": null, "dynamic": false,
        "group_size": 16, "num_bits": 4, "observer": "static_minmax", "observer_kwargs": {},
        "strategy": "tensor_group", "symmetric": true, "type": "float"},
        "input_activations": {"dynamic": "local", "group_size": 16, "num_bits": 4,
        "strategy": "tensor_group", "symmetric": true, "type": "float"}}},
        "format": "nvfp4-pack-quantized", "ignore": ["lm_head"],
        "quant_method": "compressed-tensors", "quantization_status": "compressed"})";

std::vector<float> WriteNvfp4(TestCheckpoint& ckpt, int64_t n, int64_t k) {
  constexpr float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  std::mt19937 rng(11);
  std::vector<uint8_t> codes(static_cast<size_t>(n * k));
  for (uint8_t& c : codes) c = rng() % 16;
  codes[0] = 8;  // -0
  std::vector<uint8_t> scales(static_cast<size_t>(n * (k / 16)));
  for (uint8_t& s : scales) s = static_cast<uint8_t>(rng() % 0x7F);  // positive, never NaN
  scales[1] = 0x01;  // a subnormal scale
  const float global = 448.0f * 6.0f / 0.37f;
  std::vector<float> want(codes.size());
  for (int64_t row = 0; row < n; ++row) {
    for (int64_t col = 0; col < k; ++col) {
      const uint8_t code = codes[row * k + col];
      const float v = (code & 8 ? -1.0f : 1.0f) * kE2m1[code & 7];
      const float s = E4m3(scales[row * (k / 16) + col / 16]) / global;
      want[row * k + col] = v * s;
    }
  }
  std::vector<uint8_t> packed(codes.size() / 2);
  for (size_t j = 0; j < packed.size(); ++j) {
    packed[j] = static_cast<uint8_t>(codes[2 * j] | codes[2 * j + 1] << 4);
  }
  const std::string p = "model.layers.3.self_attn.o_proj";
  ckpt.Add({p + ".weight_packed", DType::kU8, {n, k / 2}, packed});
  ckpt.Add({p + ".weight_scale", DType::kF8E4M3, {n, k / 16}, scales});
  ckpt.Add({p + ".weight_global_scale", DType::kF32, {1}, Bytes(std::vector<float>{global})});
  ckpt.Add({p + ".input_global_scale", DType::kF32, {1}, Bytes(std::vector<float>{100.0f})});
  return want;
}

TEST(PackedTensorsTest, CompressedTensorsNvfp4) {
  TestCheckpoint ckpt;
  const std::vector<float> want = WriteNvfp4(ckpt, 6, 96);
  absl::StatusOr<TensorSet> set = ckpt.Open(kNvfp4Config);
  ASSERT_TRUE(set.ok()) << set.status();
  const std::string name = "model.layers.3.self_attn.o_proj.weight";
  EXPECT_THAT(Names(*set), ::testing::UnorderedElementsAre(
                               name, "model.layers.3.self_attn.o_proj.input_global_scale"));
  ExpectSameBits(ReadWeight(*set, name, 6, 96), want);
  const TensorView& t = *Find(*set, name);
  EXPECT_EQ(t.type_name(), "ct-nvfp4");
  EXPECT_EQ(t.stored_bytes(), 6u * 48 + 6 * 6 + 4);
  ExpectRangesAgree(t, want);
  const std::span<const uint8_t> tail = ElementBytes(t, 95, 3);  // [95, 98): bytes 47..48
  EXPECT_EQ(tail.data(), t.bytes.data() + 47);
  EXPECT_EQ(tail.size(), 2u);
}

// ---------------------------------------------------------------- refusals

// Open must fail with a message holding every one of `parts`.
void ExpectRefused(TestCheckpoint& ckpt, const std::string& config,
                   const std::vector<std::string>& parts) {
  absl::StatusOr<TensorSet> set = ckpt.Open(config);
  ASSERT_FALSE(set.ok());
  EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
  for (const std::string& p : parts) EXPECT_THAT(set.status().message(), HasSubstr(p));
}

TEST(PackedTensorsTest, GptqBitsDisagreeWithPacking) {
  // Packed at 8 bits, config says 4: qzeros [groups, N/4] where 4 bits need N/8.
  GptqCase c{8, false, true, false, false, 64};
  TestCheckpoint ckpt;
  WriteGptq(ckpt, c, 64, 256, 1);
  GptqCase said = c;
  said.bits = 4;
  ExpectRefused(ckpt, GptqConfig(said),
                {"model.safetensors", "down_proj.qzeros", "down_proj.qweight", "config.json",
                 "bits 4", "expected shape [8, 8]"});
}

TEST(PackedTensorsTest, GptqScaleRowsDisagreeWithGroupSize) {
  GptqCase c{4, true, false, false, false, 64};
  TestCheckpoint ckpt;
  WriteGptq(ckpt, c, 32, 256, 2);
  GptqCase said = c;
  said.group = 128;  // the file has 4 groups of 64
  ExpectRefused(ckpt, GptqConfig(said),
                {"down_proj.qzeros", "config.json", "group_size 128", "expected shape [2, 4]"});
}

TEST(PackedTensorsTest, GptqMissingPartsAndBadGroupIndex) {
  GptqCase c{4, false, true, false, true, 64};
  {
    TestCheckpoint ckpt;
    WriteGptq(ckpt, c, 32, 128, 3);
    ckpt.Remove("model.layers.0.mlp.down_proj.qzeros");
    ExpectRefused(ckpt, GptqConfig(c), {"down_proj.qweight", "down_proj.qzeros", "config.json"});
  }
  {
    TestCheckpoint ckpt;
    WriteGptq(ckpt, c, 32, 128, 3);
    ckpt.Remove("model.layers.0.mlp.down_proj.scales");
    ExpectRefused(ckpt, GptqConfig(c), {"down_proj.qweight", "down_proj.scales"});
  }
  {
    TestCheckpoint ckpt;
    WriteGptq(ckpt, c, 32, 128, 3);
    Tensor* g = ckpt.Find("model.layers.0.mlp.down_proj.g_idx");
    const int32_t bad = 2;  // 128 / 64 = 2 groups: 0 and 1
    std::memcpy(g->bytes.data() + 4 * 17, &bad, 4);
    ExpectRefused(ckpt, GptqConfig(c), {"down_proj.g_idx", "entry 17 is group 2", "2 groups"});
  }
  {
    TestCheckpoint ckpt;  // desc_act without g_idx
    GptqCase no_idx{4, false, true, false, false, 64};
    WriteGptq(ckpt, no_idx, 32, 128, 3);
    GptqCase said = no_idx;
    said.act_order = true;
    ExpectRefused(ckpt, GptqConfig(said), {"down_proj.g_idx", "desc_act"});
  }
  {
    TestCheckpoint ckpt;  // the weight twice
    WriteGptq(ckpt, c, 32, 128, 3);
    ckpt.Add({"model.layers.0.mlp.down_proj.weight", DType::kF32, {1}, {0, 0, 0, 0}});
    ExpectRefused(ckpt, GptqConfig(c), {"down_proj.qweight", "down_proj.weight\" is there"});
  }
}

TEST(PackedTensorsTest, ConfigFieldsRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> configs = {
      {R"({"quant_method": "gptq", "bits": 5, "group_size": 128})", "quantization_config.bits 5"},
      {R"({"quant_method": "gptq", "group_size": 128})", "quantization_config.bits is missing"},
      {R"({"quant_method": "gptq", "bits": "4", "group_size": 128})", "quantization_config.bits"},
      {R"({"quant_method": "gptq", "bits": 4, "group_size": 0})", "quantization_config.group_size"},
      {R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "checkpoint_format": "marlin"})",
       "quantization_config.checkpoint_format \"marlin\""},
      {R"({"quant_method": "gptq", "bits": 4, "w_bit": 8, "group_size": 128})",
       "quantization_config.bits 4 disagrees with quantization_config.w_bit 8"},
      {R"({"quant_method": "gptq", "bits": 4, "group_size": 128, "pack_dtype": "int16"})",
       "quantization_config.pack_dtype"},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true,
           "version": "gemv"})",
       "quantization_config.version \"gemv\""},
      {R"({"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": true,
           "version": "gemv_fast"})",
       "quantization_config.version \"gemv_fast\""},
      {R"({"quant_method": "awq", "bits": 8, "group_size": 128, "version": "gemm"})",
       "quantization_config.bits 8"},
      {R"({"quant_method": "compressed-tensors", "config_groups": {"g": {"weights":
           {"num_bits": 4.5}}}})",
       "quantization_config.config_groups.g.weights.num_bits"},
      {R"({"quant_method": "compressed-tensors", "ignore": "lm_head"})",
       "quantization_config.ignore"},
  };
  for (const auto& [config, message] : configs) {
    SCOPED_TRACE(config);
    TestCheckpoint ckpt;
    ckpt.Add({"x", DType::kF32, {1}, {0, 0, 0, 0}});
    ExpectRefused(ckpt, config, {"config.json", message});
  }
}

TEST(PackedTensorsTest, AwqDisagreements) {
  {
    TestCheckpoint ckpt;
    WriteAwq(ckpt, 32, 128, 32);
    ExpectRefused(ckpt, R"({"quant_method": "awq", "zero_point": true, "group_size": 64,
                            "bits": 4, "version": "GEMM"})",
                  {"q_proj.qzeros", "group_size 64", "config.json", "expected shape [2, 4]"});
  }
  {
    TestCheckpoint ckpt;
    WriteAwq(ckpt, 32, 128, 32);
    ckpt.Remove("model.layers.1.self_attn.q_proj.qzeros");
    ExpectRefused(ckpt, kAwqConfig, {"q_proj.qweight", "q_proj.qzeros"});
  }
}

TEST(PackedTensorsTest, CompressedTensorsDisagreements) {
  const CtCase c{4, "group", 32, true, false, 16, 128};
  {
    TestCheckpoint ckpt;  // weight_shape says K = 100 where the words hold 128
    WriteCt(ckpt, c, 1);
    ckpt.Find("model.layers.2.mlp.up_proj.weight_shape")->bytes =
        Bytes(std::vector<int64_t>{16, 100});
    ExpectRefused(ckpt, CtConfig(c),
                  {"up_proj.weight_packed", "up_proj.weight_shape", "num_bits", "[16, 13]"});
  }
  {
    TestCheckpoint ckpt;  // packed at 8 bits, config says 4
    CtCase eight = c;
    eight.bits = 8;
    WriteCt(ckpt, eight, 2);
    ExpectRefused(ckpt, CtConfig(c),
                  {"up_proj.weight_packed", "config_groups.group_0.weights.num_bits",
                   "config.json", "expected [16, 16]"});
  }
  {
    TestCheckpoint ckpt;  // asymmetric in the config, no zero points in the file
    WriteCt(ckpt, c, 3);
    CtCase asym = c;
    asym.symmetric = false;
    ExpectRefused(ckpt, CtConfig(asym), {"up_proj.weight_zero_point", "symmetric false"});
  }
  {
    TestCheckpoint ckpt;  // scales for groups of 64 under a config of 32
    CtCase g64 = c;
    g64.group = 64;
    WriteCt(ckpt, g64, 4);
    ExpectRefused(ckpt, CtConfig(c), {"up_proj.weight_scale", "group_size 32", "[16, 4]"});
  }
  {
    TestCheckpoint ckpt;  // no weight_shape
    WriteCt(ckpt, c, 5);
    ckpt.Remove("model.layers.2.mlp.up_proj.weight_shape");
    ExpectRefused(ckpt, CtConfig(c), {"up_proj.weight_packed", "up_proj.weight_shape"});
  }
  {
    TestCheckpoint ckpt;  // no group of the packed format
    WriteCt(ckpt, c, 6);
    std::string config = CtConfig(c);
    for (size_t at; (at = config.find("\"pack-quantized\"")) != std::string::npos;) {
      config.replace(at, 16, "\"float-quantized\"");
    }
    ExpectRefused(ckpt, config, {"up_proj.weight_packed", "pack-quantized", "float-quantized"});
  }
  {
    TestCheckpoint ckpt;  // NVFP4 without its global scale
    WriteNvfp4(ckpt, 4, 32);
    ckpt.Remove("model.layers.3.self_attn.o_proj.weight_global_scale");
    ExpectRefused(ckpt, kNvfp4Config, {"o_proj.weight_packed", "o_proj.weight_global_scale"});
  }
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::infinity()}) {
    TestCheckpoint ckpt;  // a global scale the reader would divide by into inf or NaN
    WriteNvfp4(ckpt, 4, 32);
    ckpt.Find("model.layers.3.self_attn.o_proj.weight_global_scale")->bytes =
        Bytes(std::vector<float>{bad});
    ExpectRefused(ckpt, kNvfp4Config, {"o_proj.weight_global_scale", "finite and positive"});
  }
  {
    TestCheckpoint ckpt;  // NVFP4 scales that are not FP8
    WriteNvfp4(ckpt, 4, 32);
    Tensor* s = ckpt.Find("model.layers.3.self_attn.o_proj.weight_scale");
    s->dtype = DType::kU8;
    ExpectRefused(ckpt, kNvfp4Config, {"o_proj.weight_scale", "must be F8_E4M3"});
  }
}

// Without a packed method in config.json the parts stay as they are.
TEST(PackedTensorsTest, NoConfigLeavesPartsAlone) {
  GptqCase c{4, false, true, false, true, 64};
  TestCheckpoint ckpt;
  WriteGptq(ckpt, c, 32, 128, 4);
  absl::StatusOr<TensorSet> set = ckpt.Open("null");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->tensors().size(), 5u);
  EXPECT_NE(Find(*set, "model.layers.0.mlp.down_proj.qweight"), nullptr);
}

}  // namespace
}  // namespace lowp
