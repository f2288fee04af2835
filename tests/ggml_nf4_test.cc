// llama.cpp q8_0 / q4_0 / q4_1 / q5_0 and bitsandbytes NF4 (with and without
// double quantization): known answers worked out by hand, the stored form,
// storage, and the error on a Gaussian tensor against what each rule predicts.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "quant/scheme.h"
#include "tests/scheme_run.h"

namespace lowp {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::AnyOf;
using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

using testing::Make;
using testing::Result;

Result Quantize(const Scheme& scheme, const std::vector<float>& in, int64_t cols,
                bool keep_stored = true) {
  return testing::RunScheme(scheme, in, cols, keep_stored);
}

std::vector<float> Block32(std::initializer_list<float> head) {
  std::vector<float> x(32, 0.0f);
  std::copy(head.begin(), head.end(), x.begin());
  return x;
}

// ---------------------------------------------------------------- names

TEST(GgmlNf4Names, ParseAndOptions) {
  for (const char* name : {"q8_0", "q4_0", "q4_1", "q5_0", "nf4", "nf4:double-quant"}) {
    std::unique_ptr<Scheme> scheme = Make(name);
    ASSERT_NE(scheme, nullptr);
    EXPECT_EQ(scheme->name(), name);
  }
  EXPECT_THAT(ParseScheme("q4_0:scale=fp32").status().message(), HasSubstr("scale"));
  EXPECT_FALSE(ParseScheme("q8_0:double-quant").ok());
  EXPECT_THAT(ParseScheme("nf4:clip=mse").status().message(), HasSubstr("double-quant"));
  EXPECT_FALSE(ParseScheme("nf4:double-quant=yes").ok());
  EXPECT_FALSE(ParseScheme("q4_2").ok());
}

TEST(GgmlNf4Names, FamiliesStateTheRules) {
  int ggml = 0;
  int nf4 = 0;
  int mixes = 0;
  for (const SchemeFamily& family : SchemeFamilies()) {
    if (family.family == "llama.cpp mixes") {
      ++mixes;
      EXPECT_THAT(family.rule, HasSubstr("llama_tensor_get_type"));
      EXPECT_THAT(family.rule, HasSubstr("fallback"));
    } else if (family.family.find("llama.cpp") != std::string::npos) {
      ++ggml;
      EXPECT_THAT(family.rule, HasSubstr("bits per weight"));
      // What a row the block does not divide gets: zero padding, or (for
      // the 256-element super-blocks) llama.cpp's fallback type.
      EXPECT_THAT(family.rule, AnyOf(HasSubstr("padded with zeros"), HasSubstr("fallback")));
    }
    if (family.family.find("NF4") != std::string::npos) {
      ++nf4;
      EXPECT_THAT(family.rule, HasSubstr("dQuantizeNF4"));
      EXPECT_THAT(family.rule, HasSubstr("create_dynamic_map"));
    }
  }
  // q8_0 q4_0 q4_1 q5_0, then q5_1 q2_K..q6_K iq4_nl iq4_xs, the grid i-quants iq2_xxs iq2_xs
  // iq2_s iq3_xxs iq3_s iq1_s iq1_m, ggml-mxfp4 ggml-nvfp4.
  EXPECT_EQ(ggml, 21);
  EXPECT_EQ(nf4, 1);
  EXPECT_EQ(mixes, 1);
}

// ---------------------------------------------------------------- q8_0

TEST(Q8_0, TiesRoundAwayFromZero) {
  // amax = 127 -> d = 127/127 = 1 (exact in fp16), id = 1: q = roundf(x).
  // 2.5 -> 3, -2.5 -> -3, 0.5 -> 1, -0.5 -> -1 (halves away from zero, not to
  // even); 1.49 -> 1; -126.5 -> -127.
  auto scheme = Make("q8_0");
  const std::vector<float> x = Block32({127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.49f, -126.5f});
  Result r = Quantize(*scheme, x, 32);
  EXPECT_THAT(std::vector<int32_t>(r.stored.codes.begin(), r.stored.codes.begin() + 8),
              ElementsAre(127, 3, -3, 1, -1, 1, -127, 0));
  EXPECT_THAT(r.stored.scales, ElementsAre(1.0f));
  EXPECT_TRUE(r.stored.offsets.empty());
  EXPECT_THAT(std::vector<float>(r.out.begin(), r.out.begin() + 7),
              ElementsAre(127.0f, 3.0f, -3.0f, 1.0f, -1.0f, 1.0f, -127.0f));
  EXPECT_EQ(r.counts.clipped, 0u);
}

TEST(Q8_0, Fp16ScaleAndUnroundedId) {
  // amax = 1 -> d = 1/127 = 0.0078740157; fp16 has ulp 2^-17 in [2^-7, 2^-6):
  // (d - 2^-7) / 2^-17 = 8.06 -> 8, stored d = 2^-7 + 8 * 2^-17 =
  // 0.00787353515625. Codes use the unrounded id = 1/d = 127.0000: 1 -> 127,
  // 0.5 -> 63.5 -> 64 (away from zero). Dequantized 127 * 0.00787353515625 =
  // 0.99993896484375 (= 1 - 2^-14), 64 * stored d = 0.50390625.
  auto scheme = Make("q8_0");
  Result r = Quantize(*scheme, Block32({1.0f, 0.5f}), 32);
  EXPECT_EQ(r.stored.scales[0], 0.00787353515625f);
  EXPECT_EQ(r.stored.codes[0], 127);
  EXPECT_EQ(r.stored.codes[1], 64);
  EXPECT_EQ(r.out[0], 0.99993896484375f);
  EXPECT_EQ(r.out[1], 0.50390625f);
}

TEST(Q8_0, ZeroBlockShortBlockAndNonFinite) {
  // Row of 40: block 0 is all zeros (d = 0, id = 0: codes 0, out 0); block 1
  // holds 8 elements [NaN, +Inf, -Inf, -12.7, 6.35, 0, 0, 0]: amax over the
  // finite ones = 12.7 -> d = 0.1 in float32, id = 1/d; -12.7 -> -127,
  // 6.35 -> 63.5 -> 64 or 63 by the float product, checked against
  // roundf(6.35f * (1 / (12.7f / 127))). Non-finite come back unchanged, code 0.
  auto scheme = Make("q8_0");
  std::vector<float> x(40, 0.0f);
  x[32] = kNaN;
  x[33] = kInf;
  x[34] = -kInf;
  x[35] = -12.7f;
  x[36] = 6.35f;
  Result r = Quantize(*scheme, x, 40);
  ASSERT_EQ(r.stored.scales.size(), 2u);
  ASSERT_EQ(r.stored.codes.size(), 40u);
  EXPECT_EQ(r.stored.scales[0], 0.0f);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(r.out[j], 0.0f);
  EXPECT_TRUE(std::isnan(r.out[32]));
  EXPECT_EQ(r.out[33], kInf);
  EXPECT_EQ(r.out[34], -kInf);
  EXPECT_EQ(r.stored.codes[32], 0);
  EXPECT_EQ(r.stored.codes[33], 0);
  const float d = 12.7f / 127.0f;
  const float id = 1.0f / d;
  EXPECT_EQ(r.stored.codes[35], -127);
  EXPECT_EQ(r.stored.codes[36], static_cast<int32_t>(std::round(6.35f * id)));
  // fp16(0.1) = 1638 * 2^-14 = 0.0999755859375 (0.1 / 2^-14 = 1638.4).
  EXPECT_EQ(r.stored.scales[1], 0.0999755859375f);
  EXPECT_EQ(r.out[35], -127.0f * 0.0999755859375f);
  EXPECT_EQ(r.counts.clipped, 0u);
}

// ---------------------------------------------------------------- q4_0

TEST(Q4_0, NegativeMaxTiesAndClamp) {
  // Largest |x| is 8, first met as -8 (the later +8 does not replace it):
  // max = -8, d = -8 / -8 = 1, id = 1, q = min(15, trunc(x + 8.5)).
  //   -8 -> 0.5 -> 0;  8 -> 16.5 -> 16 -> clamped 15 (clipped);
  //   0.5 -> 9.0 -> 9 (the .5 tie truncates up); -0.5 -> 8.0 -> 8;
  //   1.5 -> 10; -1.5 -> 7.0 -> 7; 2.49 -> 10.99 -> 10; 0 -> 8.
  // Dequantized (q - 8) * 1.
  auto scheme = Make("q4_0");
  Result r = Quantize(*scheme, Block32({-8.0f, 8.0f, 0.5f, -0.5f, 1.5f, -1.5f, 2.49f}), 32);
  EXPECT_THAT(std::vector<int32_t>(r.stored.codes.begin(), r.stored.codes.begin() + 8),
              ElementsAre(0, 15, 9, 8, 10, 7, 10, 8));
  EXPECT_THAT(r.stored.scales, ElementsAre(1.0f));
  EXPECT_THAT(std::vector<float>(r.out.begin(), r.out.begin() + 8),
              ElementsAre(-8.0f, 7.0f, 1.0f, 0.0f, 2.0f, -1.0f, 2.0f, 0.0f));
  EXPECT_EQ(r.counts.clipped, 1u);
}

TEST(Q4_0, PositiveMaxGivesNegativeScale) {
  // max = +4 (first of 4, -4): d = 4 / -8 = -0.5, id = -2.
  //   4 -> -8 + 8.5 = 0.5 -> 0 -> (0 - 8) * -0.5 = 4
  //   -4 -> 8 + 8.5 = 16.5 -> 16 -> 15 (clipped) -> 7 * -0.5 = -3.5
  //   1 -> -2 + 8.5 = 6.5 -> 6 -> -2 * -0.5 = 1
  //   0.25 -> -0.5 + 8.5 = 8 -> 0;  -0.25 -> 9 -> -0.5
  auto scheme = Make("q4_0");
  Result r = Quantize(*scheme, Block32({4.0f, -4.0f, 1.0f, 0.25f, -0.25f}), 32);
  EXPECT_THAT(r.stored.scales, ElementsAre(-0.5f));
  EXPECT_THAT(std::vector<int32_t>(r.stored.codes.begin(), r.stored.codes.begin() + 5),
              ElementsAre(0, 15, 6, 8, 9));
  EXPECT_THAT(std::vector<float>(r.out.begin(), r.out.begin() + 5),
              ElementsAre(4.0f, -3.5f, 1.0f, 0.0f, -0.5f));
  EXPECT_EQ(r.counts.clipped, 1u);
}

TEST(Q4_0, ZeroBlockShortBlockNonFinite) {
  // Row of 33: block 0 all zero -> d = 0, codes 8, out 0. Block 1 = [NaN]
  // only: no finite element, max = 0, d = 0; the NaN comes back with code 8.
  auto scheme = Make("q4_0");
  std::vector<float> x(33, 0.0f);
  x[32] = kNaN;
  Result r = Quantize(*scheme, x, 33);
  EXPECT_THAT(r.stored.scales, ElementsAre(0.0f, 0.0f));
  EXPECT_EQ(r.stored.codes.size(), 33u);
  for (int j = 0; j < 32; ++j) {
    EXPECT_EQ(r.stored.codes[j], 8);
    EXPECT_EQ(r.out[j], 0.0f);
  }
  EXPECT_EQ(r.stored.codes[32], 8);
  EXPECT_TRUE(std::isnan(r.out[32]));
}

// ---------------------------------------------------------------- q5_0

TEST(Q5_0, TiesClampAndNegativeMax) {
  // max = -16 (first), d = 1, id = 1, q = min(31, trunc(x + 16.5)).
  //   -16 -> 0; 16 -> 32 -> 31 (clipped); 0.5 -> 17; -0.5 -> 16; 3 -> 19;
  //   -3.2 -> 13.3 -> 13.  Dequantized (q - 16) * 1.
  auto scheme = Make("q5_0");
  Result r = Quantize(*scheme, Block32({-16.0f, 16.0f, 0.5f, -0.5f, 3.0f, -3.2f}), 32);
  EXPECT_THAT(std::vector<int32_t>(r.stored.codes.begin(), r.stored.codes.begin() + 7),
              ElementsAre(0, 31, 17, 16, 19, 13, 16));
  EXPECT_THAT(std::vector<float>(r.out.begin(), r.out.begin() + 6),
              ElementsAre(-16.0f, 15.0f, 1.0f, 0.0f, 3.0f, -3.0f));
  EXPECT_THAT(r.stored.scales, ElementsAre(1.0f));
  EXPECT_EQ(r.counts.clipped, 1u);
}

TEST(Q5_0, PositiveMaxAndInf) {
  // Inf takes no part: max = +2 -> d = 2 / -16 = -0.125, id = -8.
  //   2 -> -16 + 16.5 = 0.5 -> 0 -> (0 - 16) * -0.125 = 2
  //   -1 -> 8 + 16.5 = 24.5 -> 24 -> 8 * -0.125 = -1
  //   0.0625 -> -0.5 + 16.5 = 16 -> 0
  auto scheme = Make("q5_0");
  Result r = Quantize(*scheme, Block32({kInf, 2.0f, -1.0f, 0.0625f}), 32);
  EXPECT_THAT(r.stored.scales, ElementsAre(-0.125f));
  EXPECT_THAT(std::vector<int32_t>(r.stored.codes.begin(), r.stored.codes.begin() + 4),
              ElementsAre(16, 0, 24, 16));
  EXPECT_THAT(std::vector<float>(r.out.begin(), r.out.begin() + 4),
              ElementsAre(kInf, 2.0f, -1.0f, 0.0f));
}

// ---------------------------------------------------------------- q4_1

TEST(Q4_1, MinMaxTiesAndOffset) {
  // min = -1, max = 14: d = 15 / 15 = 1, id = 1, m = -1;
  // q = min(15, trunc(x + 1 + 0.5)): -1 -> 0; 14 -> 15.5 -> 15; 0 -> 1;
  // 0.5 -> 2.0 -> 2 (tie up); 1.49 -> 2.99 -> 2. Dequantized q * 1 + (-1).
  auto scheme = Make("q4_1");
  Result r = Quantize(*scheme, Block32({-1.0f, 14.0f, 0.5f, 1.49f}), 32);
  EXPECT_THAT(std::vector<int32_t>(r.stored.codes.begin(), r.stored.codes.begin() + 5),
              ElementsAre(0, 15, 2, 2, 1));
  EXPECT_THAT(r.stored.scales, ElementsAre(1.0f));
  EXPECT_THAT(r.stored.offsets, ElementsAre(-1.0f));
  EXPECT_THAT(std::vector<float>(r.out.begin(), r.out.begin() + 5),
              ElementsAre(-1.0f, 14.0f, 1.0f, 1.0f, 0.0f));
  EXPECT_EQ(r.counts.clipped, 0u);
}

TEST(Q4_1, AllNegativeBlockAndFp16Minimum) {
  // All negative: min = -15.1, max = -0.1, d = 15 / 15 = 1 (float32: -0.1f -
  // -15.1f is 15.0 to within an ulp, so id = 1/d ~ 1), m = -15.1 stored as
  // fp16: ulp 2^-7 in [8, 16): 15.1 / 2^-7 = 1932.8 -> 1933 -> -15.1015625.
  // Codes from the unrounded min: -15.1 -> 0, -0.1 -> 15.5 -> 15.
  auto scheme = Make("q4_1");
  std::vector<float> x(32, -8.0f);
  x[0] = -15.1f;
  x[1] = -0.1f;
  Result r = Quantize(*scheme, x, 32);
  EXPECT_THAT(r.stored.offsets, ElementsAre(-15.1015625f));
  EXPECT_EQ(r.stored.codes[0], 0);
  EXPECT_EQ(r.stored.codes[1], 15);
  // -8 -> (7.1) * id + 0.5 = 7.6 -> 7.
  EXPECT_EQ(r.stored.codes[2], 7);
  EXPECT_EQ(r.out[0], -15.1015625f);
  EXPECT_EQ(r.out[2], 7.0f * r.stored.scales[0] + -15.1015625f);
}

TEST(Q4_1, ShortBlockIsPaddedWithZeros) {
  // Row of 35: block 1 holds [2, 3, 15]; its padding zeros make min = 0
  // (without them min would be 2): d = 15 / 15 = 1, m = 0;
  // 2 -> 2.5 -> 2, 3 -> 3, 15 -> 15.5 -> 15: exact round trip.
  // Block 0 is all zero: min = max = 0, d = 0, id = 0, q = trunc(0.5) = 0.
  auto scheme = Make("q4_1");
  std::vector<float> x(35, 0.0f);
  x[32] = 2.0f;
  x[33] = 3.0f;
  x[34] = 15.0f;
  Result r = Quantize(*scheme, x, 35);
  EXPECT_THAT(r.stored.scales, ElementsAre(0.0f, 1.0f));
  EXPECT_THAT(r.stored.offsets, ElementsAre(0.0f, 0.0f));
  EXPECT_THAT(std::vector<int32_t>(r.stored.codes.begin() + 32, r.stored.codes.end()),
              ElementsAre(2, 3, 15));
  EXPECT_THAT(std::vector<float>(r.out.begin() + 30, r.out.end()),
              ElementsAre(0.0f, 0.0f, 2.0f, 3.0f, 15.0f));
}

// ---------------------------------------------------------------- storage

TEST(GgmlStorage, WholeBlocksIncludingShortOnes) {
  // Bytes per block of 32: q8_0 2 + 32, q4_0 2 + 16, q4_1 4 + 16, q5_0 2 + 4 + 16.
  const struct {
    const char* name;
    uint64_t block_bits;
    double bpw;
  } cases[] = {{"q8_0", 272, 8.5}, {"q4_0", 144, 4.5}, {"q4_1", 160, 5.0}, {"q5_0", 176, 5.5}};
  for (const auto& c : cases) {
    auto scheme = Make(c.name);
    EXPECT_EQ(scheme->StorageBits(1, 32), c.block_bits) << c.name;
    EXPECT_EQ(scheme->StorageBits(2, 40), 4 * c.block_bits) << c.name;  // 2 blocks a row
    EXPECT_EQ(scheme->StorageBits(3, 1), 3 * c.block_bits) << c.name;
    EXPECT_EQ(scheme->StorageBits(0, 64), 0u) << c.name;
    EXPECT_DOUBLE_EQ(scheme->BitsPerWeight(4096, 4096), c.bpw) << c.name;
  }
}

TEST(Nf4Storage, CodesScalesAndDoubleQuant) {
  auto nf4 = Make("nf4");
  EXPECT_EQ(nf4->StorageBits(1, 64), 64u * 4 + 32);
  // 65 codes take 33 bytes; two blocks (the second short) take two fp32 absmax.
  EXPECT_EQ(nf4->StorageBits(1, 65), 33u * 8 + 2 * 32);
  EXPECT_EQ(nf4->StorageBits(3, 5), 8u * 8 + 3 * 32);
  EXPECT_DOUBLE_EQ(nf4->BitsPerWeight(4096, 4096), 4.5);
  auto dq = Make("nf4:double-quant");
  // 4096 x 4096: 262144 blocks of 64, 1024 groups of 256 block scales.
  const uint64_t expected = 4096ull * 4096 * 4 + 262144ull * 8 + 1024 * 32 + 32;
  EXPECT_EQ(dq->StorageBits(4096, 4096), expected);
  EXPECT_DOUBLE_EQ(dq->BitsPerWeight(4096, 4096),
                   4.0 + 8.0 / 64 + 32.0 / (64 * 256) + 32.0 / (4096.0 * 4096));
  // 1 x 640: 10 blocks, one short group: 320 * 8 + 10 * 8 + 32 + 32.
  EXPECT_EQ(dq->StorageBits(1, 640), 320u * 8 + 80 + 32 + 32);
}

// ---------------------------------------------------------------- NF4

// bitsandbytes' nf4_dequantization_lut and dQuantizeNF4 thresholds.
constexpr float kNf4[16] = {-1.0f,
                            -0.6961928009986877f,
                            -0.5250730514526367f,
                            -0.39491748809814453f,
                            -0.28444138169288635f,
                            -0.18477343022823334f,
                            -0.09105003625154495f,
                            0.0f,
                            0.07958029955625534f,
                            0.16093020141124725f,
                            0.24611230194568634f,
                            0.33791524171829224f,
                            0.44070982933044434f,
                            0.5626170039176941f,
                            0.7229568362236023f,
                            1.0f};
constexpr float kThresholds[15] = {
    -0.8480964004993439f,  -0.6106329262256622f,  -0.4599952697753906f,   -0.33967943489551544f,
    -0.23460740596055984f, -0.13791173323988914f, -0.045525018125772476f, 0.03979014977812767f,
    0.1202552504837513f,   0.2035212516784668f,   0.2920137718319893f,    0.3893125355243683f,
    0.5016634166240692f,   0.6427869200706482f,   0.8614784181118011f};

TEST(Nf4, EveryCodeValueReproduced) {
  // Block 0: absmax 1 (x[0] = 1), then the 16 values: 1/absmax = 1, so each
  // value maps to its own code and comes back exactly. Block 1: the same
  // values times 2 (absmax 2, 1/2 exact): codes equal, values doubled.
  auto scheme = Make("nf4");
  std::vector<float> x(128, 0.0f);
  x[0] = 1.0f;
  x[64] = 2.0f;
  for (int k = 0; k < 16; ++k) {
    x[1 + k] = kNf4[k];
    x[65 + k] = 2.0f * kNf4[k];
  }
  Result r = Quantize(*scheme, x, 128);
  EXPECT_THAT(r.stored.scales, ElementsAre(1.0f, 2.0f));
  for (int k = 0; k < 16; ++k) {
    EXPECT_EQ(r.stored.codes[1 + k], k);
    EXPECT_EQ(r.stored.codes[65 + k], k);
    EXPECT_EQ(r.out[1 + k], kNf4[k]);
    EXPECT_EQ(r.out[65 + k], 2.0f * kNf4[k]);
  }
  EXPECT_EQ(r.stored.codes[0], 15);
  EXPECT_EQ(r.stored.codes[20], 7);  // zeros
  EXPECT_EQ(r.counts.clipped, 0u);
}

TEST(Nf4, ThresholdTiesGoToTheLowerCode) {
  // absmax 1: x = t_k exactly gives code k (dQuantizeNF4 asks x > t_k), the
  // next float above gives k + 1.
  auto scheme = Make("nf4");
  std::vector<float> x(64, 0.0f);
  x[0] = -1.0f;
  for (int k = 0; k < 15; ++k) {
    x[1 + 2 * k] = kThresholds[k];
    x[2 + 2 * k] = std::nextafter(kThresholds[k], 2.0f);
  }
  Result r = Quantize(*scheme, x, 64);
  EXPECT_EQ(r.stored.scales[0], 1.0f);
  EXPECT_EQ(r.stored.codes[0], 0);  // -1 / 1 = -1: below every threshold
  for (int k = 0; k < 15; ++k) {
    EXPECT_EQ(r.stored.codes[1 + 2 * k], k) << "tie at threshold " << k;
    EXPECT_EQ(r.stored.codes[2 + 2 * k], k + 1) << "above threshold " << k;
    EXPECT_EQ(r.out[1 + 2 * k], kNf4[k]);
  }
}

TEST(Nf4, ReciprocalThenProduct) {
  // absmax 3: 1/3 = 0.333333343f; x = 0.12 gives 0.12f * 0.333333343f =
  // 0.04000000x > t_7 = 0.0397901 -> code 8; x = 0.119 gives 0.0396667 -> 7.
  auto scheme = Make("nf4");
  std::vector<float> x(64, 0.0f);
  x[0] = -3.0f;  // a negative maximum: -3 * (1/3) = -1 -> code 0 -> -1 * 3
  x[1] = 0.12f;
  x[2] = 0.119f;
  Result r = Quantize(*scheme, x, 64);
  EXPECT_EQ(r.stored.scales[0], 3.0f);
  EXPECT_THAT(std::vector<int32_t>(r.stored.codes.begin(), r.stored.codes.begin() + 3),
              ElementsAre(0, 8, 7));
  EXPECT_EQ(r.out[0], -3.0f);
  EXPECT_EQ(r.out[1], kNf4[8] * 3.0f);
  EXPECT_EQ(r.out[2], 0.0f);
}

TEST(Nf4, ZeroBlockShortBlockNonFinite) {
  // Row of 70: block 0 all zero -> absmax 0, code 7 (0.0), out 0 (not -0:
  // bitsandbytes' 0 * (1/0) = NaN would pick code 0). Block 1 (6 elements,
  // padded with zeros): [NaN, -Inf, 0.5, -0.25, +Inf, 0]: absmax 0.5 from the
  // finite ones; 0.5 * 2 = 1 -> 15; -0.25 * 2 = -0.5 -> between t_1 = -0.61
  // and t_2 = -0.46 -> code 2 -> -0.525073 * 0.5.
  auto scheme = Make("nf4");
  std::vector<float> x(70, 0.0f);
  x[64] = kNaN;
  x[65] = -kInf;
  x[66] = 0.5f;
  x[67] = -0.25f;
  x[68] = kInf;
  Result r = Quantize(*scheme, x, 70);
  EXPECT_THAT(r.stored.scales, ElementsAre(0.0f, 0.5f));
  ASSERT_EQ(r.stored.codes.size(), 70u);
  for (int j = 0; j < 64; ++j) {
    EXPECT_EQ(r.stored.codes[j], 7);
    EXPECT_EQ(r.out[j], 0.0f);
    EXPECT_FALSE(std::signbit(r.out[j]));
  }
  EXPECT_THAT(std::vector<int32_t>(r.stored.codes.begin() + 64, r.stored.codes.end()),
              ElementsAre(7, 7, 15, 2, 7, 7));
  EXPECT_TRUE(std::isnan(r.out[64]));
  EXPECT_EQ(r.out[65], -kInf);
  EXPECT_EQ(r.out[66], 0.5f);
  EXPECT_EQ(r.out[67], kNf4[2] * 0.5f);
  EXPECT_EQ(r.out[68], kInf);
}

// ---------------------------------------------------------------- NF4 double quant

TEST(Nf4DoubleQuant, ChunkRowsHoldWholeGroupsOf256Scales) {
  auto dq = Make("nf4:double-quant");
  EXPECT_TRUE(dq->NeedsTensorPass());
  EXPECT_EQ(dq->ChunkRows(4096), 4);      // 64 blocks a row
  EXPECT_EQ(dq->ChunkRows(100), 128);     // 2 blocks a row
  EXPECT_EQ(dq->ChunkRows(64 * 256), 1);  // 256 blocks a row
  EXPECT_EQ(dq->ChunkRows(64 * 384), 2);  // 384 a row: 768 = 3 groups in 2 rows
  EXPECT_EQ(dq->ChunkRows(1), 256);
  auto nf4 = Make("nf4");
  EXPECT_FALSE(nf4->NeedsTensorPass());
  EXPECT_EQ(nf4->ChunkRows(4096), 1);
}

TEST(Nf4DoubleQuant, KnownAnswersOnACraftedTensor) {
  // 1 x 256: four blocks with absmax 1, 2, 3, 6 (element 0 of each block).
  // offset = mean = 3; v = absmax - 3 = [-2, -1, 0, 3]; scale2 = max |v| = 3,
  // v / 3 (as v * (1/3)) = [-0.6666667, -0.3333333, 0, 1]. Nearest codes of the
  // dynamic map: its top decade holds the midpoints 0.1 + (k + 0.5) * 0.9/64:
  //   0.6666667 -> k = 40: 0.66953125 (k = 39 is 0.65546875): -0.66953125 * 3
  //               + 3 = 0.99140625
  //   0.3333333 -> k = 16: 0.33203125: -0.99609375 + 3 = 2.00390625
  //   0 -> the map's 0.0: 3;  1 -> the map's 1.0: 6.
  auto dq = Make("nf4:double-quant");
  std::vector<float> x(256, 0.0f);
  x[0] = 1.0f;
  x[64] = 2.0f;
  x[128] = -3.0f;
  x[192] = 6.0f;
  x[193] = 3.0f;
  Result r = Quantize(*dq, x, 256);
  EXPECT_EQ(r.context.block_count, 4u);
  EXPECT_EQ(r.context.block_absmax_sum, 12.0);
  ASSERT_EQ(r.stored.scales.size(), 4u);
  EXPECT_NEAR(r.stored.scales[0], 0.99140625f, 1e-6);  // the map's value to an ulp
  EXPECT_EQ(r.stored.scales[1], 2.00390625f);
  EXPECT_EQ(r.stored.scales[2], 3.0f);
  EXPECT_EQ(r.stored.scales[3], 6.0f);
  // The codes come from the true absmax; the values from the compressed one.
  EXPECT_EQ(r.stored.codes[0], 15);
  EXPECT_EQ(r.out[0], r.stored.scales[0]);
  EXPECT_EQ(r.out[64], 2.00390625f);
  EXPECT_EQ(r.stored.codes[128], 0);
  EXPECT_EQ(r.out[128], -3.0f);
  EXPECT_EQ(r.out[192], 6.0f);
  EXPECT_EQ(r.stored.codes[193], 12);  // 3 / 6 = 0.5: above t_11 = 0.389, not t_12 = 0.502
  EXPECT_EQ(r.out[193], kNf4[12] * 6.0f);
  EXPECT_EQ(r.out[1], 0.0f);
}

TEST(Nf4DoubleQuant, EqualAbsmaxGivesTheOffsetBack) {
  // Every block has absmax 0.5: offset 0.5, v = 0, scale2 = 0: the map's 0.0,
  // so the dequantized absmax is exactly 0.5.
  auto dq = Make("nf4:double-quant");
  std::vector<float> x(64 * 8, 0.1f);
  for (size_t b = 0; b < 8; ++b) x[b * 64 + 3] = -0.5f;
  Result r = Quantize(*dq, x, 128);
  for (float s : r.stored.scales) EXPECT_EQ(s, 0.5f);
  auto nf4 = Make("nf4");
  EXPECT_EQ(Quantize(*nf4, x, 128).out, r.out);
}

// Per block absmax of rows of `cols`, for the property tests.
std::vector<float> BlockAbsmax(const std::vector<float>& x, int64_t cols, int64_t block) {
  std::vector<float> amax;
  for (size_t row = 0; row < x.size(); row += cols) {
    for (int64_t start = 0; start < cols; start += block) {
      float m = 0;
      for (int64_t j = start; j < std::min(cols, start + block); ++j) {
        m = std::max(m, std::fabs(x[row + j]));
      }
      amax.push_back(m);
    }
  }
  return amax;
}

TEST(Nf4DoubleQuant, RoundTripWithinTheMapStep) {
  // 300 rows of 200 (4 blocks a row, the last short): 1200 block scales,
  // groups of 256 from the start of the tensor (the last one short), chunks
  // of ChunkRows = 64 rows. Each dequantized absmax lies within half the
  // map's widest gap (0.9/64 / 2 = 0.00703125 of scale2) of the truth, and the
  // elements' codes equal plain NF4's.
  const int64_t rows = 300;
  const int64_t cols = 200;
  std::mt19937 rng(7);
  std::lognormal_distribution<float> spread(0.0f, 0.7f);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(rows * cols);
  for (int64_t i = 0; i < rows * cols; i += 8) {
    const float s = spread(rng);
    for (int64_t j = i; j < std::min(rows * cols, i + 8); ++j) x[j] = s * normal(rng);
  }
  auto dq = Make("nf4:double-quant");
  auto nf4 = Make("nf4");
  EXPECT_EQ(dq->ChunkRows(cols), 64);
  Result a = Quantize(*dq, x, cols);
  Result b = Quantize(*nf4, x, cols);
  EXPECT_EQ(a.stored.codes, b.stored.codes);
  const std::vector<float> truth = BlockAbsmax(x, cols, 64);
  ASSERT_EQ(a.stored.scales.size(), truth.size());
  EXPECT_EQ(b.stored.scales, truth);
  double sum = 0;
  for (float t : truth) sum += t;
  const float offset = static_cast<float>(sum / truth.size());
  int64_t exact_or_close = 0;
  for (size_t g = 0; g < truth.size(); g += 256) {
    float scale2 = 0;
    for (size_t k = g; k < std::min(truth.size(), g + 256); ++k) {
      scale2 = std::max(scale2, std::fabs(truth[k] - offset));
    }
    for (size_t k = g; k < std::min(truth.size(), g + 256); ++k) {
      const double error = std::fabs(a.stored.scales[k] - truth[k]);
      EXPECT_LE(error, scale2 * 0.00703125 * 1.0001 + 1e-6) << "block " << k;
      if (error <= scale2 * 0.001) ++exact_or_close;
    }
  }
  // The map is dense near 0 and the absmax cluster near their mean: most land
  // far closer than the worst case.
  EXPECT_GT(exact_or_close, static_cast<int64_t>(truth.size()) / 10);
  // One Apply over the whole tensor gives the same as chunk by chunk.
  std::vector<float> whole(x.size());
  SchemeCounts counts;
  dq->Apply(x, cols, a.context, whole, counts);
  EXPECT_EQ(whole, a.out);
}

// ---------------------------------------------------------------- Gaussian tensor

// Mean squared error of NF4 under the within-cell uniform approximation: a
// normalized value in the cell (t_{k-1}, t_k] (t_{-1} = -1, t_15 = 1) is
// stored as v_k; E[(z - v_k)^2] for z uniform in the cell is
// ((t_k - v_k)^3 + (v_k - t_{k-1})^3) / (3 (t_k - t_{k-1})).
double Nf4CellMse(float z) {
  int k = 0;
  while (k < 15 && z > kThresholds[k]) ++k;
  const double lo = k == 0 ? -1.0 : kThresholds[k - 1];
  const double hi = k == 15 ? 1.0 : kThresholds[k];
  const double v = kNf4[k];
  return (std::pow(hi - v, 3) + std::pow(v - lo, 3)) / (3 * (hi - lo));
}

TEST(GaussianTensor, RmseWhereEachRuleSaysItShouldBe) {
  // 4096 x 4096 float32, N(0, 0.02^2), seeded. For the uniform grids the
  // rounding error is close to uniform over one step d, so the predicted MSE
  // is the mean over elements of d_block^2 / 12 with d from each rule:
  //   q8_0 amax/127, q4_0 amax/8, q5_0 amax/16, q4_1 (max - min)/15;
  // NF4 follows the within-cell approximation above. The band allows for the
  // elements that sit on a grid point (the block maximum), the clamped top
  // code of q4_0/q5_0 and the fp16 scales.
  const int64_t rows = 4096;
  const int64_t cols = 4096;
  std::mt19937_64 rng(20240229);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = normal(rng);

  const std::vector<float> amax32 = BlockAbsmax(x, cols, 32);
  double q8 = 0, q4 = 0, q5 = 0, q41 = 0;
  for (size_t b = 0; b < amax32.size(); ++b) {
    const double a = amax32[b];
    q8 += std::pow(a / 127, 2) / 12;
    q4 += std::pow(a / 8, 2) / 12;
    q5 += std::pow(a / 16, 2) / 12;
    const auto [lo, hi] = std::minmax_element(x.begin() + b * 32, x.begin() + b * 32 + 32);
    q41 += std::pow((*hi - *lo) / 15.0, 2) / 12;
  }
  const double blocks = static_cast<double>(amax32.size());
  const std::vector<float> amax64 = BlockAbsmax(x, cols, 64);
  double nf4 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double a = amax64[i / 64];
    nf4 += a * a * Nf4CellMse(static_cast<float>(x[i] / a));
  }
  nf4 /= static_cast<double>(x.size());

  const struct {
    const char* name;
    double predicted_mse;
    double low, high;  // allowed ratio of the measured RMSE to the predicted
  } cases[] = {
      {"q8_0", q8 / blocks, 0.95, 1.03}, {"q4_0", q4 / blocks, 0.95, 1.08},
      {"q5_0", q5 / blocks, 0.95, 1.05}, {"q4_1", q41 / blocks, 0.93, 1.05},
      {"nf4", nf4, 0.85, 1.1},           {"nf4:double-quant", nf4, 0.85, 1.1},
  };
  double nf4_rmse = 0;
  for (const auto& c : cases) {
    auto scheme = Make(c.name);
    Result r = Quantize(*scheme, x, cols, /*keep_stored=*/false);
    double se = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double e = double{r.out[i]} - x[i];
      se += e * e;
    }
    const double rmse = std::sqrt(se / static_cast<double>(x.size()));
    const double predicted = std::sqrt(c.predicted_mse);
    EXPECT_GE(rmse / predicted, c.low) << c.name << " rmse " << rmse << " predicted " << predicted;
    EXPECT_LE(rmse / predicted, c.high) << c.name << " rmse " << rmse << " predicted " << predicted;
    if (std::string(c.name) == "nf4") nf4_rmse = rmse;
    if (std::string(c.name) == "nf4:double-quant") {
      // The 8-bit absmax costs a little on top of NF4's own error.
      EXPECT_GE(rmse, nf4_rmse * 0.999);
      EXPECT_LE(rmse, nf4_rmse * 1.02);
    }
    if (std::string(c.name) == "q8_0") {
      EXPECT_EQ(r.counts.clipped, 0u);
    }
    if (std::string(c.name) == "q4_0") {
      // Elements opposite in sign to the block's max with |x| > 15/16 amax
      // land on 16 and are clamped: a fraction of a percent of a Gaussian.
      EXPECT_GT(r.counts.clipped, 0u);
      EXPECT_LT(r.counts.clipped, x.size() / 100);
    }
  }
}

}  // namespace
}  // namespace lowp
