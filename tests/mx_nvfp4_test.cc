// OCP MX (mxfp8/6/4, mxint8), NVFP4 and FP8 with a per-tensor / per-channel
// scale: known answers worked out by hand, storage, an independent scalar
// implementation of every rule (EncodeFloat32 / DecodeToFloat32 element by
// element) against the fast path, and the error on a Gaussian tensor against
// what each definition predicts.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "formats/format.h"
#include "formats/reference.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "quant/scheme.h"
#include "tests/scheme_run.h"

namespace lowp {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kFloatMax = std::numeric_limits<float>::max();

using testing::Make;
using testing::Result;
using testing::AwkwardTensor;
using testing::RunScheme;

std::vector<float> Block(size_t size, std::initializer_list<float> head) {
  std::vector<float> x(size, 0.0f);
  std::copy(head.begin(), head.end(), x.begin());
  return x;
}

// ---------------------------------------------------------------- names

TEST(MxNvfp4Names, ParseCanonicalAndOptions) {
  EXPECT_EQ(Make("mxfp8")->name(), "mxfp8");
  EXPECT_EQ(Make("mxfp8_e4m3")->name(), "mxfp8");  // alias
  for (const char* name :
       {"mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2", "mxfp4", "mxint8", "mxfp4:scale=round-up",
        "nvfp4", "fp8_e4m3fn-tensor", "fp8_e5m2-channel", "fp8_e4m3fn-channel:scale=bf16"}) {
    std::unique_ptr<Scheme> scheme = Make(name);
    ASSERT_NE(scheme, nullptr);
    EXPECT_EQ(scheme->name(), name);
  }
  EXPECT_EQ(Make("mxfp4:scale=floor")->name(), "mxfp4");
  EXPECT_EQ(Make("e4m3-channel:scale=fp32")->name(), "fp8_e4m3fn-channel");
  EXPECT_THAT(ParseScheme("mxfp4:scale=ceil").status().message(), HasSubstr("round-up"));
  EXPECT_THAT(ParseScheme("mxfp4:clip=mse").status().message(), HasSubstr("scale"));
  EXPECT_FALSE(ParseScheme("nvfp4:scale=fp16").ok());
  EXPECT_FALSE(ParseScheme("fp8_e4m3fn-tensor:scale=fp8").ok());
  EXPECT_FALSE(ParseScheme("e8m0fnu-channel").ok());  // no zero, no sign
  EXPECT_TRUE(ParseScheme("int8-channel").ok());      // still the integer family's
}

TEST(MxNvfp4Names, FamiliesListed) {
  int found = 0;
  for (const SchemeFamily& f : SchemeFamilies()) {
    if (f.family.find("MX") != std::string::npos || f.family == "NVFP4" ||
        f.family.find("scaled float") != std::string::npos) {
      ++found;
      EXPECT_THAT(f.rule, HasSubstr("Bits per weight"));
    }
  }
  EXPECT_EQ(found, 3);
}

// ---------------------------------------------------------------- MX

TEST(Mx, Fp4FloorScaleClipsTheMaximum) {
  // amax = 7.9: floor(log2 7.9) = 2, emax(e2m1) = 2, X = 2^0 = 1.
  // 7.9 -> saturates to 6 (code 0x7), clipped; 1.0 -> 0x2;
  // -0.3 -> nearer -0.5 than -0 (0.2 vs 0.3): 0x9, a subnormal code.
  std::unique_ptr<Scheme> s = Make("mxfp4");
  Result r = RunScheme(*s, Block(32, {7.9f, 1.0f, -0.3f}), 32);
  EXPECT_THAT(r.stored.scales, ElementsAre(1.0f));
  EXPECT_EQ(r.stored.codes[0], 0x7);
  EXPECT_EQ(r.stored.codes[1], 0x2);
  EXPECT_EQ(r.stored.codes[2], 0x9);
  EXPECT_EQ(r.stored.codes[3], 0x0);
  EXPECT_EQ(r.out[0], 6.0f);
  EXPECT_EQ(r.out[1], 1.0f);
  EXPECT_EQ(r.out[2], -0.5f);
  EXPECT_EQ(r.counts.clipped, 1u);
  EXPECT_EQ(r.counts.subnormal, 1u);
}

TEST(Mx, Fp4RoundUpScaleNeverClips) {
  // e = ceil(log2(7.9 / 6)) = ceil(0.397) = 1, X = 2. 7.9 / 2 = 3.95 -> 4
  // (0x6) -> 8; 1.0 / 2 = 0.5 (0x1, subnormal) -> 1; -0.3 / 2 = -0.15 -> -0
  // (0x8).
  std::unique_ptr<Scheme> s = Make("mxfp4:scale=round-up");
  Result r = RunScheme(*s, Block(32, {7.9f, 1.0f, -0.3f}), 32);
  EXPECT_THAT(r.stored.scales, ElementsAre(2.0f));
  EXPECT_THAT(std::vector<int32_t>(r.stored.codes.begin(), r.stored.codes.begin() + 3),
              ElementsAre(0x6, 0x1, 0x8));
  EXPECT_EQ(r.out[0], 8.0f);
  EXPECT_EQ(r.out[1], 1.0f);
  EXPECT_EQ(r.out[2], 0.0f);
  EXPECT_TRUE(std::signbit(r.out[2]));
  EXPECT_EQ(r.counts.clipped, 0u);
  EXPECT_EQ(r.counts.subnormal, 1u);
  // Exact powers: amax = 6 gives ceil(log2 1) = 0 (X = 1), amax = 12 gives 1.
  EXPECT_THAT(RunScheme(*s, Block(32, {6.0f}), 32).stored.scales, ElementsAre(1.0f));
  EXPECT_THAT(RunScheme(*s, Block(32, {-12.0f}), 32).stored.scales, ElementsAre(2.0f));
  EXPECT_THAT(RunScheme(*s, Block(32, {12.5f}), 32).stored.scales, ElementsAre(4.0f));
}

TEST(Mx, AllZeroBlockGetsTheSmallestScale) {
  // amax = 0: e = -127, X = 2^-127 (E8M0 code 0x00); every element +-0.
  for (const char* name : {"mxfp8", "mxfp4", "mxint8", "mxfp6_e3m2:scale=round-up"}) {
    std::unique_ptr<Scheme> s = Make(name);
    std::vector<float> x(32, 0.0f);
    x[5] = -0.0f;
    Result r = RunScheme(*s, x, 32);
    EXPECT_THAT(r.stored.scales, ElementsAre(std::ldexp(1.0f, -127))) << name;
    for (float v : r.out) EXPECT_EQ(v, 0.0f) << name;
    EXPECT_EQ(r.counts.clipped + r.counts.subnormal, 0u) << name;
  }
  // The floating formats keep the sign of -0 (code 0x80 in e4m3).
  Result r = RunScheme(*Make("mxfp8"), Block(32, {0.0f, -0.0f}), 32);
  EXPECT_EQ(r.stored.codes[1], 0x80);
  EXPECT_TRUE(std::signbit(r.out[1]));
}

TEST(Mx, Fp8NegativeMaximumSaturates) {
  // mxfp8 (e4m3, emax 8): amax = 500, floor(log2 500) = 8, X = 2^0 = 1.
  // -500 > 448 in magnitude: saturates to -448 = 0xFE (sign, exponent 1111,
  // mantissa 110: 1.75 * 2^8), clipped. 1.0 = 0x38. 300 lies between 288 and
  // 320 (step 32 in [256, 512)): 288 = 1.125 * 2^8 = 0x79.
  std::unique_ptr<Scheme> s = Make("mxfp8");
  Result r = RunScheme(*s, Block(32, {-500.0f, 1.0f, 300.0f}), 32);
  EXPECT_THAT(r.stored.scales, ElementsAre(1.0f));
  EXPECT_THAT(std::vector<int32_t>(r.stored.codes.begin(), r.stored.codes.begin() + 3),
              ElementsAre(0xFE, 0x38, 0x79));
  EXPECT_EQ(r.out[0], -448.0f);
  EXPECT_EQ(r.out[1], 1.0f);
  EXPECT_EQ(r.out[2], 288.0f);
  EXPECT_EQ(r.counts.clipped, 1u);
}

TEST(Mx, Int8SymmetricAndRounding) {
  // mxint8 (emax 0): amax = 1.5, floor(log2 1.5) = 0, X = 1; q = RNE(x * 64)
  // clamped to [-127, 127]: 1.5 -> 96; 3/128 -> 1.5 -> 2 (tie to even);
  // 5/128 -> 2.5 -> 2 (tie to even); -1 -> -64.
  std::unique_ptr<Scheme> s = Make("mxint8");
  Result r = RunScheme(*s, Block(32, {1.5f, 3.0f / 128, 5.0f / 128, -1.0f}), 32);
  EXPECT_THAT(r.stored.scales, ElementsAre(1.0f));
  EXPECT_THAT(std::vector<int32_t>(r.stored.codes.begin(), r.stored.codes.begin() + 4),
              ElementsAre(96, 2, 2, -64));
  EXPECT_EQ(r.out[1], 2.0f / 64);
  EXPECT_EQ(r.out[3], -1.0f);
  // Block 2: amax = 1.999 (X = 1): -1.999 * 64 = -127.94 is beyond 127 ->
  // clamped to -127 (not -128, which the catalog's int8 would give), clipped.
  Result c = RunScheme(*s, Block(32, {-1.999f, 1.99f}), 32);
  EXPECT_EQ(c.stored.codes[0], -127);
  EXPECT_EQ(c.out[0], -127.0f / 64);
  EXPECT_EQ(c.stored.codes[1], 127);  // 127.36 rounds to 127, and is clipped too
  EXPECT_EQ(c.counts.clipped, 2u);
  EXPECT_EQ(c.counts.subnormal, 0u);
}

TEST(Mx, ShortLastBlock) {
  // cols = 40: blocks [0, 32) and [32, 40). Block 0: all 0.25 -> floor(log2)
  // = -2, e = -2 - 2 = -4, X = 1/16; 0.25 * 16 = 4 (0x6), exact. Block 1:
  // {3, 0.1}: floor(log2 3) = 1, e = -1, X = 1/2; 3 * 2 = 6 (0x7) -> 3;
  // 0.1 * 2 = 0.2 -> 0 (nearer 0 than 0.5).
  std::vector<float> x(40, 0.25f);
  std::fill(x.begin() + 32, x.end(), 0.0f);
  x[32] = 3.0f;
  x[33] = 0.1f;
  std::unique_ptr<Scheme> s = Make("mxfp4");
  Result r = RunScheme(*s, x, 40);
  EXPECT_THAT(r.stored.scales, ElementsAre(1.0f / 16, 0.5f));
  EXPECT_EQ(r.stored.codes.size(), 40u);
  EXPECT_EQ(r.stored.codes[31], 0x6);
  EXPECT_EQ(r.stored.codes[32], 0x7);
  EXPECT_EQ(r.stored.codes[33], 0x0);
  EXPECT_EQ(r.out[0], 0.25f);
  EXPECT_EQ(r.out[32], 3.0f);
  EXPECT_EQ(r.out[33], 0.0f);
  EXPECT_EQ(s->StorageBits(1, 40), 40u * 4 + 2 * 8);
}

TEST(Mx, NonFiniteTakesNoPartAndComesBack) {
  // {NaN, +Inf, -Inf, 2, 0.5}: amax = 2 (finite only), e = 1 - 8 = -7,
  // X = 2^-7; 2 * 128 = 256 = 2^8 (exponent field 15: 0x78), 0.5 * 128 = 64
  // = 2^6 (field 13: 0x68). Non-finite: code 0.
  std::unique_ptr<Scheme> s = Make("mxfp8");
  Result r = RunScheme(*s, Block(32, {kNaN, kInf, -kInf, 2.0f, 0.5f}), 32);
  EXPECT_THAT(r.stored.scales, ElementsAre(std::ldexp(1.0f, -7)));
  EXPECT_TRUE(std::isnan(r.out[0]));
  EXPECT_EQ(r.out[1], kInf);
  EXPECT_EQ(r.out[2], -kInf);
  EXPECT_THAT(std::vector<int32_t>(r.stored.codes.begin(), r.stored.codes.begin() + 5),
              ElementsAre(0, 0, 0, 0x78, 0x68));
  EXPECT_EQ(r.out[3], 2.0f);
  EXPECT_EQ(r.out[4], 0.5f);
  EXPECT_EQ(r.counts.clipped, 0u);
  // A block of NaNs only: amax = 0, the smallest scale.
  std::vector<float> nans(32, kNaN);
  Result n = RunScheme(*s, nans, 32);
  EXPECT_THAT(n.stored.scales, ElementsAre(std::ldexp(1.0f, -127)));
  for (float v : n.out) EXPECT_TRUE(std::isnan(v));
}

TEST(Mx, E8m0RangeExtremes) {
  // Bottom: amax = 2^-130 (a float32 subnormal) in mxfp8: e = -130 - 8 =
  // -138, clamped to -127. 2^-130 / 2^-127 = 2^-3 (normal in e4m3, 0x20);
  // 3 * 2^-136 / 2^-127 = 3 * 2^-9: the e4m3 subnormal code 3, exact.
  std::unique_ptr<Scheme> s = Make("mxfp8");
  const float a = std::ldexp(1.0f, -130), b = std::ldexp(3.0f, -136);
  Result r = RunScheme(*s, Block(32, {a, b}), 32);
  EXPECT_THAT(r.stored.scales, ElementsAre(std::ldexp(1.0f, -127)));
  EXPECT_EQ(r.stored.codes[0], 0x20);
  EXPECT_EQ(r.stored.codes[1], 0x03);
  EXPECT_EQ(r.out[0], a);
  EXPECT_EQ(r.out[1], b);
  EXPECT_EQ(r.counts.subnormal, 1u);
  // Top: amax = FLT_MAX (just under 2^128) in mxfp4, floor: e = 127 - 2 =
  // 125 (well inside E8M0's 127); FLT_MAX / 2^125 = 7.99999952 saturates to
  // -6 (0xF), clipped -> -6 * 2^125 = -1.5 * 2^127.
  Result t = RunScheme(*Make("mxfp4"), Block(32, {-kFloatMax}), 32);
  EXPECT_THAT(t.stored.scales, ElementsAre(std::ldexp(1.0f, 125)));
  EXPECT_EQ(t.stored.codes[0], 0xF);
  EXPECT_EQ(t.out[0], -std::ldexp(3.0f, 126));
  EXPECT_EQ(t.counts.clipped, 1u);
  // Round-up: e = ceil(log2(FLT_MAX / 6)) = ceil(125.415) = 126; FLT_MAX /
  // 2^126 = 3.99999976 -> 4 (0x6), and 4 * 2^126 = 2^128 is beyond float32:
  // +FLT_MAX. 1.95e38 / 2^126 = 2.29 -> 2 (0x4) -> 2^127.
  Result u = RunScheme(*Make("mxfp4:scale=round-up"), Block(32, {kFloatMax, 1.95e38f}), 32);
  EXPECT_THAT(u.stored.scales, ElementsAre(std::ldexp(1.0f, 126)));
  EXPECT_EQ(u.stored.codes[0], 0x6);
  EXPECT_EQ(u.out[0], kFloatMax);
  EXPECT_EQ(u.stored.codes[1], 0x4);
  EXPECT_EQ(u.out[1], std::ldexp(1.0f, 127));
  EXPECT_EQ(u.counts.clipped, 0u);
}

TEST(Mx, Int8BlockOfFloat32Subnormals) {
  // amax = 1e-39 (a float32 subnormal): e = floor(log2) - 0 = -130, clamped to
  // -127. q = RNE(1e-39 / 2^-127 * 64) = RNE(10.89) = 11; 1/X * 64 = 2^133 is
  // beyond float32, so the scaling must not be done in one multiply.
  Result r = RunScheme(*Make("mxint8"), Block(32, {1e-39f, -5e-40f}), 32);
  EXPECT_THAT(r.stored.scales, ElementsAre(std::ldexp(1.0f, -127)));
  EXPECT_EQ(r.stored.codes[0], 11);
  EXPECT_EQ(r.stored.codes[1], -5);  // -5.44 -> -5
  EXPECT_EQ(r.out[0], std::ldexp(11.0f, -133));
  EXPECT_EQ(r.counts.clipped, 0u);
}

TEST(Mx, StorageBits) {
  EXPECT_EQ(Make("mxfp4")->StorageBits(1, 4096), 4096u * 4 + 128 * 8);
  EXPECT_DOUBLE_EQ(Make("mxfp4")->BitsPerWeight(1, 4096), 4.25);
  EXPECT_DOUBLE_EQ(Make("mxfp8")->BitsPerWeight(64, 4096), 8.25);
  EXPECT_DOUBLE_EQ(Make("mxfp6_e2m3")->BitsPerWeight(3, 64), 6.25);
  EXPECT_EQ(Make("mxfp6_e3m2")->StorageBits(3, 33), 3u * 33 * 6 + 3 * 2 * 8);
  EXPECT_EQ(Make("mxint8:scale=round-up")->StorageBits(2, 31), 2u * 31 * 8 + 2 * 8);
  EXPECT_EQ(Make("mxfp8_e5m2")->StorageBits(0, 31), 0u);
}

// ---------------------------------------------------------------- NVFP4

TEST(Nvfp4, TwoLevelScales) {
  // Tensor amax A = 10.5: S = 2688 / 10.5 = 256, g = 1 / 256 (both exact).
  // multiplier = 256 * fp32(1/6) = 42.6666679.
  // Block 0 (amax 6): 6 * 42.6666679 = 256.000007 -> fp32 256 -> e4m3 256
  //   (0x78). k = 1 / (256 / 256) = 1: elements are their own e2m1 values:
  //   6 -> 0x7, -1.5 -> 0xB, 0.2 -> 0 (nearer 0 than 0.5), 2.6 -> 3 (0x5);
  //   dequant = e2m1 * 1.
  // Block 1 (amax 10.5): 10.5 * 42.6666679 = 448.0000134 -> fp32 448 -> e4m3
  //   448. k = 1 / (448 / 256) = fp32(1 / 1.75) = 0.571428597: 10.5 * k =
  //   6.0000005 > 6, clipped, -> 6 -> 6 * 1.75 = 10.5; 3.5 * k = 2 -> 3.5.
  // Block 2: zeros: s = 0, k = FLT_MAX, every element 0.
  // Block 3 (amax 2^-20): 2^-20 * 42.67 = 4.1e-5 is below half e4m3's
  //   smallest subnormal (2^-9 / 2): s = 0, x * k saturates to 6 (clipped),
  //   dequantized 6 * 0 = 0.
  std::vector<float> x(64, 0.0f);
  x[0] = 6.0f, x[1] = -1.5f, x[2] = 0.2f, x[3] = 2.6f;
  x[16] = 10.5f, x[17] = 3.5f;
  x[48] = std::ldexp(1.0f, -20);
  std::unique_ptr<Scheme> s = Make("nvfp4");
  ASSERT_TRUE(s->NeedsTensorPass());
  Result r = RunScheme(*s, x, 64);
  EXPECT_EQ(r.context.absmax, 10.5f);
  EXPECT_THAT(r.stored.scales, ElementsAre(256.0f, 448.0f, 0.0f, 0.0f));
  EXPECT_THAT(std::vector<int32_t>(r.stored.codes.begin(), r.stored.codes.begin() + 4),
              ElementsAre(0x7, 0xB, 0x0, 0x5));
  EXPECT_EQ(r.stored.codes[16], 0x7);
  EXPECT_EQ(r.stored.codes[17], 0x4);
  EXPECT_EQ(r.stored.codes[48], 0x7);
  EXPECT_THAT(std::vector<float>(r.out.begin(), r.out.begin() + 4),
              ElementsAre(6.0f, -1.5f, 0.0f, 3.0f));
  EXPECT_EQ(r.out[16], 10.5f);
  EXPECT_EQ(r.out[17], 3.5f);
  EXPECT_EQ(r.out[48], 0.0f);
  EXPECT_EQ(r.counts.clipped, 2u);  // 10.5 and 2^-20
  EXPECT_EQ(r.counts.subnormal, 0u);
  EXPECT_EQ(s->StorageBits(1, 64), 64u * 4 + 4 * 8 + 32);
  EXPECT_EQ(s->StorageBits(3, 17), 3u * 17 * 4 + 3 * 2 * 8 + 32);
  EXPECT_DOUBLE_EQ(s->BitsPerWeight(4096, 4096), 4.5 + 32.0 / (4096.0 * 4096.0));
}

TEST(Nvfp4, NonFiniteAndZeroTensor) {
  // NaN and Inf do not enter A: A = 3, S = 896, g = fp32(1/896).
  std::unique_ptr<Scheme> s = Make("nvfp4");
  Result r = RunScheme(*s, Block(16, {kNaN, -kInf, 3.0f}), 16);
  EXPECT_EQ(r.context.absmax, 3.0f);
  EXPECT_TRUE(std::isnan(r.out[0]));
  EXPECT_EQ(r.out[1], -kInf);
  EXPECT_NEAR(r.out[2], 3.0f, 3.0f * 1e-6f);
  // An all-zero tensor: A = 0, S = FLT_MAX; everything is 0.
  Result z = RunScheme(*s, std::vector<float>(32, 0.0f), 32);
  for (float v : z.out) EXPECT_EQ(v, 0.0f);
  EXPECT_THAT(z.stored.scales, ElementsAre(0.0f, 0.0f));
}

// ---------------------------------------------------------------- FP8 scaled

TEST(ScaledFloat, ChannelScales) {
  // Row 0: amax 896, scale = 896 / 448 = 2. 896 / 2 = 448 (0x7E) -> 896;
  // 3 / 2 = 1.5 (0x3C) -> 3; -1 / 2 = -0.5 (0xB0) -> -1; 0.3 / 2 = 0.15:
  // e4m3 in [0.125, 0.25) steps 1/64: 9.6 steps -> 10/64 = 0.15625 = 1.25 * 2^-3
  // (exponent field 4, mantissa 010: 0x22) -> 0.3125.
  // Row 1: zeros: scale 1, codes 0.
  std::unique_ptr<Scheme> s = Make("fp8_e4m3fn-channel");
  EXPECT_FALSE(s->NeedsTensorPass());
  Result r = RunScheme(*s, {896.0f, 3.0f, -1.0f, 0.3f, 0, 0, 0, 0}, 4);
  EXPECT_THAT(r.stored.scales, ElementsAre(2.0f, 1.0f));
  EXPECT_THAT(r.stored.codes, ElementsAre(0x7E, 0x3C, 0xB0, 0x22, 0, 0, 0, 0));
  EXPECT_THAT(r.out, ElementsAre(896.0f, 3.0f, -1.0f, 0.3125f, 0, 0, 0, 0));
  EXPECT_EQ(r.counts.clipped, 0u);
  EXPECT_EQ(s->StorageBits(10, 100), 10u * 100 * 8 + 10 * 32);
  EXPECT_EQ(Make("fp8_e5m2-channel:scale=fp16")->StorageBits(10, 100), 10u * 100 * 8 + 10 * 16);
}

TEST(ScaledFloat, TensorScaleFromObserve) {
  // Tensor amax 7 (row 1): scale = 7 / 448 = 1/64 exact. Row 0: 0.01 * 64 =
  // 0.64 -> e4m3 in [0.5, 1) steps 1/16: 0.625 (1.25 * 2^-1: 0x32) ->
  // 0.625 / 64; row 1: 7 * 64 = 448 (0x7E) -> 7; -2^-12 * 64 = -2^-6 = the
  // smallest normal (0x88).
  std::unique_ptr<Scheme> s = Make("fp8_e4m3fn-tensor");
  EXPECT_TRUE(s->NeedsTensorPass());
  Result r = RunScheme(*s, {0.01f, kNaN, 7.0f, -std::ldexp(1.0f, -12)}, 2);
  EXPECT_EQ(r.context.absmax, 7.0f);
  EXPECT_THAT(r.stored.scales, ElementsAre(1.0f / 64, 1.0f / 64));
  EXPECT_THAT(r.stored.codes, ElementsAre(0x32, 0, 0x7E, 0x88));
  EXPECT_EQ(r.out[0], 0.625f / 64);
  EXPECT_TRUE(std::isnan(r.out[1]));
  EXPECT_EQ(r.out[2], 7.0f);
  EXPECT_EQ(r.out[3], -std::ldexp(1.0f, -12));
  // A context that understates the tensor (a value beyond it) clips.
  SchemeCounts counts;
  std::vector<float> out(2);
  TensorContext context;
  context.absmax = 7.0f;
  std::vector<float> in = {8.0f, 1.0f};
  s->Apply(in, 2, context, out, counts);
  EXPECT_EQ(out[0], 7.0f);  // 512 saturates to 448
  EXPECT_EQ(counts.clipped, 1u);
  EXPECT_EQ(s->StorageBits(10, 100), 10u * 100 * 8 + 32);
}

TEST(ScaledFloat, Fp16ScaleIsRounded) {
  // e5m2 max 57344; amax 1: 1 / 57344 = 1.7438e-5 is an fp16 subnormal
  // (below 2^-14, steps 2^-24): 2^24 / 57344 = 292.57 steps, rounded to 293.
  // 1 / (293 * 2^-24) = 57260.5, between e5m2's 49152 and 57344 (step 8192):
  // -> 57344, so 1 comes back as 57344 * 293 * 2^-24 = 1.0015; the scale
  // rounded up, so nothing clips.
  std::unique_ptr<Scheme> s = Make("fp8_e5m2-channel:scale=fp16");
  Result r = RunScheme(*s, {1.0f, 0.5f}, 2);
  EXPECT_THAT(r.stored.scales, ElementsAre(std::ldexp(293.0f, -24)));
  EXPECT_EQ(r.out[0], 57344.0f * std::ldexp(293.0f, -24));
  EXPECT_EQ(r.stored.codes[0], 0x7B);  // 57344 = 1.75 * 2^15: 0 11110 11
  EXPECT_EQ(r.counts.clipped, 0u);
}

// ---------------------------------------------------------------- scalar check

// An independent scalar implementation of each rule: the scale by its
// formula (ilogb, a search for the round-up exponent), the elements by
// EncodeFloat32 / DecodeToFloat32 one at a time, x / X by division.
struct Expected {
  std::vector<float> out;
  std::vector<int32_t> codes;
  std::vector<float> scales;
  SchemeCounts counts;
};

float Sat(float v) { return std::isinf(v) ? std::copysign(kFloatMax, v) : v; }

bool IsSubnormalCode(const Format& f, uint32_t code) {
  const uint32_t m = code & f.magnitude_mask();
  return f.is_float() && m != 0 && (m >> f.mantissa_bits) == 0;
}

Expected ScalarMx(const std::vector<float>& x, int64_t cols, const char* element, bool round_up) {
  const Format f = *FindFormat(element);
  const bool is_int = !f.is_float();
  const double max_elem = is_int ? 127.0 / 64 : f.max_finite();
  const int emax = is_int ? 0 : f.max_normal_exponent();
  ConvertOptions sat;
  sat.overflow = Overflow::kSaturate;
  Expected e;
  for (size_t row = 0; row < x.size() / cols; ++row) {
    for (int64_t b0 = 0; b0 < cols; b0 += 32) {
      const size_t begin = row * cols + b0, end = row * cols + std::min<int64_t>(cols, b0 + 32);
      float amax = 0;
      for (size_t i = begin; i < end; ++i) {
        if (std::isfinite(x[i])) amax = std::max(amax, std::fabs(x[i]));
      }
      int exp = -127;
      if (amax > 0 && !round_up) exp = std::ilogb(amax) - emax;
      if (amax > 0 && round_up) {
        exp = std::ilogb(amax) - std::ilogb(max_elem) - 2;
        while (std::ldexp(max_elem, exp) < amax) ++exp;
      }
      exp = std::clamp(exp, -127, 127);
      const float X = std::ldexp(1.0f, exp);
      e.scales.push_back(X);
      for (size_t i = begin; i < end; ++i) {
        if (!std::isfinite(x[i])) {
          e.out.push_back(x[i]);
          e.codes.push_back(0);
          continue;
        }
        const float v = x[i] / X;
        if (std::fabs(v) > max_elem) ++e.counts.clipped;
        if (is_int) {
          const float q = std::clamp(std::nearbyint(v * 64), -127.0f, 127.0f);
          const uint32_t code = EncodeFloat32(f, q, sat);
          e.codes.push_back(static_cast<int8_t>(code));
          e.out.push_back(DecodeToFloat32(f, code) / 64 * X);
        } else {
          const uint32_t code = EncodeFloat32(f, v, sat);
          e.codes.push_back(static_cast<int32_t>(code));
          if (IsSubnormalCode(f, code)) ++e.counts.subnormal;
          e.out.push_back(Sat(DecodeToFloat32(f, code) * X));
        }
      }
    }
  }
  return e;
}

Expected ScalarNvfp4(const std::vector<float>& x, int64_t cols) {
  const Format e2m1 = *FindFormat("fp4_e2m1fn"), e4m3 = *FindFormat("fp8_e4m3fn");
  ConvertOptions sat;
  sat.overflow = Overflow::kSaturate;
  float amax_t = 0;
  for (float v : x) {
    if (std::isfinite(v)) amax_t = std::max(amax_t, std::fabs(v));
  }
  const float S = std::min(448.0f * 6.0f / amax_t, kFloatMax), g = 1.0f / S;
  Expected e;
  for (size_t row = 0; row < x.size() / cols; ++row) {
    for (int64_t b0 = 0; b0 < cols; b0 += 16) {
      const size_t begin = row * cols + b0, end = row * cols + std::min<int64_t>(cols, b0 + 16);
      float a = 0;
      for (size_t i = begin; i < end; ++i) {
        if (std::isfinite(x[i])) a = std::max(a, std::fabs(x[i]));
      }
      const float s = DecodeToFloat32(
          e4m3, EncodeFloat32(e4m3, std::min(std::min(a * (S * (1.0f / 6)), kFloatMax), 448.0f)));
      e.scales.push_back(s);
      const float k = std::min(1.0f / (s * g), kFloatMax);
      for (size_t i = begin; i < end; ++i) {
        if (!std::isfinite(x[i])) {
          e.out.push_back(x[i]);
          e.codes.push_back(0);
          continue;
        }
        const float v = x[i] * k;
        if (std::fabs(v) > 6) ++e.counts.clipped;
        const uint32_t code = EncodeFloat32(e2m1, v, sat);
        e.codes.push_back(static_cast<int32_t>(code));
        if (IsSubnormalCode(e2m1, code)) ++e.counts.subnormal;
        e.out.push_back(Sat(DecodeToFloat32(e2m1, code) * (s * g)));
      }
    }
  }
  return e;
}

Expected ScalarScaled(const std::vector<float>& x, int64_t cols, const char* element,
                      bool per_tensor, const char* scale_format) {
  const Format f = *FindFormat(element), sf = *FindFormat(scale_format);
  ConvertOptions sat;
  sat.overflow = Overflow::kSaturate;
  const float max_finite = static_cast<float>(f.max_finite());
  auto amax_of = [&](size_t begin, size_t end) {
    float a = 0;
    for (size_t i = begin; i < end; ++i) {
      if (std::isfinite(x[i])) a = std::max(a, std::fabs(x[i]));
    }
    return a;
  };
  auto scale_of = [&](float a) {
    return a > 0 ? DecodeToFloat32(sf, EncodeFloat32(sf, a / max_finite, sat)) : 1.0f;
  };
  const float tensor_scale = scale_of(amax_of(0, x.size()));
  Expected e;
  for (size_t row = 0; row < x.size() / cols; ++row) {
    const float s = per_tensor ? tensor_scale : scale_of(amax_of(row * cols, (row + 1) * cols));
    e.scales.push_back(s);
    for (size_t i = row * cols; i < (row + 1) * cols; ++i) {
      if (!std::isfinite(x[i])) {
        e.out.push_back(x[i]);
        e.codes.push_back(0);
        continue;
      }
      const float v = s == 0 ? std::copysign(0.0f, x[i]) : x[i] / s;
      if (std::fabs(v) > max_finite) ++e.counts.clipped;
      const uint32_t code = EncodeFloat32(f, v, sat);
      e.codes.push_back(static_cast<int32_t>(code));
      if (IsSubnormalCode(f, code)) ++e.counts.subnormal;
      e.out.push_back(Sat(DecodeToFloat32(f, code) * s));
    }
  }
  return e;
}

void ExpectSame(const std::string& name, const Result& r, const Expected& e) {
  ASSERT_EQ(r.out.size(), e.out.size()) << name;
  for (size_t i = 0; i < e.out.size(); ++i) {
    if (std::isnan(e.out[i])) {
      EXPECT_TRUE(std::isnan(r.out[i])) << name << " element " << i;
    } else {
      uint32_t a, b;
      std::memcpy(&a, &r.out[i], 4);
      std::memcpy(&b, &e.out[i], 4);
      EXPECT_EQ(a, b) << name << " element " << i << ": " << r.out[i] << " vs " << e.out[i];
    }
  }
  EXPECT_THAT(r.stored.codes, ElementsAreArray(e.codes)) << name;
  EXPECT_THAT(r.stored.scales, ElementsAreArray(e.scales)) << name;
  EXPECT_EQ(r.counts.clipped, e.counts.clipped) << name;
  EXPECT_EQ(r.counts.subnormal, e.counts.subnormal) << name;
}

TEST(ScalarCheck, FastPathEqualsElementByElement) {
  const int64_t cols = 100;
  const std::vector<float> x = AwkwardTensor(7, cols);
  const struct {
    const char* scheme;
    const char* element;
  } mx[] = {{"mxfp8", "fp8_e4m3fn"},      {"mxfp8_e5m2", "fp8_e5m2"}, {"mxfp6_e2m3", "fp6_e2m3fn"},
            {"mxfp6_e3m2", "fp6_e3m2fn"}, {"mxfp4", "fp4_e2m1fn"},    {"mxint8", "int8"}};
  for (const auto& m : mx) {
    for (bool round_up : {false, true}) {
      const std::string name = std::string(m.scheme) + (round_up ? ":scale=round-up" : "");
      ExpectSame(name, RunScheme(*Make(name), x, cols), ScalarMx(x, cols, m.element, round_up));
    }
  }
  ExpectSame("nvfp4", RunScheme(*Make("nvfp4"), x, cols), ScalarNvfp4(x, cols));
  for (const char* element : {"fp8_e4m3fn", "fp8_e5m2", "fp6_e3m2fn"}) {
    for (bool per_tensor : {true, false}) {
      for (const char* sf : {"fp32", "fp16", "bf16"}) {
        const std::string name =
            std::string(element) + (per_tensor ? "-tensor" : "-channel") + ":scale=" + sf;
        ExpectSame(name, RunScheme(*Make(name), x, cols),
                   ScalarScaled(x, cols, element, per_tensor, sf));
      }
    }
  }
}

// ---------------------------------------------------------------- Gaussian error

// N(0, 0.02^2), 4096 x 4096, seeded. Relative RMSE = sqrt(sum e^2 / sum x^2).
// Rounding to a step h leaves an error of variance h^2 / 12. A float format
// with m mantissa bits has h = 2^(k-m) on the binade [2^k, 2^(k+1)); weighting
// by x^2 as the relative RMSE does, with x spread over a binade, gives
// sqrt(E[h^2] / (12 E[x^2])) ~ 2^-m * sqrt(3/7) / sqrt(12) = 0.19 * 2^-m:
// e4m3 0.024, e5m2 0.047, e2m3 (m = 3) and e3m2 (m = 2) a little above these
// (their few binades push the block's small values into subnormals).
// e2m1 (steps 0.5, 1, 2 on [0, 2), [2, 4), [4, 6]) with a block max scaled to
// 4..6 (sigma_s ~ 2.5 for 32 Gaussians, whose max is ~2.4 sigma): E[h^2] ~
// 0.58 * 0.25 + 0.31 * 1 + 0.11 * 4 = 0.9, RMSE sqrt(0.9 / 12) / 2.5 ~ 0.11;
// NVFP4's max maps to 6 exactly (sigma_s ~ 6 / 2.1 for 16): ~0.10.
// mxint8: step 1/64 with the max at 1..2 (sigma_s ~ 0.6): (1/64) / sqrt(12)
// / 0.6 ~ 0.0075.
TEST(GaussianError, RelativeRmseInDerivedBands) {
  const int64_t rows = 4096, cols = 4096;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> x(rows * cols);
  for (float& v : x) v = normal(rng);
  const struct {
    const char* name;
    double low, high;
  } bands[] = {
      {"fp8_e4m3fn-tensor", 0.015, 0.035},
      {"fp8_e4m3fn-channel", 0.015, 0.035},
      {"fp8_e5m2-channel", 0.030, 0.070},
      {"mxfp8", 0.015, 0.035},
      {"mxfp8_e5m2", 0.030, 0.070},
      {"mxfp6_e2m3", 0.015, 0.045},
      {"mxfp6_e3m2", 0.030, 0.075},
      {"mxfp4", 0.070, 0.160},
      {"mxfp4:scale=round-up", 0.070, 0.180},
      {"nvfp4", 0.060, 0.140},
      {"mxint8", 0.004, 0.012},
  };
  double mxfp4 = 0, nvfp4 = 0;
  for (const auto& band : bands) {
    std::unique_ptr<Scheme> s = Make(band.name);
    Result r = RunScheme(*s, x, cols);
    double se = 0, sx = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const double e = static_cast<double>(r.out[i]) - x[i];
      se += e * e;
      sx += static_cast<double>(x[i]) * x[i];
    }
    const double rel = std::sqrt(se / sx);
    EXPECT_GE(rel, band.low) << band.name;
    EXPECT_LE(rel, band.high) << band.name;
    if (std::string(band.name) == "mxfp4") mxfp4 = rel;
    if (std::string(band.name) == "nvfp4") nvfp4 = rel;
    if (std::string(band.name).find("round-up") != std::string::npos) {
      EXPECT_EQ(r.counts.clipped, 0u) << band.name;
    }
    std::printf("%-24s relative RMSE %.5f  clipped %llu  subnormal %llu\n", band.name, rel,
                static_cast<unsigned long long>(r.counts.clipped),
                static_cast<unsigned long long>(r.counts.subnormal));
  }
  // Blocks of 16 with a fractional scale beat blocks of 32 with a power of two.
  EXPECT_LT(nvfp4, mxfp4);
}

}  // namespace
}  // namespace lowp
