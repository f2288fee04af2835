// Scheme names and options, and known answers for the casts and the integer
// schemes (codes and scales worked out by hand), then each scheme's RMSE on a
// seeded Gaussian against what its rule predicts. The other families have
// their own tests (ggml_nf4_test, mx_nvfp4_test).
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "formats/format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "quant/scheme.h"
#include "tests/scheme_run.h"

namespace lowp {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

using testing::Make;

std::string ParseError(const std::string& name) {
  absl::StatusOr<std::unique_ptr<Scheme>> scheme = ParseScheme(name);
  EXPECT_FALSE(scheme.ok()) << name;
  return scheme.ok() ? "" : std::string(scheme.status().message());
}

struct Applied {
  std::vector<float> out;
  SchemeCounts counts;
  StoredChunk stored;
};

// Runs the whole tensor as one chunk (after the tensor pass if the scheme
// wants one).
Applied Apply(const Scheme& scheme, const std::vector<float>& x, int64_t cols) {
  TensorContext context;
  if (scheme.NeedsTensorPass()) scheme.Observe(x, cols, context);
  Applied a;
  a.out.resize(x.size());
  scheme.Apply(x, cols, context, a.out, a.counts, &a.stored);
  return a;
}

TEST(ParseScheme, CanonicalNamesAndOptions) {
  EXPECT_EQ(Make("fp16")->name(), "fp16");
  EXPECT_EQ(Make("half")->name(), "fp16");  // a format alias
  EXPECT_EQ(Make("fp8_e4m3fn:rounding=toward-zero")->name(), "fp8_e4m3fn:rounding=toward-zero");
  EXPECT_EQ(Make("int4-g128:scale=fp16")->name(), "int4-g128");  // the default is not spelled
  EXPECT_EQ(Make("int4-g128:scale=bf16:clip=mse")->name(), "int4-g128:scale=bf16:clip=mse");
  EXPECT_EQ(Make("uint4-g64-asym")->name(), "uint4-g64-asym");
  EXPECT_EQ(Make("int8")->name(), "int8");  // the integer scheme, not a cast to int8
  for (const SchemeFamily& family : SchemeFamilies()) {
    EXPECT_FALSE(family.rule.empty()) << family.family;
    for (const std::string& example : family.examples) {
      absl::StatusOr<std::unique_ptr<Scheme>> s = ParseScheme(example);
      EXPECT_TRUE(s.ok()) << family.family << ": " << example << ": " << s.status();
    }
  }
}

// docs/quantization.md carries every family's rule as the code states it.
TEST(SchemeFamilies, DocsStateEveryRule) {
  std::ifstream in(LOWP_TEST_DATA_DIR "/../../docs/quantization.md");
  ASSERT_TRUE(in.good());
  const std::string docs{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  for (const SchemeFamily& family : SchemeFamilies()) {
    EXPECT_THAT(docs, HasSubstr("### " + family.family + "\n")) << "regenerate the docs";
    EXPECT_THAT(docs, HasSubstr(family.rule)) << family.family << ": regenerate the docs";
  }
}

TEST(ParseScheme, ErrorsNameThePart) {
  EXPECT_THAT(ParseError("int5-g128x"), HasSubstr("unknown scheme 'int5-g128x'"));
  EXPECT_THAT(ParseError("nosuch"), HasSubstr("lowp schemes"));
  EXPECT_THAT(ParseError(""), HasSubstr("empty scheme name"));
  EXPECT_THAT(ParseError("int9-g32"), HasSubstr("2 to 8 bits"));
  EXPECT_THAT(ParseError("int4-g1"), HasSubstr("group size"));
  EXPECT_THAT(ParseError("int4-g128:scale=fp8"), HasSubstr("unknown scale format 'fp8'"));
  EXPECT_THAT(ParseError("int4-g128:colour=red"), HasSubstr("no option 'colour'"));
  EXPECT_THAT(ParseError("int8:clip=mse"), HasSubstr("per row or group"));
  EXPECT_THAT(ParseError("int4-g128:clip=max"), HasSubstr("clip must be mse or none"));
  EXPECT_THAT(ParseError("int4-g128:scale=bf16:scale=fp32"), HasSubstr("given twice"));
  EXPECT_THAT(ParseError("int4-g128:"), HasSubstr("empty option"));
  EXPECT_THAT(ParseError("uint4-g128"), HasSubstr("unknown scheme"));  // uint needs -asym
  EXPECT_THAT(ParseError("fp16:rounding=sideways"), HasSubstr("fp16"));
  EXPECT_THAT(ParseError("fp16:seed=x"), HasSubstr("seed 'x'"));
  EXPECT_THAT(ParseError("e8m0fnu"), HasSubstr("not a floating format with zero"));
  EXPECT_THAT(ParseError("uint8"), HasSubstr("not a floating format"));  // a cast to uint8
}

TEST(CastScheme, CodesCountsAndBits) {
  const auto fp16 = Make("fp16");
  // 1 -> 0x3C00; 65519 rounds down to 65504 (0x7BFF) but is beyond the
  // largest finite value, so it counts as clipped; 65520 overflows to inf
  // (0x7C00); 2^-20 is subnormal (0x0010); 2^-26 rounds to +0.
  const std::vector<float> x = {1.0f, 65519.0f, 65520.0f, 0x1p-20f, 0x1p-26f, -2.0f};
  const Applied a = Apply(*fp16, x, 3);
  EXPECT_THAT(a.stored.codes, ElementsAre(0x3C00, 0x7BFF, 0x7C00, 0x0010, 0x0000, 0xC000));
  EXPECT_THAT(a.out, ElementsAre(1.0f, 65504.0f, INFINITY, 0x1p-20f, 0.0f, -2.0f));
  EXPECT_EQ(a.counts.clipped, 2u);
  EXPECT_EQ(a.counts.subnormal, 1u);
  EXPECT_EQ(fp16->StorageBits(3, 5), 3u * 5 * 16);
  EXPECT_EQ(Make("fp4_e2m1fn")->StorageBits(7, 3), 7u * 3 * 4);

  // Toward zero keeps 1 + 2^-11 + 2^-12 at 1 (nearest-even would give 1 + 2^-10).
  const auto tz = Make("fp16:rounding=toward-zero");
  EXPECT_THAT(Apply(*tz, {1.0f + 0x1p-11f + 0x1p-12f}, 1).out, ElementsAre(1.0f));
  EXPECT_THAT(Apply(*fp16, {1.0f + 0x1p-11f + 0x1p-12f}, 1).out, ElementsAre(1.0f + 0x1p-10f));
}

TEST(CastScheme, StochasticRoundingDependsOnTheElementIndexNotTheChunk) {
  const auto sr = Make("bf16:rounding=stochastic:seed=7");
  std::vector<float> x(1000);
  // bf16's step at 1 is 2^-7: x = 1 + (i % 128) 2^-14 lies (i % 128) / 128 of
  // the way to the next value, and rounds up with that probability.
  for (size_t i = 0; i < x.size(); ++i) x[i] = 1.0f + static_cast<float>(i % 128) * 0x1p-14f;
  TensorContext context;
  std::vector<float> whole(x.size()), pieces(x.size());
  SchemeCounts counts;
  sr->Apply(x, 10, context, whole, counts);
  for (int64_t first = 0; first < 1000; first += 250) {
    context.first_element = first;
    sr->Apply(std::span<const float>(x).subspan(first, 250), 10, context,
              std::span<float>(pieces).subspan(first, 250), counts);
  }
  EXPECT_EQ(whole, pieces);
  // And it is random: about half round up (expected 496, sd 16).
  int up = 0;
  for (size_t i = 0; i < x.size(); ++i) up += whole[i] > x[i];
  EXPECT_GT(up, 400);
  EXPECT_LT(up, 600);
}

// fp16(1/127): 1/127 lies in [2^-7, 2^-6), where fp16's step is 2^-17;
// (1/127) / 2^-17 = 1032.06, so the stored scale is 1032 * 2^-17.
constexpr float kScale127 = 1032 * 0x1p-17f;

TEST(IntScheme, Int8PerTensorKnownAnswer) {
  const auto int8 = Make("int8");
  ASSERT_TRUE(int8->NeedsTensorPass());
  // amax = 1 over both rows. x / s: 1 -> 127.008 -> 127; -0.5 -> -63.504 ->
  // -64; 0.25 -> 31.752 -> 32; 0.127 -> 16.13 -> 16; 0 -> 0; -1 -> -127.
  const Applied a = Apply(*int8, {1.0f, -0.5f, 0.25f, 0.127f, 0.0f, -1.0f}, 3);
  EXPECT_THAT(a.stored.codes, ElementsAre(127, -64, 32, 16, 0, -127));
  EXPECT_THAT(a.stored.scales, ElementsAre(kScale127, kScale127));  // one per row, equal
  EXPECT_THAT(a.out, ElementsAre(127 * kScale127, -64 * kScale127, 32 * kScale127, 16 * kScale127,
                                 0.0f, -127 * kScale127));
  EXPECT_EQ(a.counts.clipped, 0u);
  // 6 codes of 8 bits and one fp16 scale.
  EXPECT_EQ(int8->StorageBits(2, 3), 6u * 8 + 16);
}

TEST(IntScheme, GroupsChannelsShortGroupsAndZeroBlocks) {
  const auto g4 = Make("int4-g4");
  // Rows of 6: groups {0..3} and a short {4, 5}. qmax = 7.
  // Row 0 group 0: amax 0.7 (the max is negative), s = fp16(0.1) = 1638 * 2^-14
  //   (0.1 / 2^-14 = 1638.4); x / s = -7.0017 -> -7, 0.35 -> 3.5009 -> 4,
  //   0.05 -> 0.50012 -> 1, 0 -> 0.
  // Row 0 group 1 (short): all zero -> scale 0, codes 0.
  // Row 1 group 0: amax 1.4, s = fp16(0.2) = 1638 * 2^-13; 0.3 -> 1.5004 -> 2.
  // Row 1 group 1 (short): amax 7, s = 1; 2.5 -> 2 (tie to even), -7 -> -7.
  const float s01 = 1638 * 0x1p-14f, s10 = 1638 * 0x1p-13f;
  const Applied a =
      Apply(*g4, {-0.7f, 0.35f, 0.05f, 0.0f, 0.0f, 0.0f, 1.4f, 0.3f, 0.0f, 0.0f, 2.5f, -7.0f}, 6);
  EXPECT_THAT(a.stored.scales, ElementsAre(s01, 0.0f, s10, 1.0f));
  EXPECT_THAT(a.stored.codes, ElementsAre(-7, 4, 1, 0, 0, 0, 7, 2, 0, 0, 2, -7));
  EXPECT_FLOAT_EQ(a.out[1], 4 * s01);
  EXPECT_EQ(a.out[4], 0.0f);
  EXPECT_EQ(a.out[10], 2.0f);
  // 12 codes of 4 bits, 4 fp16 scales.
  EXPECT_EQ(g4->StorageBits(2, 6), 12u * 4 + 4 * 16);
  EXPECT_DOUBLE_EQ(Make("int4-g128")->BitsPerWeight(4096, 4096), 4.125);
  EXPECT_DOUBLE_EQ(Make("int8-channel")->BitsPerWeight(4096, 4096), 8 + 16.0 / 4096);

  // Per channel: one scale per row, amax of the row.
  const Applied c = Apply(*Make("int8-channel"), {1.0f, -0.5f, 0.0f, 0.0f}, 2);
  EXPECT_THAT(c.stored.scales, ElementsAre(kScale127, 0.0f));
  EXPECT_THAT(c.stored.codes, ElementsAre(127, -64, 0, 0));
}

TEST(IntScheme, ScaleFormats) {
  // amax 3: 3/127 = 0.0236220. fp16 step in [2^-6, 2^-5) is 2^-16: 1548.09 ->
  // 1548 * 2^-16. bf16 step there is 2^-13: 193.51 -> 194 * 2^-13.
  const std::vector<float> x = {3.0f, 1.0f};
  EXPECT_THAT(Apply(*Make("int8-channel"), x, 2).stored.scales, ElementsAre(1548 * 0x1p-16f));
  EXPECT_THAT(Apply(*Make("int8-channel:scale=bf16"), x, 2).stored.scales,
              ElementsAre(194 * 0x1p-13f));
  EXPECT_THAT(Apply(*Make("int8-channel:scale=fp32"), x, 2).stored.scales,
              ElementsAre(3.0f / 127.0f));
  // 3 / s: bf16 126.68 -> 127; fp16 127.008 -> 127 (in range either way).
  EXPECT_EQ(Apply(*Make("int8-channel:scale=bf16"), x, 2).stored.codes[0], 127);
  EXPECT_EQ(Make("int4-g32:scale=fp32")->StorageBits(1, 64), 64u * 4 + 2 * 32);
}

TEST(IntScheme, AsymmetricKnownAnswer) {
  const auto asym = Make("uint4-g4-asym");
  // Group 0: [lo, hi] = [0, 1.5] (lo = min(0, 0)), s = fp16(0.1) = 1638 * 2^-14,
  //   zero = 0; q = 0.3 / s = 3.0007 -> 3, 0.6 -> 6, 1.5 -> 15.0037 -> 15.
  // Group 1: [-1, 2], s = fp16(0.2) = 1638 * 2^-13, zero = round(1 / s =
  //   5.0012) = 5; q = round(x / s) + 5: -1 -> 0, -0.5 -> -2.5006 -> -3 -> 2,
  //   0.5 -> 3 -> 8, 2 -> 10 -> 15.
  const float s0 = 1638 * 0x1p-14f, s1 = 1638 * 0x1p-13f;
  const Applied a = Apply(*asym, {0.0f, 0.3f, 0.6f, 1.5f, -1.0f, -0.5f, 0.5f, 2.0f}, 8);
  EXPECT_THAT(a.stored.scales, ElementsAre(s0, s1));
  EXPECT_THAT(a.stored.offsets, ElementsAre(0.0f, 5.0f));
  EXPECT_THAT(a.stored.codes, ElementsAre(0, 3, 6, 15, 0, 2, 8, 15));
  EXPECT_THAT(a.out, ElementsAre(0.0f, 3 * s0, 6 * s0, 15 * s0, -5 * s1, -3 * s1, 3 * s1, 10 * s1));
  // 8 codes of 4 bits, 2 x (fp16 scale + 4-bit zero point).
  EXPECT_EQ(asym->StorageBits(1, 8), 8u * 4 + 2 * (16 + 4));
  // All-positive per-tensor: the range still starts at 0, zero = 0.
  const Applied t = Apply(*Make("uint8-asym"), {2.0f, 4.0f}, 2);
  EXPECT_THAT(t.stored.offsets, ElementsAre(0.0f));
}

TEST(IntScheme, NonFiniteInputsPassThroughAndTakeNoPartInScales) {
  const float nan = std::nanf("");
  const Applied a = Apply(*Make("int8-channel"), {nan, 1.0f, INFINITY, -0.5f}, 4);
  EXPECT_THAT(a.stored.scales, ElementsAre(kScale127));
  EXPECT_TRUE(std::isnan(a.out[0]));
  EXPECT_EQ(a.out[2], INFINITY);
  EXPECT_EQ(a.out[1], 127 * kScale127);
}

TEST(IntScheme, MseClippingShrinksTheRangeWhenAnOutlierCostsMore) {
  // 63 values spread over [-0.5, 0.5] and one of 1: shrinking the range by r
  // costs the outlier ((1 - r) amax)^2 and saves the other 63 about
  // 63 (1 - r^2) step^2 / 12 with step = amax / 7: a net gain near r = 0.9.
  std::vector<float> x(64);
  for (int i = 0; i < 63; ++i) x[i] = -0.5f + static_cast<float>(i) / 62;
  x[63] = 1.0f;
  const Applied plain = Apply(*Make("int4-g64"), x, 64);
  const Applied clipped = Apply(*Make("int4-g64:clip=mse"), x, 64);
  auto sse = [&](const std::vector<float>& q) {
    double s = 0;
    for (size_t i = 0; i < x.size(); ++i) s += (double{q[i]} - x[i]) * (double{q[i]} - x[i]);
    return s;
  };
  EXPECT_LT(clipped.stored.scales[0], plain.stored.scales[0]);
  EXPECT_LT(sse(clipped.out), sse(plain.out));
  EXPECT_EQ(plain.counts.clipped, 0u);
  EXPECT_GE(clipped.counts.clipped, 1u);  // the outlier
  // The chosen ratio is on AWQ's grid: the scale is r / 7 for some r = 1 - k/20.
  bool on_grid = false;
  for (int k = 1; k < 10; ++k) {
    const float r = 1.0f - static_cast<float>(k) / 20.0f;
    on_grid |= Apply(*Make("int4-g64:scale=fp32"), {r}, 1).stored.scales[0] ==
               Apply(*Make("int4-g64:clip=mse:scale=fp32"), x, 64).stored.scales[0];
  }
  EXPECT_TRUE(on_grid);
}

// A seeded N(0, 0.02^2) matrix, 4096 x 4096.
const std::vector<float>& Gaussian() {
  static const auto* x = [] {
    auto* v = new std::vector<float>(4096 * 4096);
    std::mt19937_64 rng(20261129);
    std::normal_distribution<float> normal(0.0f, 0.02f);
    for (float& f : *v) f = normal(rng);
    return v;
  }();
  return *x;
}

double Rmse(const std::vector<float>& x, const std::vector<float>& q) {
  double s = 0;
  for (size_t i = 0; i < x.size(); ++i) s += (double{q[i]} - x[i]) * (double{q[i]} - x[i]);
  return std::sqrt(s / static_cast<double>(x.size()));
}

// Uniform quantization with step s has error uniform in +-s/2: RMSE^2 is the
// mean over elements of s^2 / 12, with s the element's block step: amax / qmax
// (symmetric) or (max(0, max) - min(0, min)) / qmax (asymmetric). Elements
// at a block's extremes have no error, so the prediction is an upper bound
// within a few percent for small groups.
double PredictedIntRmse(const std::vector<float>& x, size_t group, int qmax, bool asymmetric) {
  double sum = 0;
  for (size_t start = 0; start < x.size(); start += group) {
    float lo = 0, hi = 0;
    for (size_t i = 0; i < group; ++i) {
      lo = std::min(lo, x[start + i]);
      hi = std::max(hi, x[start + i]);
    }
    const double step = (asymmetric ? hi - lo : std::max(hi, -lo)) / qmax;
    sum += step * step / 12 * static_cast<double>(group);
  }
  return std::sqrt(sum / static_cast<double>(x.size()));
}

// Rounding to a float format with m mantissa bits: step 2^(e - m) for |x| in
// [2^e, 2^(e+1)), e no lower than the smallest normal exponent.
double PredictedCastRmse(const std::vector<float>& x, const Format& f) {
  double sum = 0;
  for (float v : x) {
    if (v == 0) continue;
    const int e = std::max(std::ilogb(v), f.min_normal_exponent());
    const double step = std::ldexp(1.0, e - f.mantissa_bits);
    sum += step * step / 12;
  }
  return std::sqrt(sum / static_cast<double>(x.size()));
}

TEST(SchemeGaussian, IntegerRmseMatchesTheUniformErrorModel) {
  const std::vector<float>& x = Gaussian();
  struct Case {
    std::string scheme;
    size_t group;
    int qmax;
    bool asymmetric;
  } cases[] = {{"int8", x.size(), 127, false},  // one step for the tensor
               {"int8-channel", 4096, 127, false}, {"int4-g32", 32, 7, false},
               {"int4-g64", 64, 7, false},         {"int4-g128", 128, 7, false},
               {"uint4-g128-asym", 128, 15, true}, {"uint8-channel-asym", 4096, 255, true}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.scheme);
    const double measured = Rmse(x, Apply(*Make(c.scheme), x, 4096).out);
    const double predicted = PredictedIntRmse(x, c.group, c.qmax, c.asymmetric);
    EXPECT_GT(measured, 0.95 * predicted);
    EXPECT_LT(measured, 1.01 * predicted);
  }
}

TEST(SchemeGaussian, CastRmseMatchesTheRoundingErrorModel) {
  const std::vector<float>& x = Gaussian();
  for (const std::string name : {"fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2"}) {
    SCOPED_TRACE(name);
    const double measured = Rmse(x, Apply(*Make(name), x, 4096).out);
    const double predicted = PredictedCastRmse(x, *FindFormat(name));
    EXPECT_NEAR(measured / predicted, 1.0, 0.01);
  }
}

}  // namespace
}  // namespace lowp
