// Known answers for the catalog and the scalar reference: published limits,
// names, named rounding cases, policies, events, round trips, float64 inputs
// against the CPU's own double->float conversion, and stochastic rounding.
#include "formats/reference.h"

#include <cfenv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "formats/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lowp {
namespace {

using ::testing::HasSubstr;

Format F(const std::string& name) {
  absl::StatusOr<Format> f = FindFormat(name);
  EXPECT_TRUE(f.ok()) << f.status();
  return *f;
}

TEST(Catalog, LimitsMatchPublishedValues) {
  struct Row {
    const char* name;
    double max, min_normal, min_subnormal, epsilon;
  };
  const Row rows[] = {
      {"fp32", 3.4028234663852886e38, 0x1p-126, 0x1p-149, 0x1p-23},
      {"tf32", 3.4011621342146535e38, 0x1p-126, 0x1p-136, 0x1p-10},
      {"fp16", 65504, 0x1p-14, 0x1p-24, 0x1p-10},
      {"bf16", 3.3895313892515355e38, 0x1p-126, 0x1p-133, 0x1p-7},
      {"fp8_e4m3fn", 448, 0x1p-6, 0x1p-9, 0.125},
      {"fp8_e5m2", 57344, 0x1p-14, 0x1p-16, 0.25},
      {"fp8_e4m3fnuz", 240, 0x1p-7, 0x1p-10, 0.125},
      {"fp8_e5m2fnuz", 57344, 0x1p-15, 0x1p-17, 0.25},
      {"fp8_e4m3b11fnuz", 30, 0x1p-10, 0x1p-13, 0.125},
      {"fp6_e2m3fn", 7.5, 1, 0.125, 0.125},
      {"fp6_e3m2fn", 28, 0.25, 0.0625, 0.25},
      {"fp4_e2m1fn", 6, 1, 0.5, 0.5},
      {"e8m0fnu", 0x1p127, 0x1p-127, 0, 1},
      {"int8", 127, 1, 0, 1},
      {"uint8", 255, 1, 0, 1},
      {"int4", 7, 1, 0, 1},
      {"uint4", 15, 1, 0, 1},
  };
  for (const Row& row : rows) {
    const Format f = F(row.name);
    EXPECT_EQ(f.max_finite(), row.max) << row.name;
    EXPECT_EQ(f.min_normal(), row.min_normal) << row.name;
    EXPECT_EQ(f.min_subnormal(), row.min_subnormal) << row.name;
    EXPECT_EQ(f.epsilon(), row.epsilon) << row.name;
  }
  EXPECT_EQ(F("int8").lowest_finite(), -128);
  EXPECT_EQ(F("int4").lowest_finite(), -8);
  EXPECT_EQ(F("uint4").lowest_finite(), 0);
  EXPECT_EQ(F("fp8_e4m3fn").lowest_finite(), -448);
  EXPECT_EQ(F("e8m0fnu").lowest_finite(), 0x1p-127);
}

TEST(Catalog, EncodingRules) {
  EXPECT_TRUE(F("fp16").has_infinity());
  EXPECT_TRUE(F("fp8_e5m2").has_infinity());
  EXPECT_FALSE(F("fp8_e4m3fn").has_infinity());
  EXPECT_TRUE(F("fp8_e4m3fn").has_nan());
  EXPECT_TRUE(F("fp8_e4m3fn").has_negative_zero());
  EXPECT_FALSE(F("fp8_e4m3fnuz").has_negative_zero());
  EXPECT_FALSE(F("fp6_e2m3fn").has_nan());
  EXPECT_FALSE(F("fp4_e2m1fn").has_nan());
  EXPECT_FALSE(F("e8m0fnu").has_subnormals());
  EXPECT_FALSE(F("e8m0fnu").is_signed);
  EXPECT_EQ(F("tf32").bits, 19);
  EXPECT_EQ(F("tf32").storage_bits(), 32);
  EXPECT_EQ(F("fp6_e3m2fn").storage_bits(), 8);
  EXPECT_EQ(F("int4").storage_bits(), 4);
}

TEST(Catalog, NamesAndAliases) {
  EXPECT_EQ(F("half").name, "fp16");
  EXPECT_EQ(F("BFloat16").name, "bf16");
  EXPECT_EQ(F("float8_e4m3fn").name, "fp8_e4m3fn");
  EXPECT_EQ(F("e4m3").name, "fp8_e4m3fn");
  EXPECT_EQ(F("f8E5M2FNUZ").name, "fp8_e5m2fnuz");  // LLVM's spelling
  EXPECT_EQ(F("float4_e2m1fn").name, "fp4_e2m1fn");
  EXPECT_EQ(F("float8_e8m0fnu").name, "e8m0fnu");
  EXPECT_EQ(F(" INT4 ").name, "int4");
  const absl::StatusOr<Format> unknown = FindFormat("fp7");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("unknown format 'fp7'"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("fp8_e4m3fn"));
  for (const Format& f : Catalog()) {  // every name and alias finds itself
    EXPECT_EQ(F(f.name).name, f.name);
    for (const std::string& alias : f.aliases) EXPECT_EQ(F(alias).name, f.name) << alias;
  }
}

TEST(Catalog, UserDefinedFormats) {
  const Format e3m4 = F("e3m4");  // IEEE-style: bias 3, inf and NaN
  EXPECT_EQ(e3m4.bits, 8);
  EXPECT_EQ(e3m4.bias, 3);
  EXPECT_TRUE(e3m4.has_infinity());
  EXPECT_EQ(e3m4.max_finite(), 15.5);       // 1.1111b * 2^(6-3)
  EXPECT_EQ(F("e3m4fn").max_finite(), 30);  // 1.1110b * 2^(7-3)
  EXPECT_EQ(F("e3m4fnuz").bias, 4);
  // fp16 spelled out behaves as fp16 on every code.
  const Format fp16 = F("fp16");
  const Format spelled = F("float(e=5, m=10, bias=15, inf=ieee)");
  for (uint32_t code = 0; code < 65536; ++code) {
    ASSERT_EQ(std::bit_cast<uint64_t>(DecodeToDouble(spelled, code)),
              std::bit_cast<uint64_t>(DecodeToDouble(fp16, code)));
  }
  EXPECT_EQ(F("float(e=4,m=3,bias=11,inf=fnuz)").max_finite(), 30);
  EXPECT_EQ(F("int3").max_finite(), 3);
  EXPECT_EQ(F("int3").lowest_finite(), -4);
  EXPECT_EQ(F("uint12").max_finite(), 4095);
  for (const char* bad :
       {"e9m3", "e4m24", "e0m3", "float(e=5)", "float(e=5,m=2,q=1)", "float(e=5,m=2,inf=maybe)",
        "float(e=8,m=3,bias=-10)", "float(e=5,m=0,inf=ieee)", "int1", "uint17", "int"}) {
    EXPECT_FALSE(FindFormat(bad).ok()) << bad;
  }
  EXPECT_THAT(FindFormat("float(e=8,m=3,bias=-10)").status().message(), HasSubstr("float32 range"));
}

// Named cases; each comment gives the rule the expected code follows.
TEST(Reference, NamedRoundingCases) {
  const Format e4m3 = F("fp8_e4m3fn"), fp16 = F("fp16"), bf16 = F("bf16");
  const Format fp4 = F("fp4_e2m1fn"), e8m0 = F("e8m0fnu"), int8 = F("int8");
  const ConvertOptions rne;
  const ConvertOptions saturate{.overflow = Overflow::kSaturate};
  const ConvertOptions rtz{.rounding = Rounding::kTowardZero};
  const ConvertOptions odd{.rounding = Rounding::kOdd};
  // 464 is halfway between 448 (mantissa 110, even) and 480 (would-be 111).
  EXPECT_EQ(EncodeFloat32(e4m3, 464.0f, rne), 0x7Eu);
  EXPECT_EQ(EncodeFloat32(e4m3, std::nextafter(464.0f, 1e9f), rne), 0x7Fu);  // NaN
  EXPECT_EQ(EncodeFloat32(e4m3, 1e6f, saturate), 0x7Eu);
  EXPECT_EQ(EncodeFloat32(e4m3, -INFINITY, saturate), 0xFEu);
  EXPECT_EQ(EncodeFloat32(e4m3, -INFINITY, rne), 0xFFu);  // no inf: NaN
  EXPECT_EQ(EncodeFloat32(e4m3, 1e6f, rtz), 0x7Eu);       // toward zero: max
  // fp16: 65520 is halfway from 65504 (odd mantissa) to 65536: up, to inf.
  EXPECT_EQ(EncodeFloat32(fp16, 65520.0f, rne), 0x7C00u);
  EXPECT_EQ(EncodeFloat32(fp16, 65520.0f, rtz), 0x7BFFu);
  EXPECT_EQ(EncodeFloat32(fp16, -65520.0f, {.rounding = Rounding::kTowardPositive}), 0xFBFFu);
  EXPECT_EQ(EncodeFloat32(fp16, -65520.0f, {.rounding = Rounding::kTowardNegative}), 0xFC00u);
  EXPECT_EQ(EncodeFloat32(fp16, 1e6f, odd), 0x7BFFu);  // odd never overflows
  EXPECT_EQ(EncodeFloat32(fp16, 1.0f + 0x1p-12f, odd), 0x3C01u);
  EXPECT_EQ(EncodeFloat32(fp16, 1.0f + 0x1p-10f, odd), 0x3C01u);  // exact
  EXPECT_EQ(EncodeFloat32(fp16, 1.0f + 0x1p-11f, {.rounding = Rounding::kNearestAway}), 0x3C01u);
  EXPECT_EQ(EncodeFloat32(fp16, 1.0f + 0x1p-11f, rne), 0x3C00u);
  EXPECT_EQ(EncodeFloat32(fp16, 0x1p-25f, rne), 0x0000u);    // tie with 0: even
  EXPECT_EQ(EncodeFloat32(fp16, 0x1.8p-24f, rne), 0x0002u);  // tie 1|2: even
  EXPECT_EQ(EncodeFloat32(fp16, -0x1p-30f, rne), 0x8000u);   // keeps its sign
  EXPECT_EQ(EncodeFloat32(fp16, 0x1p-30f, {.rounding = Rounding::kTowardPositive}), 0x0001u);
  // bf16: ties to even at 1 + 2^-8 and 1 + 3*2^-8.
  EXPECT_EQ(EncodeFloat32(bf16, 1.0f + 0x1p-8f, rne), 0x3F80u);
  EXPECT_EQ(EncodeFloat32(bf16, 1.0f + 0x3p-8f, rne), 0x3F82u);
  // fp4: 2.5 between 2 (even) and 3; 5 between 4 (even) and 6; 100 saturates.
  EXPECT_EQ(EncodeFloat32(fp4, 2.5f, rne), 0x4u);
  EXPECT_EQ(EncodeFloat32(fp4, 5.0f, rne), 0x6u);
  EXPECT_EQ(EncodeFloat32(fp4, -100.0f, rne), 0xFu);
  // e8m0: ties go to the larger power of two (even on the binade's grid).
  EXPECT_EQ(EncodeFloat32(e8m0, 1.5f, rne), 128u);
  EXPECT_EQ(EncodeFloat32(e8m0, 0.75f, rne), 127u);
  EXPECT_EQ(EncodeFloat32(e8m0, 1.4f, rne), 127u);
  EXPECT_EQ(EncodeFloat32(e8m0, 0.0f, rne), 0xFFu);
  EXPECT_EQ(EncodeFloat32(e8m0, -1.0f, rne), 0xFFu);
  EXPECT_EQ(EncodeFloat32(e8m0, 0x1p-140f, rne), 0x00u);
  EXPECT_EQ(EncodeFloat32(e8m0, 0x1p127f, rne), 0xFEu);
  EXPECT_EQ(EncodeFloat32(e8m0, 0x1.8p127f, rne), 0xFFu);  // overflow: NaN
  EXPECT_EQ(EncodeFloat32(e8m0, 0x1.8p127f, saturate), 0xFEu);
  // int8: ties to even, saturation both ways.
  EXPECT_EQ(EncodeFloat32(int8, 2.5f, rne), 2u);
  EXPECT_EQ(EncodeFloat32(int8, 3.5f, rne), 4u);
  EXPECT_EQ(EncodeFloat32(int8, -2.5f, rne), 0xFEu);
  EXPECT_EQ(EncodeFloat32(int8, -2.5f, {.rounding = Rounding::kNearestAway}), 0xFDu);
  EXPECT_EQ(EncodeFloat32(int8, 127.5f, rne), 0x7Fu);
  EXPECT_EQ(EncodeFloat32(int8, -1e30f, rne), 0x80u);
  EXPECT_EQ(EncodeFloat32(int8, INFINITY, rne), 0x7Fu);
  EXPECT_EQ(EncodeFloat32(F("uint8"), -3.0f, rne), 0u);
  EXPECT_EQ(EncodeFloat32(F("int4"), 7.6f, rne), 7u);
  EXPECT_EQ(EncodeFloat32(F("int4"), -7.6f, rne), 0x8u);
}

TEST(Reference, NanPolicies) {
  const Format fp16 = F("fp16"), e4m3 = F("fp8_e4m3fn"), fnuz = F("fp8_e4m3fnuz");
  const float nan = std::bit_cast<float>(0x7F812345u);  // signalling, payload
  const float negative_nan = std::bit_cast<float>(0xFFC00001u);
  EXPECT_EQ(EncodeFloat32(fp16, nan), 0x7E00u);
  EXPECT_EQ(EncodeFloat32(fp16, negative_nan), 0xFE00u);
  // keep-payload: quiet bit | top 10 payload bits (0x012345 >> 13 = 0x9).
  EXPECT_EQ(EncodeFloat32(fp16, nan, {.nan = NanPolicy::kKeepPayload}), 0x7E09u);
  EXPECT_EQ(EncodeFloat32(e4m3, negative_nan), 0xFFu);
  EXPECT_EQ(EncodeFloat32(fnuz, negative_nan), 0x80u);
  uint32_t events = 0;
  EXPECT_EQ(EncodeFloat32(F("fp4_e2m1fn"), nan, {}, 0, &events), 0u);
  EXPECT_EQ(events, kNanInput | kNanReplaced);
  EXPECT_EQ(EncodeFloat32(F("int8"), nan, {}, 0, &events), 0u);
  EXPECT_EQ(events, kNanInput | kNanReplaced);
  EXPECT_EQ(EncodeFloat32(F("e8m0fnu"), nan), 0xFFu);
  // NaN never becomes infinity or a number where the format has a NaN.
  for (const Format& f : Catalog()) {
    if (!f.has_nan()) continue;
    EXPECT_TRUE(IsNanCode(f, EncodeFloat32(f, nan))) << f.name;
    EXPECT_TRUE(IsNanCode(f, EncodeFloat32(f, negative_nan, {.nan = NanPolicy::kKeepPayload})))
        << f.name;
  }
}

TEST(Reference, SubnormalPolicies) {
  const Format bf16 = F("bf16"), fp16 = F("fp16");
  const ConvertOptions daz{.subnormals = Subnormals::kInputsAreZero};
  const ConvertOptions ftz{.subnormals = Subnormals::kFlushToZero};
  const float tiny = 1e-40f;                      // a float32 subnormal
  EXPECT_EQ(EncodeFloat32(bf16, tiny), 0x0001u);  // kept: 1.09 * 2^-133 rounds to 2^-133
  EXPECT_EQ(EncodeFloat32(bf16, tiny, daz), 0x0000u);
  EXPECT_EQ(EncodeFloat32(bf16, -tiny, daz), 0x8000u);
  EXPECT_EQ(EncodeFloat32(bf16, tiny, ftz), 0x0000u);  // result subnormal: flushed
  // 0x007FFFFF rounds up to the smallest normal: not flushed by ftz, by daz yes.
  const float almost_normal = std::bit_cast<float>(0x007FFFFFu);
  EXPECT_EQ(EncodeFloat32(bf16, almost_normal, ftz), 0x0080u);
  EXPECT_EQ(EncodeFloat32(bf16, almost_normal, daz), 0x0000u);
  uint32_t events = 0;
  EXPECT_EQ(EncodeFloat32(fp16, 3e-6f, ftz, 0, &events), 0x0000u);
  EXPECT_EQ(events, kInexact | kFlushed);
  EXPECT_EQ(EncodeFloat32(fp16, 3e-6f), 0x0032u);
  EXPECT_EQ(EncodeFloat32(fp16, 1e-4f, ftz), EncodeFloat32(fp16, 1e-4f));  // normal
}

TEST(Reference, Events) {
  const Format e4m3 = F("fp8_e4m3fn");
  uint32_t events = 0;
  EncodeFloat32(e4m3, 1.0f, {}, 0, &events);
  EXPECT_EQ(events, kExact);
  EncodeFloat32(e4m3, 1.01f, {}, 0, &events);
  EXPECT_EQ(events, kInexact);
  EncodeFloat32(e4m3, 1000.0f, {}, 0, &events);
  EXPECT_EQ(events, kInexact | kOverflow);
  EncodeFloat32(e4m3, 1000.0f, {.overflow = Overflow::kSaturate}, 0, &events);
  EXPECT_EQ(events, kInexact | kOverflow | kSaturated);
  EncodeFloat32(e4m3, 1e-6f, {}, 0, &events);
  EXPECT_EQ(events, kInexact | kUnderflow);
  EncodeFloat32(F("int8"), 300.0f, {}, 0, &events);
  EXPECT_EQ(events, kInexact | kOverflow | kSaturated);
  EncodeFloat32(F("int8"), 200.0f, {}, 0, &events);
  EXPECT_EQ(events, kInexact | kOverflow | kSaturated);
}

TEST(Reference, OptionValidation) {
  EXPECT_FALSE(ValidateOptions(F("fp8_e4m3fn"), {.overflow = Overflow::kInfinity}).ok());
  EXPECT_FALSE(ValidateOptions(F("fp4_e2m1fn"), {.overflow = Overflow::kNan}).ok());
  EXPECT_FALSE(ValidateOptions(F("int8"), {.overflow = Overflow::kInfinity}).ok());
  EXPECT_TRUE(ValidateOptions(F("int8"), {.overflow = Overflow::kSaturate}).ok());
  EXPECT_TRUE(ValidateOptions(F("fp16"), {.overflow = Overflow::kNan}).ok());
  EXPECT_TRUE(ValidateOptions(F("fp8_e4m3fn"), {.overflow = Overflow::kSaturate}).ok());
  EXPECT_THAT(ValidateOptions(F("fp8_e4m3fn"), {.overflow = Overflow::kInfinity}).message(),
              HasSubstr("has no infinity"));
  EXPECT_EQ(*ParseRounding("toward-zero"), Rounding::kTowardZero);
  EXPECT_EQ(*ParseSubnormals("FTZ-DAZ"), Subnormals::kFlushBoth);
  EXPECT_THAT(ParseRounding("banker").status().message(), HasSubstr("nearest-even"));
  EXPECT_FALSE(ParseOverflow("wrap").ok());
  EXPECT_FALSE(ParseNanPolicy("drop").ok());
}

// Every code of every format up to 16 bits decodes to float32 and encodes
// back to itself; NaNs come back as the canonical NaN of their sign.
TEST(Reference, EveryCodeRoundTrips) {
  std::vector<Format> formats;
  for (const Format& f : Catalog()) {
    if (f.bits <= 16) formats.push_back(f);
  }
  for (const char* extra : {"e3m4", "e3m4fnuz", "e2m5fn", "int3", "uint12"})
    formats.push_back(F(extra));
  for (const Format& f : formats) {
    for (uint32_t code = 0; code <= f.code_mask(); ++code) {
      const float x = DecodeToFloat32(f, code);
      const uint32_t back = EncodeFloat32(f, x);
      if (IsNanCode(f, code)) {
        EXPECT_EQ(back, EncodeFloat32(f, std::bit_cast<float>((std::signbit(x) ? 0x80000000u : 0) |
                                                              0x7FC00000u)))
            << f.name << " code " << code;
        EXPECT_TRUE(IsNanCode(f, back)) << f.name;
      } else {
        ASSERT_EQ(back, code) << f.name << " code 0x" << std::hex << code;
        EXPECT_EQ(static_cast<double>(x), DecodeToDouble(f, code));
      }
      // Through the code-to-code path as well.
      if (!IsNanCode(f, code)) {
        EXPECT_EQ(ConvertCode(f, code, f, {}), code);
      }
    }
  }
}

// float64 inputs: the CPU's own double->float conversion under each
// rounding direction of <cfenv> is an independent oracle for fp32 targets.
TEST(Reference, Float64ToFp32MatchesTheCpu) {
  const Format fp32 = F("fp32");
  const std::pair<int, Rounding> modes[] = {{FE_TONEAREST, Rounding::kNearestEven},
                                            {FE_TOWARDZERO, Rounding::kTowardZero},
                                            {FE_UPWARD, Rounding::kTowardPositive},
                                            {FE_DOWNWARD, Rounding::kTowardNegative}};
  std::mt19937_64 rng(7);
  std::vector<double> inputs = {0x1.fffffefffffffp127,
                                0x1.ffffffp127,
                                0x1p128,
                                1e-50,
                                0x1p-150,
                                0x1.8p-150,
                                0x1p-149,
                                0x1.fffffffp-127,
                                1.0 + 0x1p-24,
                                1.0 + 0x1p-24 + 0x1p-52};
  for (int i = 0; i < 200000; ++i) {
    // Random bits over the float32 range and some way past it both ends.
    const int exponent = static_cast<int>(rng() % 340) - 170;
    const double mantissa = std::bit_cast<double>((rng() >> 12) | 0x3FF0000000000000u);
    inputs.push_back(std::ldexp(rng() % 2 ? mantissa : -mantissa, exponent));
  }
  for (const auto& [direction, rounding] : modes) {
    ASSERT_EQ(std::fesetround(direction), 0);
    for (double x : inputs) {
      volatile double in = x;
      const float cpu = static_cast<float>(in);
      ASSERT_EQ(EncodeFloat64(fp32, x, {.rounding = rounding}), std::bit_cast<uint32_t>(cpu))
          << RoundingName(rounding) << " " << x;
    }
  }
  std::fesetround(FE_TONEAREST);
}

TEST(Reference, Float64InputsRoundOnceFromTheExactValue) {
  const Format bf16 = F("bf16");
  // 1 + 2^-8 + 2^-40 is just above a bf16 tie: up. Rounding it to float32
  // first would make it the tie itself and round down to even.
  EXPECT_EQ(EncodeFloat64(bf16, 1.0 + 0x1p-8 + 0x1p-40), 0x3F81u);
  EXPECT_EQ(EncodeFloat32(bf16, static_cast<float>(1.0 + 0x1p-8 + 0x1p-40)), 0x3F80u);
  // A float64 subnormal is zero under daz; a float32-subnormal-sized double
  // is not a subnormal of its own format.
  const ConvertOptions daz{.subnormals = Subnormals::kInputsAreZero};
  EXPECT_EQ(EncodeFloat64(F("fp32"), 1e-310, daz), 0u);
  EXPECT_EQ(EncodeFloat64(F("fp32"), 1e-40, daz), std::bit_cast<uint32_t>(1e-40f));
}

TEST(Reference, DecodesSpecials) {
  EXPECT_EQ(std::bit_cast<uint32_t>(DecodeToFloat32(F("fp16"), 0x7C01)), 0x7F802000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(DecodeToFloat32(F("fp8_e4m3fnuz"), 0x80)), 0xFFC00000u);
  EXPECT_EQ(std::bit_cast<uint32_t>(DecodeToFloat32(F("e8m0fnu"), 0xFF)), 0x7FC00000u);
  EXPECT_EQ(DecodeToDouble(F("e8m0fnu"), 0), 0x1p-127);
  EXPECT_EQ(DecodeToDouble(F("int4"), 0x8), -8);
  EXPECT_EQ(DecodeToDouble(F("tf32"), 0x1FC00), 1.0);
  EXPECT_TRUE(std::isinf(DecodeToDouble(F("fp8_e5m2"), 0xFC)));
  EXPECT_TRUE(std::signbit(DecodeToDouble(F("fp8_e4m3fn"), 0x80)));
}

// The generator is part of the specification: pinned so that no faster
// path can drift from it.
TEST(StochasticRounding, GeneratorIsPinned) {
  EXPECT_EQ(Fmix32(0), 0u);
  EXPECT_EQ(Fmix32(1), 0x514E28B7u);  // MurmurHash3's fmix32
  const uint32_t a = RandomBits(0, 0), b = RandomBits(0, 1), c = RandomBits(1, 0);
  EXPECT_NE(a, b);
  EXPECT_NE(a, c);
  EXPECT_EQ(RandomBits(42, 1000), RandomBits(42, 1000));
  EXPECT_NE(RandomBits(42, 1000), RandomBits(42, 1000 + (uint64_t{1} << 32)));
}

TEST(StochasticRounding, OnlyNeighboursAndUnbiased) {
  const Format bf16 = F("bf16");
  // x = 1 + 0.3 ulp: down to 1.0 (0x3F80) with p 0.7, up (0x3F81) with p 0.3.
  const float x = 1.0f + 0.3f * 0x1p-7f;
  const double exact_fraction = (static_cast<double>(x) - 1.0) / 0x1p-7;
  constexpr int kDraws = 1000000;
  for (uint64_t seed : {0u, 1u, 12345u}) {
    int up = 0;
    double sum = 0;
    for (int i = 0; i < kDraws; ++i) {
      const uint32_t code =
          EncodeFloat32(bf16, x, {.rounding = Rounding::kStochastic, .seed = seed}, i);
      ASSERT_TRUE(code == 0x3F80u || code == 0x3F81u) << code;
      up += code == 0x3F81u;
      sum += DecodeToDouble(bf16, code);
    }
    // Binomial: 5 standard deviations is sqrt(.3 * .7 / 1e6) * 5 = 0.0023.
    const double sigma = std::sqrt(exact_fraction * (1 - exact_fraction) / kDraws);
    EXPECT_NEAR(static_cast<double>(up) / kDraws, exact_fraction, 5 * sigma) << seed;
    EXPECT_NEAR(sum / kDraws, x, 5 * sigma * 0x1p-7) << seed;
  }
  // The same seed gives the same bits; another seed other bits.
  int same = 0, differs = 0;
  for (int i = 0; i < 1000; ++i) {
    const ConvertOptions s1{.rounding = Rounding::kStochastic, .seed = 1};
    const ConvertOptions s2{.rounding = Rounding::kStochastic, .seed = 2};
    same += EncodeFloat32(bf16, x, s1, i) == EncodeFloat32(bf16, x, s1, i);
    differs += EncodeFloat32(bf16, x, s1, i) != EncodeFloat32(bf16, x, s2, i);
  }
  EXPECT_EQ(same, 1000);
  EXPECT_GT(differs, 200);  // independent draws differ with p = 0.42
  // Exact values never move; negative values round in magnitude alike.
  for (int i = 0; i < 1000; ++i) {
    EXPECT_EQ(EncodeFloat32(bf16, 1.5f, {.rounding = Rounding::kStochastic}, i), 0x3FC0u);
    const uint32_t code = EncodeFloat32(bf16, -x, {.rounding = Rounding::kStochastic}, i);
    EXPECT_TRUE(code == 0xBF80u || code == 0xBF81u);
  }
}

}  // namespace
}  // namespace lowp
