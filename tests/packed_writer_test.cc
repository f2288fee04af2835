// The packed-weight writer (io/packed_writer.h) against the readers: random
// codes, scales, zero points and act-order group indices packed for every
// layout and bit width, composed back by AttachQuantizedParts under a
// config.json that declares the same, and read element by element against
// the formulas of io/packed_tensors.h and io/scaled_tensors.h computed here
// from the inputs; the parts' shapes as documented; inputs the files cannot
// hold refused naming the element.
#include "io/packed_writer.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "formats/format.h"
#include "formats/reference.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/packed_tensors.h"
#include "io/scaled_tensors.h"
#include "io/tensor.h"

namespace lowp {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

const std::string kPrefix = "model.layers.0.mlp.up_proj";

// A weight to pack: the spec and the inputs.
struct Case {
  PackSpec spec;
  std::vector<int32_t> codes, zeros, g_idx;
  std::vector<float> scales;
  float global_scale = 1;
  PackInput input() const { return {codes, scales, zeros, g_idx, global_scale}; }
};

const Format& FormatOf(DType dtype) {
  static const Format f16 = *FindFormat("fp16"), bf16 = *FindFormat("bf16"),
                      e4m3 = *FindFormat("fp8_e4m3fn"), e5m2 = *FindFormat("fp8_e5m2");
  return dtype == DType::kF16      ? f16
         : dtype == DType::kBF16   ? bf16
         : dtype == DType::kF8E5M2 ? e5m2
                                   : e4m3;
}

// x rounded to `dtype`'s grid (F32 as it is).
float Representable(DType dtype, float x) {
  if (dtype == DType::kF32) return x;
  return DecodeToFloat32(FormatOf(dtype), EncodeFloat32(FormatOf(dtype), x));
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Scale entries per row along K, and the scale grid PackInput gives.
int64_t Groups(const PackSpec& s) {
  if (s.layout == WrittenLayout::kCompressedNvfp4) return CeilDiv(s.cols, 16);
  return s.per_tensor ? 1 : CeilDiv(s.cols, s.group_cols);
}
int64_t ScaleRows(const PackSpec& s) {
  if (s.per_tensor) return 1;
  return s.block_rows > 0 ? CeilDiv(s.rows, s.block_rows) : s.rows;
}

bool IsInt(const PackSpec& s) {
  return s.layout == WrittenLayout::kGptq || s.layout == WrittenLayout::kCompressedInt;
}

// Random inputs for `spec`: codes over the whole field (the extremes at
// elements 0 and 1), scales of either sign on the scale dtype's grid, zero
// points over the range the layout stores (its extremes first), and when
// `act_order` a g_idx of shuffled columns, group_cols of them per group.
Case RandomCase(const PackSpec& spec, uint32_t seed, bool act_order = false) {
  std::mt19937 rng(seed);
  Case c;
  c.spec = spec;
  const int64_t N = spec.rows, K = spec.cols, G = Groups(spec);
  const bool fp8 = spec.layout == WrittenLayout::kCompressedFp8;
  const int32_t limit = IsInt(spec) ? 1 << spec.bits : fp8 ? 256 : 16;
  c.codes.resize(static_cast<size_t>(N * K));
  for (int32_t& q : c.codes) {
    do {
      q = static_cast<int32_t>(rng() % static_cast<uint32_t>(limit));
    } while (fp8 && std::isnan(DecodeToFloat32(FormatOf(spec.element_dtype), q)));
  }
  if (!fp8) {
    c.codes[0] = 0;
    c.codes[1] = limit - 1;
  }
  const DType scale_dtype =
      spec.layout == WrittenLayout::kCompressedNvfp4 ? DType::kF8E4M3 : spec.scale_dtype;
  c.scales.resize(static_cast<size_t>(ScaleRows(spec) * (spec.per_tensor ? 1 : G)));
  for (float& s : c.scales) {
    const float magnitude =
        std::ldexp(std::uniform_real_distribution<float>(1, 2)(rng), -static_cast<int>(rng() % 12));
    s = Representable(scale_dtype, rng() % 5 == 0 ? -magnitude : magnitude);
  }
  if (!spec.symmetric && IsInt(spec)) {
    const int32_t low = spec.layout == WrittenLayout::kGptq && !spec.gptq_v2 ? 1 : 0;
    c.zeros.resize(static_cast<size_t>(N * G));
    for (int32_t& z : c.zeros) z = low + static_cast<int32_t>(rng() % (1u << spec.bits));
    c.zeros[0] = low;
    c.zeros.back() = low + limit - 1;
  }
  if (act_order) {
    std::vector<int64_t> perm(static_cast<size_t>(K));
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);
    c.g_idx.resize(static_cast<size_t>(K));
    for (int64_t i = 0; i < K; ++i) c.g_idx[perm[i]] = static_cast<int32_t>(i / spec.group_cols);
  }
  c.global_scale = 448.0f * 6.0f / 3.7f;
  return c;
}

// The weight by the formulas of io/packed_tensors.h and io/scaled_tensors.h.
std::vector<float> Expected(const Case& c) {
  constexpr float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const PackSpec& s = c.spec;
  const int64_t N = s.rows, K = s.cols, G = Groups(s);
  std::vector<float> w(static_cast<size_t>(N * K));
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t k = 0; k < K; ++k) {
      const int32_t q = c.codes[n * K + k];
      const int64_t g = c.g_idx.empty() ? k / std::max<int64_t>(1, s.group_cols) : c.g_idx[k];
      float& out = w[n * K + k];
      switch (s.layout) {
        case WrittenLayout::kGptq:
        case WrittenLayout::kCompressedInt: {
          const int32_t z = c.zeros.empty() ? 1 << (s.bits - 1) : c.zeros[n * G + g];
          const float scale = s.per_tensor ? c.scales[0] : c.scales[n * G + g];
          out = s.layout == WrittenLayout::kGptq ? scale * static_cast<float>(q - z)
                                                 : static_cast<float>(q - z) * scale;
          break;
        }
        case WrittenLayout::kCompressedNvfp4:
          out = (q & 8 ? -1.0f : 1.0f) * kE2m1[q & 7] * (c.scales[n * G + k / 16] / c.global_scale);
          break;
        case WrittenLayout::kCompressedFp8: {
          const int64_t at = s.per_tensor       ? 0
                             : s.block_rows > 0 ? n / s.block_rows * G + k / s.group_cols
                                                : n * G + k / s.group_cols;
          out = DecodeToFloat32(FormatOf(s.element_dtype), static_cast<uint32_t>(q)) * c.scales[at];
          break;
        }
      }
    }
  }
  return w;
}

// The parts Pack gives as a safetensors file holds them, composed under
// config.json's quantization_config `config`, read whole; `type_name` is the
// composed weight's.
absl::StatusOr<std::vector<float>> ReadBack(const Case& c, const std::string& config,
                                            std::string* type_name) {
  absl::StatusOr<std::vector<PackPart>> parts = PackParts(c.spec);
  if (!parts.ok()) return parts.status();
  absl::StatusOr<std::vector<std::vector<uint8_t>>> bytes = Pack(c.spec, c.input());
  if (!bytes.ok()) return bytes.status();
  EXPECT_EQ(bytes->size(), parts->size());
  std::vector<TensorView> views;
  for (size_t i = 0; i < parts->size() && i < bytes->size(); ++i) {
    TensorView t;
    t.name = kPrefix + (*parts)[i].suffix;
    t.dtype = (*parts)[i].dtype;
    t.shape = (*parts)[i].shape;
    t.bytes = (*bytes)[i];
    t.file = "model.safetensors";
    EXPECT_EQ((*bytes)[i].size(), static_cast<size_t>(t.elements()) * DTypeBytes(t.dtype))
        << t.name;
    views.push_back(std::move(t));
  }
  absl::StatusOr<CheckpointQuantization> q = ParseCheckpointQuantization(
      absl::StrCat(R"({"quantization_config": )", config, "}"), "config.json");
  if (!q.ok()) return q.status();
  if (absl::Status s = AttachQuantizedParts(views, *q); !s.ok()) return s;
  if (views.size() != 1 || views[0].name != kPrefix + ".weight" ||
      views[0].shape != std::vector<int64_t>{c.spec.rows, c.spec.cols}) {
    return absl::InternalError(absl::StrCat(views.size(), " tensors composed, the first ",
                                            views.empty() ? "" : views[0].name));
  }
  *type_name = views[0].type_name();
  std::vector<float> out(static_cast<size_t>(c.spec.rows * c.spec.cols));
  if (absl::Status s = ReadAsFloat32(views[0], 0, out); !s.ok()) return s;
  return out;
}

// Every element equal, bit for bit (-0 and +0 told apart).
void ExpectSameBits(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i]) && ++bad <= 5) {
      ADD_FAILURE() << "element " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
  EXPECT_EQ(bad, 0u);
}

void ExpectRoundTrip(const Case& c, const std::string& config, const std::string& type) {
  std::string type_name;
  absl::StatusOr<std::vector<float>> got = ReadBack(c, config, &type_name);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(type_name, type);
  ExpectSameBits(*got, Expected(c));
}

std::string GptqConfig(const PackSpec& s, bool act_order) {
  return absl::StrCat(R"({"quant_method": "gptq", "bits": )", s.bits, R"(, "group_size": )",
                      s.group_cols >= s.cols ? -1 : s.group_cols, R"(, "desc_act": )",
                      act_order ? "true" : "false", R"(, "sym": )", s.symmetric ? "true" : "false",
                      R"(, "checkpoint_format": ")", s.gptq_v2 ? "gptq_v2" : "gptq", R"("})");
}

std::string CtConfig(const std::string& format, const std::string& weights) {
  return absl::StrCat(R"({"quant_method": "compressed-tensors", "format": ")", format,
                      R"(", "config_groups": {"group_0": {"targets": ["Linear"], "weights": )",
                      weights, R"(}}, "ignore": ["lm_head"]})");
}

TEST(PackedWriterTest, GptqEveryBitsVersionAndOrder) {
  struct Variant {
    bool symmetric, v2, g_idx, act_order;
    int64_t group_cols;
    DType scale_dtype;
    std::string type;  // after "gptq-int<b>-"
  };
  const std::vector<Variant> variants = {
      {true, false, false, false, 32, DType::kF16, "g32"},
      {false, false, true, false, 32, DType::kF16, "g32"},   // a column-order g_idx
      {false, true, false, false, 64, DType::kBF16, "g64"},  // the last group short
      {true, true, true, false, 96, DType::kF32, "channel"},
      {false, false, true, true, 32, DType::kF16, "g32-act"},
      {false, true, true, true, 64, DType::kF16, "g64-act"},
  };
  uint32_t seed = 1;
  for (int bits : {2, 3, 4, 8}) {
    for (const Variant& v : variants) {
      PackSpec s{.layout = WrittenLayout::kGptq,
                 .rows = 64,
                 .cols = 96,
                 .bits = bits,
                 .symmetric = v.symmetric,
                 .gptq_v2 = v.v2,
                 .group_cols = v.group_cols,
                 .g_idx = v.g_idx,
                 .scale_dtype = v.scale_dtype};
      const std::string type = absl::StrCat("gptq-int", bits, "-", v.type);
      SCOPED_TRACE(absl::StrCat(type, v.symmetric ? " sym" : " asym", v.v2 ? " v2" : " v1"));
      ExpectRoundTrip(RandomCase(s, seed++, v.act_order), GptqConfig(s, v.act_order), type);
    }
  }
}

TEST(PackedWriterTest, CompressedIntEveryBitsAndStrategy) {
  struct Variant {
    bool symmetric, per_tensor, act_order;
    int64_t group_cols;  // 100 = K: channel
    std::string type;    // after "ct-int<b>-"
  };
  const std::vector<Variant> variants = {
      {true, false, false, 32, "g32"},      {false, false, false, 32, "g32-asym"},
      {true, false, false, 100, "channel"}, {false, false, false, 100, "channel-asym"},
      {true, true, false, 0, "tensor"},     {false, false, true, 32, "g32-asym-act"},
  };
  const DType scale_dtypes[] = {DType::kBF16, DType::kF16, DType::kF32};
  uint32_t seed = 100;
  for (int bits : {2, 3, 4, 5, 8}) {
    for (const Variant& v : variants) {
      // K = 100 and N = 20 leave the last word of a row and of the zero
      // points' columns part empty for most bit widths.
      PackSpec s{.layout = WrittenLayout::kCompressedInt,
                 .rows = 20,
                 .cols = 100,
                 .bits = bits,
                 .symmetric = v.symmetric,
                 .group_cols = v.group_cols,
                 .per_tensor = v.per_tensor,
                 .g_idx = v.act_order,
                 .scale_dtype = scale_dtypes[seed % 3]};
      const std::string strategy = v.per_tensor         ? "tensor"
                                   : v.group_cols < 100 ? "group"
                                                        : "channel";
      const std::string weights = absl::StrCat(
          R"({"num_bits": )", bits, R"(, "type": "int", "symmetric": )",
          v.symmetric ? "true" : "false", R"(, "strategy": ")", strategy, R"(", "group_size": )",
          strategy == "group" ? absl::StrCat(v.group_cols) : "null", R"(, "actorder": )",
          v.act_order ? R"("group")" : "null", "}");
      const std::string type = absl::StrCat("ct-int", bits, "-", v.type);
      SCOPED_TRACE(type);
      ExpectRoundTrip(RandomCase(s, seed++, v.act_order), CtConfig("pack-quantized", weights),
                      type);
    }
  }
}

TEST(PackedWriterTest, CompressedNvfp4) {
  // K = 72: the last group of 16 holds 8 columns.
  for (int64_t k : {int64_t{64}, int64_t{72}}) {
    SCOPED_TRACE(k);
    PackSpec s{.layout = WrittenLayout::kCompressedNvfp4, .rows = 12, .cols = k};
    ExpectRoundTrip(RandomCase(s, static_cast<uint32_t>(k)),
                    CtConfig("nvfp4-pack-quantized",
                             R"({"num_bits": 4, "type": "float", "symmetric": true,
                                 "strategy": "tensor_group", "group_size": 16})"),
                    "ct-nvfp4");
  }
}

TEST(PackedWriterTest, CompressedFp8EveryScaleLayout) {
  struct Variant {
    std::string strategy;  // as the config says it
    bool per_tensor;
    int64_t block_rows, group_cols;
    DType scale_dtype, element_dtype;
    std::string type;  // after "F8_E...*<scale dtype>"
  };
  // 200 x 300: partial blocks of 128 at the bottom and the right.
  const std::vector<Variant> variants = {
      {"tensor", true, 0, 0, DType::kF32, DType::kF8E4M3, "[tensor]"},
      {"tensor", true, 0, 0, DType::kBF16, DType::kF8E5M2, "[tensor]"},
      {"channel", false, 0, 300, DType::kBF16, DType::kF8E4M3, "[channel]"},
      {"channel", false, 0, 300, DType::kF32, DType::kF8E5M2, "[channel]"},
      {"block", false, 128, 128, DType::kF32, DType::kF8E4M3, "[b128x128]"},
      {"block", false, 128, 128, DType::kBF16, DType::kF8E5M2, "[b128x128]"},
      {"block", false, 64, 32, DType::kF16, DType::kF8E4M3, "[b64x32]"},
      {"group", false, 0, 64, DType::kBF16, DType::kF8E4M3, "[g64]"},
      {"group", false, 0, 128, DType::kF32, DType::kF8E4M3, "[g128]"},
  };
  uint32_t seed = 200;
  for (const Variant& v : variants) {
    PackSpec s{.layout = WrittenLayout::kCompressedFp8,
               .rows = 200,
               .cols = 300,
               .group_cols = v.group_cols,
               .per_tensor = v.per_tensor,
               .block_rows = v.block_rows,
               .scale_dtype = v.scale_dtype,
               .element_dtype = v.element_dtype};
    const std::string weights = absl::StrCat(
        R"({"num_bits": 8, "type": "float", "symmetric": true, "strategy": ")", v.strategy,
        R"(", "block_structure": )",
        v.block_rows > 0 ? absl::StrCat("[", v.block_rows, ", ", v.group_cols, "]") : "null",
        R"(, "group_size": )", v.strategy == "group" ? absl::StrCat(v.group_cols) : "null", "}");
    const std::string type =
        absl::StrCat(DTypeName(v.element_dtype), "*", DTypeName(v.scale_dtype), v.type);
    SCOPED_TRACE(type);
    ExpectRoundTrip(RandomCase(s, seed++), CtConfig("float-quantized", weights), type);
  }
}

std::vector<std::string> Describe(const std::vector<PackPart>& parts) {
  std::vector<std::string> out;
  for (const PackPart& p : parts) {
    out.push_back(
        absl::StrCat(p.suffix, " ", DTypeName(p.dtype), " [", absl::StrJoin(p.shape, ", "), "]"));
  }
  return out;
}

TEST(PackedWriterTest, PartsAsDocumented) {
  using ::testing::ElementsAre;
  absl::StatusOr<std::vector<PackPart>> gptq = PackParts({.layout = WrittenLayout::kGptq,
                                                          .rows = 64,
                                                          .cols = 96,
                                                          .bits = 3,
                                                          .group_cols = 32,
                                                          .g_idx = true});
  ASSERT_TRUE(gptq.ok()) << gptq.status();
  EXPECT_THAT(Describe(*gptq), ElementsAre(".qweight I32 [9, 64]", ".qzeros I32 [3, 6]",
                                           ".scales F16 [3, 64]", ".g_idx I32 [96]"));
  absl::StatusOr<std::vector<PackPart>> ct = PackParts({.layout = WrittenLayout::kCompressedInt,
                                                        .rows = 20,
                                                        .cols = 100,
                                                        .bits = 5,
                                                        .symmetric = false,
                                                        .group_cols = 32,
                                                        .scale_dtype = DType::kBF16});
  ASSERT_TRUE(ct.ok()) << ct.status();
  EXPECT_THAT(Describe(*ct),
              ElementsAre(".weight_packed I32 [20, 17]", ".weight_scale BF16 [20, 4]",
                          ".weight_zero_point I32 [4, 4]", ".weight_shape I64 [2]"));
  absl::StatusOr<std::vector<PackPart>> ct_tensor = PackParts(
      {.layout = WrittenLayout::kCompressedInt, .rows = 20, .cols = 100, .per_tensor = true});
  ASSERT_TRUE(ct_tensor.ok()) << ct_tensor.status();
  EXPECT_THAT(Describe(*ct_tensor), ElementsAre(".weight_packed I32 [20, 13]",
                                                ".weight_scale F16 [1]", ".weight_shape I64 [2]"));
  absl::StatusOr<std::vector<PackPart>> nvfp4 =
      PackParts({.layout = WrittenLayout::kCompressedNvfp4, .rows = 12, .cols = 72});
  ASSERT_TRUE(nvfp4.ok()) << nvfp4.status();
  EXPECT_THAT(Describe(*nvfp4),
              ElementsAre(".weight_packed U8 [12, 36]", ".weight_scale F8_E4M3 [12, 5]",
                          ".weight_global_scale F32 [1]"));
  absl::StatusOr<std::vector<PackPart>> fp8 = PackParts({.layout = WrittenLayout::kCompressedFp8,
                                                         .rows = 200,
                                                         .cols = 300,
                                                         .group_cols = 128,
                                                         .block_rows = 128,
                                                         .scale_dtype = DType::kF32});
  ASSERT_TRUE(fp8.ok()) << fp8.status();
  EXPECT_THAT(Describe(*fp8),
              ElementsAre(".weight F8_E4M3 [200, 300]", ".weight_scale F32 [2, 3]"));
}

// The bits themselves, for one small case per integer layout: 4-bit codes
// k along a row are the nibbles 0..7 of a word.
TEST(PackedWriterTest, NibbleOrder) {
  Case c;
  c.spec = {.layout = WrittenLayout::kGptq, .rows = 8, .cols = 8, .bits = 4, .group_cols = 8};
  for (int64_t n = 0; n < 8; ++n) {
    for (int32_t k = 0; k < 8; ++k) c.codes.push_back(k);
  }
  c.scales.assign(8, 1.0f);
  absl::StatusOr<std::vector<std::vector<uint8_t>>> gptq = Pack(c.spec, c.input());
  ASSERT_TRUE(gptq.ok()) << gptq.status();
  for (int n = 0; n < 8; ++n) {  // qweight [1, 8]: every column's word 0x76543210
    EXPECT_THAT(std::vector<uint8_t>((*gptq)[0].begin() + 4 * n, (*gptq)[0].begin() + 4 * n + 4),
                ::testing::ElementsAre(0x10, 0x32, 0x54, 0x76));
  }
  EXPECT_EQ((*gptq)[1], std::vector<uint8_t>(4, 0x77));  // v1: 8 - 1 in every field
  c.spec.layout = WrittenLayout::kCompressedInt;
  absl::StatusOr<std::vector<std::vector<uint8_t>>> ct = Pack(c.spec, c.input());
  ASSERT_TRUE(ct.ok()) << ct.status();
  EXPECT_THAT(std::vector<uint8_t>((*ct)[0].begin(), (*ct)[0].begin() + 4),
              ::testing::ElementsAre(0x10, 0x32, 0x54, 0x76));
}

TEST(PackedWriterTest, GptqV1CannotStoreZeroZero) {
  PackSpec s{.layout = WrittenLayout::kGptq,
             .rows = 32,
             .cols = 64,
             .bits = 4,
             .symmetric = false,
             .group_cols = 16,
             .g_idx = true};
  Case c = RandomCase(s, 7);
  c.zeros[3 * 4 + 1] = 0;  // row 3, group 1
  absl::StatusOr<std::vector<std::vector<uint8_t>>> v1 = Pack(c.spec, c.input());
  EXPECT_THAT(v1.status().message(),
              AllOf(HasSubstr("zeros at row 3, group 1 is 0"), HasSubstr("GPTQ v1")));
  c.spec.gptq_v2 = true;  // v2 stores z itself; 16 is then out of its field
  std::replace(c.zeros.begin(), c.zeros.end(), 16, 15);
  std::string type;
  absl::StatusOr<std::vector<float>> got = ReadBack(c, GptqConfig(c.spec, false), &type);
  ASSERT_TRUE(got.ok()) << got.status();
  ExpectSameBits(*got, Expected(c));
}

TEST(PackedWriterTest, ValuesOutsideTheirFieldRefused) {
  PackSpec ct{.layout = WrittenLayout::kCompressedInt,
              .rows = 4,
              .cols = 16,
              .bits = 4,
              .symmetric = false,
              .group_cols = 8};
  {
    Case c = RandomCase(ct, 1);
    c.codes[1 * 16 + 2] = 16;
    EXPECT_THAT(Pack(c.spec, c.input()).status().message(),
                HasSubstr("codes at row 1, column 2 is 16, outside [0, 15]"));
    c.codes[1 * 16 + 2] = -1;
    EXPECT_THAT(Pack(c.spec, c.input()).status().message(), HasSubstr("is -1"));
  }
  {
    Case c = RandomCase(ct, 2);
    c.zeros[2 * 2 + 1] = 16;
    EXPECT_THAT(Pack(c.spec, c.input()).status().message(),
                HasSubstr("zeros at row 2, group 1 is 16, outside [0, 15]"));
  }
  {
    Case c = RandomCase(ct, 3);
    c.spec.g_idx = true;
    c.g_idx.assign(16, 0);
    c.g_idx[5] = 2;  // two groups
    EXPECT_THAT(Pack(c.spec, c.input()).status().message(),
                HasSubstr("g_idx at column 5 is 2, outside [0, 1]"));
  }
  {
    Case c = RandomCase({.layout = WrittenLayout::kCompressedNvfp4, .rows = 2, .cols = 16}, 4);
    c.codes[3] = 16;
    EXPECT_THAT(Pack(c.spec, c.input()).status().message(), HasSubstr("outside [0, 15]"));
    c.codes[3] = 15;
    c.global_scale = 0;
    EXPECT_THAT(Pack(c.spec, c.input()).status().message(), HasSubstr("global_scale"));
  }
  {
    Case c = RandomCase({.layout = WrittenLayout::kCompressedFp8,
                         .rows = 2,
                         .cols = 16,
                         .per_tensor = true,
                         .scale_dtype = DType::kF32},
                        5);
    c.codes[3] = 256;
    EXPECT_THAT(Pack(c.spec, c.input()).status().message(), HasSubstr("outside [0, 255]"));
  }
}

TEST(PackedWriterTest, ScalesNotExactlyRepresentableRefused) {
  PackSpec s{.layout = WrittenLayout::kGptq, .rows = 32, .cols = 32, .bits = 4, .group_cols = 16};
  Case c = RandomCase(s, 9);
  c.scales[2 * 2 + 1] = 0.1f;
  EXPECT_THAT(Pack(c.spec, c.input()).status().message(),
              AllOf(HasSubstr("scales at row 2, column 1 is 0.1"),
                    HasSubstr("not exactly representable in F16")));
  c.spec.scale_dtype = DType::kBF16;
  EXPECT_THAT(Pack(c.spec, c.input()).status().message(), HasSubstr("in BF16"));
  c.spec.scale_dtype = DType::kF32;
  EXPECT_TRUE(Pack(c.spec, c.input()).ok());
  c.scales[0] = INFINITY;
  EXPECT_THAT(Pack(c.spec, c.input()).status().message(), HasSubstr("not finite"));
  c.scales[0] = NAN;
  EXPECT_THAT(Pack(c.spec, c.input()).status().message(), HasSubstr("not finite"));
  // NVFP4's scales are F8_E4M3 whatever scale_dtype says: 0.3 is not one.
  Case f = RandomCase({.layout = WrittenLayout::kCompressedNvfp4, .rows = 2, .cols = 16}, 10);
  f.scales[1] = 0.3f;
  EXPECT_THAT(Pack(f.spec, f.input()).status().message(),
              AllOf(HasSubstr("row 1, column 0"), HasSubstr("F8_E4M3")));
}

TEST(PackedWriterTest, SpansOfTheWrongSizeRefused) {
  PackSpec s{.layout = WrittenLayout::kGptq,
             .rows = 32,
             .cols = 32,
             .bits = 4,
             .symmetric = false,
             .group_cols = 16,
             .g_idx = true};
  const Case good = RandomCase(s, 11);
  ASSERT_TRUE(Pack(good.spec, good.input()).ok());
  Case c = good;
  c.codes.pop_back();
  EXPECT_THAT(Pack(c.spec, c.input()).status().message(),
              HasSubstr("PackInput.codes holds 1023 values; a [32, 32] weight needs 1024"));
  c = good;
  c.scales.push_back(1);
  EXPECT_THAT(Pack(c.spec, c.input()).status().message(),
              HasSubstr("PackInput.scales holds 65 values; [32, 2] scales needs 64"));
  c = good;
  c.zeros.clear();
  EXPECT_THAT(Pack(c.spec, c.input()).status().message(), HasSubstr("PackInput.zeros holds 0"));
  c = good;
  c.spec.symmetric = true;  // zeros given to a symmetric spec
  EXPECT_THAT(Pack(c.spec, c.input()).status().message(),
              HasSubstr("PackInput.zeros holds 64 values; a symmetric layout needs 0"));
  c = good;
  c.g_idx.assign(31, 0);
  EXPECT_THAT(Pack(c.spec, c.input()).status().message(), HasSubstr("PackInput.g_idx holds 31"));
  c.spec.g_idx = false;
  EXPECT_THAT(Pack(c.spec, c.input()).status().message(),
              HasSubstr("a spec without g_idx needs 0"));
}

TEST(PackedWriterTest, SpecsTheLayoutsCannotHoldRefused) {
  const auto refused = [](const PackSpec& s) {
    return std::string(PackParts(s).status().message());
  };
  EXPECT_THAT(
      refused(
          {.layout = WrittenLayout::kGptq, .rows = 32, .cols = 48, .bits = 3, .group_cols = 16}),
      HasSubstr("multiples of 32"));
  EXPECT_THAT(
      refused(
          {.layout = WrittenLayout::kGptq, .rows = 32, .cols = 32, .bits = 5, .group_cols = 16}),
      HasSubstr("bits 5"));
  EXPECT_THAT(refused({.layout = WrittenLayout::kGptq, .rows = 32, .cols = 32, .group_cols = 0}),
              HasSubstr("group_cols 0"));
  EXPECT_THAT(refused({.layout = WrittenLayout::kGptq,
                       .rows = 32,
                       .cols = 32,
                       .group_cols = 32,
                       .per_tensor = true}),
              HasSubstr("per-tensor"));
  EXPECT_THAT(refused({.layout = WrittenLayout::kCompressedInt,
                       .rows = 4,
                       .cols = 4,
                       .bits = 9,
                       .group_cols = 4}),
              HasSubstr("bits 9"));
  EXPECT_THAT(refused({.layout = WrittenLayout::kCompressedInt,
                       .rows = 4,
                       .cols = 4,
                       .symmetric = false,
                       .per_tensor = true}),
              HasSubstr("asymmetric per tensor"));
  EXPECT_THAT(refused({.layout = WrittenLayout::kCompressedInt,
                       .rows = 4,
                       .cols = 4,
                       .group_cols = 4,
                       .block_rows = 2}),
              HasSubstr("block_rows"));
  EXPECT_THAT(refused({.layout = WrittenLayout::kCompressedInt,
                       .rows = 4,
                       .cols = 4,
                       .group_cols = 4,
                       .scale_dtype = DType::kI32}),
              HasSubstr("scale_dtype I32"));
  EXPECT_THAT(refused({.layout = WrittenLayout::kCompressedNvfp4, .rows = 4, .cols = 15}),
              HasSubstr("K must be even"));
  EXPECT_THAT(
      refused({.layout = WrittenLayout::kCompressedNvfp4, .rows = 4, .cols = 16, .g_idx = true}),
      HasSubstr("no g_idx"));
  EXPECT_THAT(refused({.layout = WrittenLayout::kCompressedFp8,
                       .rows = 4,
                       .cols = 16,
                       .per_tensor = true,
                       .element_dtype = DType::kF16}),
              HasSubstr("element_dtype F16"));
  EXPECT_THAT(
      refused({.layout = WrittenLayout::kCompressedFp8, .rows = 0, .cols = 16, .per_tensor = true}),
      HasSubstr("[0, 16]"));
}

}  // namespace
}  // namespace lowp
