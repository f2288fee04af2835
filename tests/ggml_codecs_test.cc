// llama.cpp's world beyond the GGUF reader: the codecs' fp16 against the
// reference, hand-worked blocks, every codec scheme as decode(encode(x)) and
// the older ggml schemes equal to their codecs, llama.cpp's fallback on rows
// the super-block does not divide, the recipes' rules, and the ggml-made
// stories260K Q4_K_M file measured against its original: every tensor's type
// and error equal to lowp's own Q4_K_M recipe, priced to the byte by size.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "api/quant.h"
#include "api/size.h"
#include "api/tensors.h"
#include "codecs/ggml.h"
#include "formats/format.h"
#include "formats/reference.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "io/gguf.h"
#include "io/gguf_names.h"
#include "io/tensor_set.h"
#include "quant/measure.h"
#include "quant/recipe.h"
#include "quant/scheme.h"

namespace lowp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kData = LOWP_TEST_DATA_DIR;
const std::string kGguf = kData + "/ggml/stories260K-Q4_K_M.gguf";
const std::string kOriginal = kData + "/stories260K-hf/model.safetensors";

uint32_t Bits(float x) { return std::bit_cast<uint32_t>(x); }

// ---------------------------------------------------------------- fp16

TEST(GgmlFp16, DecodesEveryCodeAsTheReference) {
  const Format fp16 = *FindFormat("fp16");
  for (uint32_t h = 0; h < 65536; ++h) {
    const float mine = ggml::Fp16ToFp32(static_cast<uint16_t>(h));
    const float ref = DecodeToFloat32(fp16, h);
    if (std::isnan(ref)) {
      EXPECT_TRUE(std::isnan(mine)) << h;
    } else {
      ASSERT_EQ(Bits(mine), Bits(ref)) << h;
    }
  }
}

// Every fp16 value, the midpoints between neighbours and one ulp either side
// of them (the ties and near-ties of nearest-even), both signs.
TEST(GgmlFp16, EncodesNearestEvenAsTheReference) {
  const Format fp16 = *FindFormat("fp16");
  std::vector<float> inputs;
  for (uint32_t h = 0; h < 0x7c00; ++h) {
    const float a = ggml::Fp16ToFp32(static_cast<uint16_t>(h));
    const float b = ggml::Fp16ToFp32(static_cast<uint16_t>(h + 1));
    const float mid = static_cast<float>((static_cast<double>(a) + b) / 2);
    for (float x : {a, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f)}) {
      inputs.push_back(x);
      inputs.push_back(-x);
    }
  }
  for (float x : {65519.99f, 65520.0f, 1e30f, INFINITY, 1e-30f, 0x1p-25f, 0x1.000002p-25f}) {
    inputs.push_back(x);
    inputs.push_back(-x);
  }
  for (float x : inputs) {
    ASSERT_EQ(ggml::Fp32ToFp16(x), EncodeFloat32(fp16, x)) << x;
  }
  EXPECT_EQ(ggml::Fp32ToFp16(NAN) & 0x7c00, 0x7c00);
  EXPECT_NE(ggml::Fp32ToFp16(NAN) & 0x3ff, 0);
}

// ---------------------------------------------------------------- types

TEST(GgmlTypes, TableHasGgmlsBlockSizes) {
  EXPECT_EQ(ggml::FindType(12)->name, "q4_K");
  EXPECT_EQ(ggml::FindType("Q4_K")->bytes, 144);
  EXPECT_EQ(ggml::FindType("iq4_xs")->bytes, 136);
  EXPECT_EQ(ggml::FindType("nvfp4")->block, 64);
  for (uint32_t removed : {4u, 5u, 31u, 32u, 33u, 36u, 37u, 38u, 43u}) {
    EXPECT_EQ(ggml::FindType(removed), nullptr) << removed;
  }
  // Codecs refuse what they cannot do and sizes that do not fit.
  std::vector<float> x(256);
  std::vector<uint8_t> out(66);
  EXPECT_THAT(ggml::Encode(ggml::Type::kIQ2_XXS, x, out).message(),
              HasSubstr("needs an importance matrix"));
  out.resize(292);
  EXPECT_THAT(ggml::Encode(ggml::Type::kQ8_K, x, out).message(), HasSubstr("cannot encode"));
  out.resize(143);
  EXPECT_THAT(ggml::Encode(ggml::Type::kQ4_K, x, out).message(), HasSubstr("144 bytes"));
  x.resize(100);
  EXPECT_THAT(ggml::Decode(ggml::Type::kQ4_K, out, x).message(), HasSubstr("whole blocks"));
}

// The types lowp reads but does not write, against ggml's decoding of
// ggml's own bytes (tests/data/ggml/decode-only.gguf).
TEST(GgmlTypes, DecodeOnlyTypesEqualGgml) {
  const TensorSet set = *TensorSet::Open(kData + "/ggml/decode-only.gguf");
  std::map<std::string, const TensorView*> by_name;
  for (const TensorView& t : set.tensors()) by_name[t.name] = &t;
  for (const char* type : {"tq1_0", "tq2_0", "q1_0", "q2_0"}) {
    const TensorView& q = *by_name.at(std::string(type) + ".q");
    const TensorView& y = *by_name.at(std::string(type) + ".y");
    ASSERT_EQ(q.type_name(), type);
    std::vector<float> got(static_cast<size_t>(q.elements())), want(got.size());
    ASSERT_TRUE(ReadAsFloat32(q, 0, got).ok()) << type;
    ASSERT_TRUE(ReadAsFloat32(y, 0, want).ok());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(Bits(got[i]), Bits(want[i])) << type << i;
    std::vector<uint8_t> bytes(q.bytes.size());
    EXPECT_THAT(ggml::Encode(q.ggml->type, got, bytes).message(), HasSubstr("cannot encode"));
  }
}

// ---------------------------------------------------------------- hand-worked blocks

TEST(GgmlBlocks, Q5_1OfARampIsExact) {
  std::vector<float> x(32);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j);
  std::vector<uint8_t> b(24);
  ASSERT_TRUE(ggml::Encode(ggml::Type::kQ5_1, x, b).ok());
  // d = (31 - 0) / 31 = 1 (fp16 0x3c00), m = 0, q = j.
  EXPECT_EQ(b[0] | b[1] << 8, 0x3c00);
  EXPECT_EQ(b[2] | b[3] << 8, 0);
  uint32_t qh;
  std::memcpy(&qh, &b[4], 4);
  EXPECT_EQ(qh, 0xffff0000u);  // elements 16..31 have bit 4
  for (int j = 0; j < 16; ++j) EXPECT_EQ(b[8 + j], j | j << 4) << j;
  std::vector<float> y(32);
  ASSERT_TRUE(ggml::Decode(ggml::Type::kQ5_1, b, y).ok());
  EXPECT_EQ(y, x);
}

TEST(GgmlBlocks, ZeroBlocks) {
  std::vector<float> x(256, 0.0f);
  // iq4_nl: scale 0, every code the grid's nearest to 0 (index 8, value 1).
  std::vector<uint8_t> nl(18);
  ASSERT_TRUE(ggml::Encode(ggml::Type::kIQ4_NL, std::span(x).first(32), nl).ok());
  EXPECT_EQ(nl[0] | nl[1] << 8, 0);
  for (int j = 2; j < 18; ++j) EXPECT_EQ(nl[j], 0x88);
  // iq4_xs: d = -0/32 is -0.0, stored as 0x8000 as ggml stores it.
  std::vector<uint8_t> xs(136);
  ASSERT_TRUE(ggml::Encode(ggml::Type::kIQ4_XS, x, xs).ok());
  EXPECT_EQ(xs[0] | xs[1] << 8, 0x8000);
  // q6_K: the whole block is zero bytes.
  std::vector<uint8_t> q6(210, 0xff);
  ASSERT_TRUE(ggml::Encode(ggml::Type::kQ6_K, x, q6).ok());
  EXPECT_EQ(q6, std::vector<uint8_t>(210, 0));
  for (ggml::Type t : {ggml::Type::kQ2_K, ggml::Type::kQ3_K, ggml::Type::kQ4_K, ggml::Type::kQ5_K,
                       ggml::Type::kQ6_K, ggml::Type::kIQ4_XS}) {
    std::vector<uint8_t> bytes(static_cast<size_t>(ggml::Info(t).bytes));
    std::vector<float> y(256, 1.0f);
    ASSERT_TRUE(ggml::Encode(t, x, bytes).ok());
    ASSERT_TRUE(ggml::Decode(t, bytes, y).ok());
    for (float v : y) EXPECT_EQ(v, 0.0f) << ggml::Info(t).name;
  }
}

// ggml's MXFP4 keeps the first of two equally near codes (the smaller
// magnitude); OCP's mxfp4 rounds to even: with amax 6 the scale is 1, and
// 3.5 (between 3 = 0b101 and 4 = 0b110) and 0.75 (between 0.5 and 1) differ.
TEST(GgmlBlocks, Mxfp4TiesDifferFromOcp) {
  std::vector<float> x(32, 0.0f);
  x[0] = 6.0f;
  x[1] = 3.5f;
  x[2] = -3.5f;
  x[3] = 0.75f;
  x[4] = 2.5f;  // between 2 (0b100) and 3 (0b101): both give 2
  std::vector<float> ggml_out(32), ocp_out(32);
  SchemeCounts counts;
  (*ParseScheme("ggml-mxfp4"))->Apply(x, 32, {}, ggml_out, counts);
  (*ParseScheme("mxfp4"))->Apply(x, 32, {}, ocp_out, counts);
  EXPECT_THAT(std::vector<float>(ggml_out.begin(), ggml_out.begin() + 5),
              ElementsAre(6.0f, 3.0f, -3.0f, 0.5f, 2.0f));
  EXPECT_THAT(std::vector<float>(ocp_out.begin(), ocp_out.begin() + 5),
              ElementsAre(6.0f, 4.0f, -4.0f, 1.0f, 2.0f));
}

// ---------------------------------------------------------------- schemes

std::vector<float> Gaussian(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

// The fake-quant values of every codec scheme are Decode of the bytes it
// stores, and the stored bytes are Encode's.
TEST(GgmlCodecSchemes, FakeQuantIsDecodeOfEncode) {
  const int64_t cols = 512;
  const std::vector<float> x = Gaussian(4 * cols, 7, 0.05f);
  for (const char* name : {"q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl", "iq4_xs",
                           "ggml-mxfp4", "ggml-nvfp4"}) {
    std::unique_ptr<Scheme> scheme = *ParseScheme(name);
    std::vector<float> out(x.size()), decoded(x.size());
    SchemeCounts counts;
    StoredChunk stored;
    scheme->Apply(x, cols, {}, out, counts, &stored);
    const ggml::TypeInfo* t = ggml::FindType(
        absl::string_view(name).substr(absl::StartsWith(name, "ggml-") ? 5 : 0));
    ASSERT_NE(t, nullptr) << name;
    std::vector<uint8_t> bytes(static_cast<size_t>(ggml::RowBytes(*t, 4 * cols)));
    ASSERT_TRUE(ggml::Encode(t->type, x, bytes).ok());
    EXPECT_EQ(stored.bytes, bytes) << name;
    ASSERT_TRUE(ggml::Decode(t->type, bytes, decoded).ok());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(Bits(out[i]), Bits(decoded[i])) << name << i;
    EXPECT_EQ(scheme->StorageBits(4, cols), bytes.size() * 8) << name;
  }
}

// lowp's first ggml schemes (their own code, written before the codecs)
// give exactly the codecs' decode(encode(x)) on finite whole blocks.
TEST(GgmlCodecSchemes, OlderSchemesEqualTheirCodecs) {
  const int64_t cols = 256;
  std::vector<float> x = Gaussian(8 * cols, 11, 0.02f);
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j % 17) - 8;  // ties
  for (auto [name, type] : {std::pair{"q8_0", ggml::Type::kQ8_0}, {"q4_0", ggml::Type::kQ4_0},
                            {"q4_1", ggml::Type::kQ4_1}, {"q5_0", ggml::Type::kQ5_0}}) {
    std::vector<float> out(x.size()), decoded(x.size());
    SchemeCounts counts;
    (*ParseScheme(name))->Apply(x, cols, {}, out, counts);
    std::vector<uint8_t> bytes(static_cast<size_t>(ggml::RowBytes(ggml::Info(type), 8 * cols)));
    ASSERT_TRUE(ggml::Encode(type, x, bytes).ok());
    ASSERT_TRUE(ggml::Decode(type, bytes, decoded).ok());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(Bits(out[i]), Bits(decoded[i])) << name << i;
  }
}

TEST(GgmlCodecSchemes, NonFiniteInputsAreStoredAsZeroAndComeBack) {
  std::vector<float> x = Gaussian(256, 3);
  std::vector<float> zeroed = x;
  x[5] = NAN;
  x[77] = INFINITY;
  zeroed[5] = zeroed[77] = 0.0f;
  std::unique_ptr<Scheme> scheme = *ParseScheme("q4_K");
  std::vector<float> out(256), ref(256);
  SchemeCounts counts;
  StoredChunk stored, stored_ref;
  scheme->Apply(x, 256, {}, out, counts, &stored);
  scheme->Apply(zeroed, 256, {}, ref, counts, &stored_ref);
  EXPECT_EQ(stored.bytes, stored_ref.bytes);
  EXPECT_TRUE(std::isnan(out[5]));
  EXPECT_EQ(out[77], INFINITY);
  for (int i = 0; i < 256; ++i) {
    if (i != 5 && i != 77) {
      EXPECT_EQ(out[i], ref[i]) << i;
    }
  }
}

// Rows 256 does not divide: llama.cpp's fallback (tensor_type_fallback).
TEST(GgmlCodecSchemes, SuperBlocksFallBackAsLlamaCpp) {
  struct Case {
    const char* scheme;
    int64_t cols;
    const char* applied;
  } const cases[] = {{"q4_K", 64, "q5_0"},   {"q5_K", 96, "q5_1"},   {"q6_K", 64, "q8_0"},
                     {"q2_K", 64, "q4_0"},   {"q3_K", 32, "q4_0"},   {"iq4_xs", 64, "iq4_nl"},
                     {"q4_K", 172, "f16"},   {"q4_K", 512, "q4_K"},  {"q5_1", 40, "q5_1"}};
  for (const Case& c : cases) {
    std::unique_ptr<Scheme> scheme = *ParseScheme(c.scheme);
    EXPECT_EQ(scheme->AppliedName(c.cols), c.applied) << c.scheme << " " << c.cols;
    const std::vector<float> x = Gaussian(static_cast<size_t>(2 * c.cols), 5, 0.1f);
    std::vector<float> out(x.size()), want(x.size());
    SchemeCounts counts;
    scheme->Apply(x, c.cols, {}, out, counts);
    if (std::string(c.applied) == "f16") {
      for (size_t i = 0; i < x.size(); ++i) {
        want[i] = ggml::Fp16ToFp32(ggml::Fp32ToFp16(x[i]));
      }
      EXPECT_EQ(scheme->StorageBits(2, c.cols), static_cast<uint64_t>(2 * c.cols * 16));
    } else {
      std::unique_ptr<Scheme> applied = *ParseScheme(c.applied);
      applied->Apply(x, c.cols, {}, want, counts);
      EXPECT_EQ(scheme->StorageBits(2, c.cols), applied->StorageBits(2, c.cols));
    }
    EXPECT_EQ(out, want) << c.scheme << " " << c.cols;
  }
}

// ---------------------------------------------------------------- grid i-quants

// The 8-element codebooks of the grid i-quants, read back through the block
// layouts: one octet's code in an otherwise zero block with d = 1.
struct GridType {
  ggml::Type type;
  int points;
  // Writes octet 0's grid index into a zeroed block, with sign bits 0 and
  // (iq2) group scale 15, so that it decodes to db * value.
  void (*place)(std::vector<uint8_t>& b, int index);
  float db;
  bool iq1;
};

const GridType kGridTypes[] = {
    {ggml::Type::kIQ2_XXS, 256,
     [](std::vector<uint8_t>& b, int index) {
       b[2] = static_cast<uint8_t>(index);
       b[9] = 15 << 4;  // group 0's word 1, bits 28..31
     },
     (0.5f + 15) * 0.25f, false},
    {ggml::Type::kIQ2_XS, 512,
     [](std::vector<uint8_t>& b, int index) {
       b[2] = static_cast<uint8_t>(index);
       b[3] = static_cast<uint8_t>(index >> 8);
       b[66] = 15;  // scales[0]
     },
     (0.5f + 15) * 0.25f, false},
    {ggml::Type::kIQ2_S, 1024,
     [](std::vector<uint8_t>& b, int index) {
       b[2] = static_cast<uint8_t>(index);
       b[66] = static_cast<uint8_t>(index >> 8);  // qh[0] bits 0..1
       b[74] = 15;                                // scales[0]
     },
     (0.5f + 15) * 0.25f, false},
    {ggml::Type::kIQ1_S, 2048,
     [](std::vector<uint8_t>& b, int index) {
       b[2] = static_cast<uint8_t>(index);
       b[34] = static_cast<uint8_t>(index >> 8);  // qh[0] bits 0..2; scale 0: dl = d
     },
     1.0f, true},
    {ggml::Type::kIQ1_M, 2048,
     [](std::vector<uint8_t>& b, int index) {
       b[0] = static_cast<uint8_t>(index);
       b[32] = static_cast<uint8_t>(index >> 8);  // qh[0] bits 0..2
       b[53] = 0xc0;                              // fp16 1.0 = 0x3c00 in the 4 top nibbles
       b[55] = 0x30;
     },
     1.0f, true},
};

// A few entries of ggml-common.h's iq2xxs_grid, iq2xs_grid, iq2s_grid and
// iq1s_grid (byte j is element j).
const std::map<std::pair<ggml::Type, int>, uint64_t> kGridKnownAnswers = {
    {{ggml::Type::kIQ2_XXS, 1}, 0x080808080808082b},
    {{ggml::Type::kIQ2_XXS, 100}, 0x08192b0808081908},
    {{ggml::Type::kIQ2_XXS, 255}, 0x2b2b2b1908081908},
    {{ggml::Type::kIQ2_XS, 300}, 0x1908190808191908},
    {{ggml::Type::kIQ2_XS, 511}, 0x2b2b2b2b2b2b2b2b},
    {{ggml::Type::kIQ2_S, 700}, 0x1919082b2b080808},
    {{ggml::Type::kIQ2_S, 1023}, 0x2b2b2b2b2b2b2b2b},
    {{ggml::Type::kIQ1_S, 1234}, 0x0001ff00ff01ff01},
    {{ggml::Type::kIQ1_S, 2047}, 0x0101010101010101},
    {{ggml::Type::kIQ1_M, 0}, 0xffffffffffffffff},
};

TEST(GgmlGridQuants, EveryIndexDecodesToItsGridPoint) {
  for (const GridType& g : kGridTypes) {
    const ggml::TypeInfo& info = ggml::Info(g.type);
    std::set<std::vector<float>> seen;
    for (int index = 0; index < g.points; ++index) {
      std::vector<uint8_t> b(static_cast<size_t>(info.bytes), 0);
      if (!g.iq1 || g.type == ggml::Type::kIQ1_S) b[1] = 0x3c;  // d = 1.0
      g.place(b, index);
      std::vector<float> y(256);
      ASSERT_TRUE(ggml::Decode(g.type, b, y).ok());
      std::vector<float> octet(y.begin(), y.begin() + 8);
      for (float v : octet) {
        if (g.iq1) {
          EXPECT_THAT(v, ::testing::AnyOf(-0.875f, 0.125f, 1.125f)) << info.name << index;
        } else {
          EXPECT_THAT(v, ::testing::AnyOf(g.db * 8, g.db * 25, g.db * 43)) << info.name << index;
        }
      }
      EXPECT_TRUE(seen.insert(octet).second)
          << info.name << " index " << index << " repeats a point";
      const auto known = kGridKnownAnswers.find({g.type, index});
      if (known != kGridKnownAnswers.end()) {
        for (int j = 0; j < 8; ++j) {
          const auto byte = static_cast<uint8_t>(known->second >> 8 * j);
          const float want = g.iq1 ? static_cast<int8_t>(byte) + 0.125f : g.db * byte;
          EXPECT_EQ(octet[j], want) << info.name << index << " " << j;
        }
      }
    }
  }
}

// Blocks whose elements lie on the grid (every octet a point, one scale per
// group, signs with an even count for the types that store 7) keep their
// points and signs through the encoder.
TEST(GgmlGridQuants, OnGridBlocksKeepTheirCodes) {
  std::mt19937 rng(5);
  for (const GridType& g : kGridTypes) {
    const ggml::TypeInfo& info = ggml::Info(g.type);
    // The codebook as decoded, to read levels off.
    std::vector<std::vector<int>> levels(static_cast<size_t>(g.points));
    for (int index = 0; index < g.points; ++index) {
      std::vector<uint8_t> b(static_cast<size_t>(info.bytes), 0);
      if (!g.iq1 || g.type == ggml::Type::kIQ1_S) b[1] = 0x3c;
      g.place(b, index);
      std::vector<float> y(256);
      ASSERT_TRUE(ggml::Decode(g.type, b, y).ok());
      for (int j = 0; j < 8; ++j) {
        levels[index].push_back(g.iq1 ? static_cast<int>(std::lround(y[j] - 0.125f)) + 1
                                : y[j] == g.db * 8  ? 0
                                : y[j] == g.db * 25 ? 1
                                                    : 2);
      }
    }
    const int group = g.type == ggml::Type::kIQ2_XXS || g.type == ggml::Type::kIQ1_S ? 32 : 16;
    for (int trial = 0; trial < 8; ++trial) {
      std::vector<int> index(32);
      std::vector<uint8_t> signs(32, 0);
      std::vector<float> x(256);
      for (int o = 0; o < 32; ++o) {
        // Each group holds every level (iq1) or level 2 (iq2): its scale is then unique.
        for (;;) {
          index[o] = std::uniform_int_distribution<int>(0, g.points - 1)(rng);
          const std::vector<int>& l = levels[index[o]];
          const bool has2 = std::count(l.begin(), l.end(), 2) > 0;
          const bool all = has2 && std::count(l.begin(), l.end(), 0) > 0 &&
                           std::count(l.begin(), l.end(), 1) > 0;
          if ((o * 8) % group != 0 || (g.iq1 ? all : has2)) break;
        }
        if (!g.iq1) {
          signs[o] = static_cast<uint8_t>(rng());
          if (g.type != ggml::Type::kIQ2_S && std::popcount(signs[o]) % 2) signs[o] ^= 0x80;
        }
        for (int j = 0; j < 8; ++j) {
          const int l = levels[index[o]][j];
          const float v = g.iq1 ? (l - 1) + 0.125f : static_cast<float>(2 * l + 1);
          x[8 * o + j] = (signs[o] >> j & 1) ? -v : v;
        }
      }
      std::vector<float> ones(256, 1.0f);
      std::vector<uint8_t> b(static_cast<size_t>(info.bytes));
      ASSERT_TRUE(ggml::Encode(g.type, x, b, nullptr, ones).ok());
      for (int o = 0; o < 32; ++o) {
        int got = 0, got_signs = 0;
        switch (g.type) {
          case ggml::Type::kIQ2_XXS: {
            got = b[2 + 8 * (o / 4) + o % 4];
            uint32_t word1;  // the group's signs and scale
            std::memcpy(&word1, &b[6 + 8 * (o / 4)], 4);
            got_signs = static_cast<int>(word1 >> 7 * (o % 4) & 127);
            break;
          }
          case ggml::Type::kIQ2_XS:
            got = (b[2 + 2 * o] | b[3 + 2 * o] << 8) & 511;
            got_signs = b[3 + 2 * o] >> 1;
            break;
          case ggml::Type::kIQ2_S:
            got = b[2 + o] | (b[66 + o / 4] >> 2 * (o % 4) & 3) << 8;
            got_signs = b[34 + o];
            break;
          case ggml::Type::kIQ1_S:
            got = b[2 + o] | ((b[34 + 2 * (o / 4)] | b[35 + 2 * (o / 4)] << 8) >> 3 * (o % 4) & 7)
                                 << 8;
            EXPECT_EQ(b[35 + 2 * (o / 4)] & 0x80, 0) << "shift +";
            break;
          default:  // iq1_m
            got = b[o] | (b[32 + o / 2] >> 4 * (o % 2) & 7) << 8;
            EXPECT_EQ(b[32 + o / 2] >> (4 * (o % 2) + 3) & 1, 0) << "shift +";
            break;
        }
        EXPECT_EQ(got, index[o]) << info.name << " trial " << trial << " octet " << o;
        const int want_signs = g.type == ggml::Type::kIQ2_S ? signs[o] : signs[o] & 127;
        EXPECT_EQ(got_signs, g.iq1 ? 0 : want_signs) << info.name << " octet " << o;
      }
    }
  }
}

TEST(GgmlGridQuants, ImportanceIsRequiredWhereGgmlRequiresIt) {
  const std::vector<float> x = Gaussian(512, 9);
  for (ggml::Type t : {ggml::Type::kIQ2_XXS, ggml::Type::kIQ2_XS, ggml::Type::kIQ2_S,
                       ggml::Type::kIQ1_S, ggml::Type::kIQ1_M}) {
    const ggml::TypeInfo& info = ggml::Info(t);
    std::vector<uint8_t> b(static_cast<size_t>(ggml::RowBytes(info, 512)));
    const absl::Status s = ggml::Encode(t, x, b);
    EXPECT_EQ(s.ok(), !info.needs_importance) << info.name << s;
    if (!s.ok()) {
      EXPECT_THAT(s.message(), HasSubstr("needs an importance matrix"));
    }
    // Decoding what was encoded comes near the input: the relative error of
    // a 1-2 bit code on Gaussian data.
    std::vector<float> importance(512, 1.0f), y(512);
    ASSERT_TRUE(ggml::Encode(t, x, b, nullptr, importance).ok());
    ASSERT_TRUE(ggml::Decode(t, b, y).ok());
    double err = 0, norm = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      err += (y[i] - x[i]) * (y[i] - x[i]);
      norm += x[i] * x[i];
    }
    EXPECT_LT(err / norm, 0.5) << info.name;
  }
}

// ---------------------------------------------------------------- recipes

std::string Choose(const char* recipe, const std::string& name, std::vector<int64_t> shape,
                   const RecipeModel& model) {
  std::unique_ptr<Scheme> scheme = *ParseScheme(recipe);
  return AsRecipe(*scheme)->Choose(name, shape, model).scheme;
}

// llama_tensor_get_type's rules on a Llama-3-8B-like model: 32 layers, gqa 4.
TEST(Recipes, LlamaRules) {
  RecipeModel m;
  m.layers = 32;
  m.attention_v = 32;
  m.gqa = 4;
  m.has_output = true;
  const auto v = [](int i) { return "model.layers." + std::to_string(i) + ".self_attn.v_proj.weight"; };
  const auto down = [](int i) { return "blk." + std::to_string(i) + ".ffn_down.weight"; };
  // use_more_bits(i, 32): i < 4, i >= 28, or (i - 4) % 3 == 2.
  for (int i : {0, 3, 6, 9, 28, 31}) {
    EXPECT_EQ(Choose("Q4_K_M", v(i), {1024, 4096}, m), "q6_K") << i;
    EXPECT_EQ(Choose("Q4_K_M", down(i), {4096, 14336}, m), "q6_K") << i;
  }
  for (int i : {4, 5, 7, 25}) {
    EXPECT_EQ(Choose("Q4_K_M", v(i), {1024, 4096}, m), "q4_K") << i;
    EXPECT_EQ(Choose("Q4_K_M", down(i), {4096, 14336}, m), "q4_K") << i;
  }
  EXPECT_EQ(Choose("Q4_K_M", "lm_head.weight", {128256, 4096}, m), "q6_K");
  EXPECT_EQ(Choose("Q4_K_M", "token_embd.weight", {128256, 4096}, m), "q4_K");
  EXPECT_EQ(Choose("Q4_K_M", "model.layers.3.input_layernorm.weight", {4096}, m), "f32");
  EXPECT_EQ(Choose("Q4_K_M", "model.layers.3.mlp.gate_proj.weight", {14336, 4096}, m), "q4_K");
  EXPECT_EQ(Choose("Q8_0", "output.weight", {128256, 4096}, m), "q8_0");
  EXPECT_EQ(Choose("Q6_K", "output.weight", {128256, 4096}, m), "q6_K");
  // Q2_K: attn_v by the grouped-query ratio, ffn_down and attn_output q3_K.
  EXPECT_EQ(Choose("Q2_K", v(10), {1024, 4096}, m), "q4_K");
  EXPECT_EQ(Choose("Q2_K", down(10), {4096, 14336}, m), "q3_K");
  EXPECT_EQ(Choose("Q2_K", "blk.1.attn_output.weight", {4096, 4096}, m), "q3_K");
  EXPECT_EQ(Choose("Q2_K", "blk.1.attn_q.weight", {4096, 4096}, m), "q2_K");
  // Q3_K_M: attn_v 0 and 1 q5_K, then q4_K; ffn_down below n/16 q5_K.
  EXPECT_EQ(Choose("Q3_K_M", v(1), {1024, 4096}, m), "q5_K");
  EXPECT_EQ(Choose("Q3_K_M", v(2), {1024, 4096}, m), "q4_K");
  EXPECT_EQ(Choose("Q3_K_M", down(1), {4096, 14336}, m), "q5_K");
  EXPECT_EQ(Choose("Q3_K_M", down(2), {4096, 14336}, m), "q4_K");
  EXPECT_EQ(Choose("Q3_K_M", "blk.2.attn_output.weight", {4096, 4096}, m), "q4_K");
  // Q4_K_S: attn_v below 4 and ffn_down below n/8 in q5_K.
  EXPECT_EQ(Choose("Q4_K_S", v(3), {1024, 4096}, m), "q5_K");
  EXPECT_EQ(Choose("Q4_K_S", v(4), {1024, 4096}, m), "q4_K");
  // Tied embeddings: token_embd takes the output's rule.
  RecipeModel tied = m;
  tied.has_output = false;
  EXPECT_EQ(Choose("Q4_K_M", "model.embed_tokens.weight", {128256, 4096}, tied), "q6_K");
  // 70B (80 layers, grouped-query): attn_v in q3_K or q4_K becomes q5_K.
  RecipeModel big = m;
  big.layers = big.attention_v = 80;
  EXPECT_EQ(Choose("Q4_K_S", v(10), {1024, 8192}, big), "q5_K");
  // Mixtral-like 8 experts: attn_v and attn_k q8_0.
  RecipeModel moe = m;
  moe.experts = 8;
  EXPECT_EQ(Choose("Q4_K_M", v(10), {1024, 4096}, moe), "q8_0");
  EXPECT_EQ(Choose("Q4_K_M", "blk.0.attn_k.weight", {1024, 4096}, moe), "q8_0");
  // Fallbacks: q8_0 output for rows of 64; f16 when llama.cpp has none.
  EXPECT_EQ(Choose("Q4_K_M", "output.weight", {512, 64}, m), "q8_0");
  EXPECT_EQ(Choose("Q8_0", "blk.0.ffn_down.weight", {64, 172}, m), "f16");
  EXPECT_EQ(Choose("Q2_K", "blk.0.attn_q.weight", {64, 64}, m), "q4_0");
}

RecipeChoice ChooseWith(const char* recipe, const std::string& name, std::vector<int64_t> shape,
                        const RecipeModel& model) {
  std::unique_ptr<Scheme> scheme = *ParseScheme(recipe);
  return AsRecipe(*scheme)->Choose(name, shape, model);
}

// The mixes made with an importance matrix, on the same Llama-3-8B-like
// model (llama_tensor_get_type's IQ branch and tensor_requires_imatrix).
TEST(Recipes, ImatrixMixRules) {
  RecipeModel m;
  m.layers = 32;
  m.attention_v = 32;
  m.gqa = 4;
  m.has_output = true;
  m.has_imatrix = true;
  const std::vector<int64_t> sq = {4096, 4096}, kv = {1024, 4096}, down = {4096, 14336};
  // IQ2_XXS: attn_v q4_K (gqa 4), ffn_down below n/8 q2_K, output q5_K,
  // token_embd q2_K, the rest iq2_xxs; only the grid types need the imatrix.
  EXPECT_EQ(Choose("IQ2_XXS", "blk.0.attn_v.weight", kv, m), "q4_K");
  EXPECT_EQ(Choose("IQ2_XXS", "blk.3.ffn_down.weight", down, m), "q2_K");
  EXPECT_EQ(Choose("IQ2_XXS", "blk.4.ffn_down.weight", down, m), "iq2_xxs");
  EXPECT_EQ(Choose("IQ2_XXS", "output.weight", {128256, 4096}, m), "q5_K");
  EXPECT_EQ(Choose("IQ2_XXS", "token_embd.weight", {128256, 4096}, m), "q2_K");
  EXPECT_TRUE(ChooseWith("IQ2_XXS", "blk.4.attn_q.weight", sq, m).requires_imatrix);
  EXPECT_FALSE(ChooseWith("IQ2_XXS", "blk.3.ffn_down.weight", down, m).requires_imatrix);
  // Without grouped-query attention attn_v drops to q2_K (iq3_s for IQ2_S/M).
  RecipeModel mha = m;
  mha.gqa = 1;
  EXPECT_EQ(Choose("IQ2_XXS", "blk.0.attn_v.weight", sq, mha), "q2_K");
  EXPECT_EQ(Choose("IQ2_M", "blk.0.attn_v.weight", sq, mha), "iq3_s");
  // IQ2_S's default is iq2_xs, IQ2_M's iq2_s; attn_output iq3_s for both.
  EXPECT_EQ(Choose("IQ2_S", "blk.9.attn_q.weight", sq, m), "iq2_xs");
  EXPECT_EQ(Choose("IQ2_M", "blk.9.attn_q.weight", sq, m), "iq2_s");
  EXPECT_EQ(Choose("IQ2_M", "blk.9.attn_output.weight", sq, m), "iq3_s");
  EXPECT_EQ(Choose("IQ1_S", "blk.9.attn_output.weight", sq, m), "iq2_xxs");
  EXPECT_EQ(Choose("IQ1_M", "blk.9.ffn_up.weight", down, m), "iq1_m");
  // IQ3_XXS: attn_q and attn_k iq2_s, attn_output iq3_s, attn_v by gqa.
  EXPECT_EQ(Choose("IQ3_XXS", "blk.9.attn_q.weight", sq, m), "iq2_s");
  EXPECT_EQ(Choose("IQ3_XXS", "blk.9.attn_k.weight", kv, m), "iq2_s");
  EXPECT_EQ(Choose("IQ3_XXS", "blk.9.attn_output.weight", sq, m), "iq3_s");
  EXPECT_EQ(Choose("IQ3_XXS", "blk.9.attn_v.weight", kv, m), "q4_K");
  EXPECT_EQ(Choose("IQ3_XXS", "blk.9.attn_v.weight", sq, mha), "iq3_xxs");
  // IQ3_XS: the middle layers' gate and up iq3_xxs, the outer ones iq3_s.
  EXPECT_EQ(Choose("IQ3_XS", "blk.4.ffn_gate.weight", down, m), "iq3_xxs");
  EXPECT_EQ(Choose("IQ3_XS", "blk.28.ffn_up.weight", down, m), "iq3_s");
  EXPECT_EQ(Choose("IQ3_M", "blk.0.ffn_down.weight", down, m), "q4_K");
  EXPECT_EQ(Choose("IQ3_M", "blk.9.attn_output.weight", sq, m), "q4_K");
  EXPECT_EQ(Choose("IQ3_S", "output.weight", {128256, 4096}, m), "q6_K");
  // Q2_K_S: q2_K needs the imatrix there (not in Q2_K).
  EXPECT_TRUE(ChooseWith("Q2_K_S", "blk.9.attn_q.weight", sq, m).requires_imatrix);
  EXPECT_FALSE(ChooseWith("Q2_K", "blk.9.attn_q.weight", sq, m).requires_imatrix);
  EXPECT_EQ(Choose("Q2_K_S", "blk.0.ffn_down.weight", down, m), "q4_K");
  // The imatrix changes choices of the older mixes too.
  RecipeModel plain = m;
  plain.has_imatrix = false;
  EXPECT_EQ(Choose("IQ4_XS", "blk.0.ffn_down.weight", down, plain), "q5_K");
  EXPECT_EQ(Choose("IQ4_XS", "blk.0.ffn_down.weight", down, m), "iq4_xs");
  EXPECT_EQ(Choose("Q4_0", "blk.0.ffn_down.weight", down, plain), "q4_0");
  EXPECT_EQ(Choose("Q4_0", "blk.0.ffn_down.weight", down, m), "q4_1");
  RecipeModel mha_plain = mha;
  mha_plain.has_imatrix = false;
  EXPECT_EQ(Choose("IQ3_XXS", "blk.9.attn_v.weight", sq, mha_plain), "iq3_s");
  EXPECT_EQ(Choose("IQ3_XXS", "blk.0.ffn_down.weight", down, mha_plain), "q4_K");
  // Rows 256 does not divide: the grid types fall back to iq4_nl.
  EXPECT_EQ(Choose("IQ2_XXS", "blk.9.attn_q.weight", {64, 64}, m), "iq4_nl");
  EXPECT_FALSE(ChooseWith("IQ2_XXS", "blk.9.attn_q.weight", {64, 64}, m).requires_imatrix);
}

TEST(Recipes, ModelFactsFromTensorNames) {
  const TensorSet set = *TensorSet::Open(kOriginal);
  const RecipeModel m = RecipeModel::Of(set.tensors());
  EXPECT_EQ(m.layers, 5);
  EXPECT_EQ(m.attention_v, 5);
  EXPECT_EQ(m.gqa, 2);
  EXPECT_TRUE(m.has_output);
  EXPECT_EQ(m.experts, 0);
  const TensorSet gguf = *TensorSet::Open(kGguf);
  const RecipeModel g = RecipeModel::Of(gguf.tensors());
  EXPECT_EQ(g.layers, 5);
  EXPECT_EQ(g.attention_v, 5);
  EXPECT_EQ(g.gqa, 2);
  EXPECT_TRUE(g.has_output);
}

// ---------------------------------------------------------------- the ggml-made file

TEST(GgufReference, NamesMapAndRowOrder) {
  EXPECT_EQ(*HuggingFaceName("blk.3.attn_q.weight"), "model.layers.3.self_attn.q_proj.weight");
  EXPECT_EQ(*HuggingFaceName("blk.0.ffn_norm.weight"),
            "model.layers.0.post_attention_layernorm.weight");
  EXPECT_EQ(*HuggingFaceName("token_embd.weight"), "model.embed_tokens.weight");
  EXPECT_EQ(*HuggingFaceName("output.weight"), "lm_head.weight");
  EXPECT_EQ(*HuggingFaceName("blk.1.attn_k.bias"), "model.layers.1.self_attn.k_proj.bias");
  EXPECT_FALSE(HuggingFaceName("blk.0.ffn_down_exps.weight").has_value());
  EXPECT_FALSE(HuggingFaceName("rope_freqs.weight").has_value());
  EXPECT_FALSE(HuggingFaceName("blk.x.attn_q.weight").has_value());
  // Two heads of 4 rows: stored row 2b + a holds original row 2a + b.
  EXPECT_THAT(LlamaRopeRowOrder(8, 2), ElementsAre(0, 2, 1, 3, 4, 6, 5, 7));
  EXPECT_TRUE(LlamaRopeRowOrder(8, 3).empty());
}

// Every tensor of the file is matched, attn_q/attn_k only with the
// converter's permutation undone, and each one's error equals lowp's Q4_K_M
// on the original: same type chosen, same bytes, so the same values (the
// double sums may differ in their last bits: different chunking).
TEST(GgufReference, FileEqualsLowpsOwnRecipe) {
  api::QuantErrorOptions ref;
  ref.inputs.files = {kGguf};
  ref.reference = {kOriginal};
  const api::QuantErrorResult file = *api::QuantError(ref);
  EXPECT_TRUE(file.unmatched.empty());
  EXPECT_TRUE(file.skipped.empty());
  api::QuantErrorOptions own;
  own.inputs.files = {kOriginal};
  own.schemes = {"Q4_K_M"};
  const api::QuantErrorResult recipe = *api::QuantError(own);
  std::map<std::string, const QuantReport*> by_name;
  for (const QuantReport& r : recipe.results) by_name[r.tensor] = &r;
  ASSERT_EQ(file.results.size(), 48u);
  ASSERT_EQ(file.results.size(), recipe.results.size());
  for (size_t i = 0; i < file.results.size(); ++i) {
    const QuantReport& f = file.results[i];
    const api::ReferenceMatch& m = file.matches[i];
    const bool qk = absl::StrContains(f.tensor, "attn_q.") || absl::StrContains(f.tensor, "attn_k.");
    EXPECT_EQ(m.rope_permuted, qk) << f.tensor;
    const QuantReport& r = *by_name.at(m.reference);
    // The type the file stores is the one lowp's recipe chose.
    std::string type = f.scheme;
    for (char& c : type) c = static_cast<char>(std::tolower(c));
    EXPECT_EQ(type, r.applied) << f.tensor;
    EXPECT_EQ(f.storage_bits, r.storage_bits) << f.tensor;
    EXPECT_EQ(f.stats.measured, r.stats.measured);
    EXPECT_EQ(f.stats.max_abs_error, r.stats.max_abs_error) << f.tensor;
    EXPECT_EQ(f.stats.zeroed, r.stats.zeroed) << f.tensor;
    // Two paths' sums, each within kernels/error_stats.h's bound of the exact
    // one (float runs of 16 per lane, B = 21 2^-24 + n 2^-52): twice it apart.
    EXPECT_NEAR(f.stats.sum_squared_error, r.stats.sum_squared_error,
                2 * (21 * 0x1p-24 + 1e-12) * r.stats.sum_squared_error + 1e-300) << f.tensor;
  }
  // Without undoing the permutation q and k would not match at all.
  const TensorSet gguf = *TensorSet::Open(kGguf);
  const TensorSet original = *TensorSet::Open(kOriginal);
  const TensorView* q = nullptr;
  const TensorView* q_ref = nullptr;
  for (const TensorView& t : gguf.tensors()) if (t.name == "blk.0.attn_q.weight") q = &t;
  for (const TensorView& t : original.tensors()) {
    if (t.name == "model.layers.0.self_attn.q_proj.weight") q_ref = &t;
  }
  ASSERT_TRUE(q != nullptr && q_ref != nullptr);
  const QuantReport as_stored = *CompareTensors(*q_ref, *q, {});
  const QuantReport undone = *CompareTensors(*q_ref, *q, {}, LlamaRopeRowOrder(64, 8));
  EXPECT_LT(as_stored.sqnr_db(), 0.0);  // worse than storing zeros

  EXPECT_GT(undone.sqnr_db(), 25.0);
}

TEST(GgufReference, SizePricesTheMixToTheByte) {
  api::TensorsOptions t;
  t.files = {kGguf};
  const api::TensorsResult listed = *api::Tensors(t);
  EXPECT_EQ(listed.tensors.size(), 48u);
  api::SizeOptions s;
  s.model = kData + "/stories260K-hf";
  s.sizing.mode = Mode::kInference;
  s.sizing.weights = "Q4_K_M";
  const SizingReport report = *api::Size(s);
  EXPECT_EQ(static_cast<uint64_t>(report.whole.weights), listed.bytes);
}

TEST(GgufReference, ReferenceOptionsAreChecked) {
  api::QuantErrorOptions o;
  o.inputs.files = {kGguf};
  o.reference = {kOriginal};
  o.schemes = {"q4_K"};
  EXPECT_THAT(api::QuantError(o).status().message(), HasSubstr("scheme"));
  o.schemes.clear();
  o.reference = {kData + "/ggml/none.safetensors"};
  EXPECT_THAT(api::QuantError(o).status().message(), HasSubstr("none.safetensors"));
  // A reference without the tensors: every one unmatched, listed.
  o.reference = {kData + "/ggml/metadata.gguf"};
  const api::QuantErrorResult r = *api::QuantError(o);
  EXPECT_EQ(r.unmatched.size(), 48u);
  EXPECT_TRUE(r.results.empty());
}

TEST(Tensors, ListsGgufTypesShapesAndMetadata) {
  api::TensorsOptions o;
  o.files = {kData + "/ggml/metadata.gguf"};
  o.metadata = true;
  const api::TensorsResult r = *api::Tensors(o);
  ASSERT_EQ(r.tensors.size(), 3u);
  EXPECT_EQ(r.tensors[0].type, "F32");
  EXPECT_THAT(r.tensors[0].shape, ElementsAre(2, 3));  // ne [3, 2] reversed
  EXPECT_EQ(r.tensors[2].type, "q8_0");
  EXPECT_EQ(r.tensors[2].bytes, 136u);
  EXPECT_DOUBLE_EQ(r.tensors[2].bits_per_weight, 8.5);
  ASSERT_EQ(r.files.size(), 1u);
  EXPECT_EQ(r.files[0].gguf_version, 3u);
  EXPECT_EQ(r.files[0].alignment, 64u);
  std::map<std::string, const api::MetadataEntry*> meta;
  for (const api::MetadataEntry& m : r.files[0].metadata) meta[m.key] = &m;
  EXPECT_EQ(meta.at("test.arr.string")->type, "array[string]");
  EXPECT_EQ(meta.at("test.arr.string")->value[2], "ünicöde €");
  EXPECT_EQ(meta.at("test.uint64")->value.get<uint64_t>(), 18000000000000000000ull);
  EXPECT_EQ(meta.at("test.int8")->value.get<int>(), -100);
  EXPECT_EQ(meta.at("test.bool")->value.get<bool>(), true);
  o.tensors = "nothing*";
  EXPECT_THAT(api::Tensors(o).status().message(), HasSubstr("matches no tensor"));
}

}  // namespace
}  // namespace lowp
