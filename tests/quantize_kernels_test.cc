// kernels/quantize.h: known answers of the scalar references, worked out by
// hand, then the SIMD kernels against the references on every Highway target
// this CPU runs, on random and adversarial data (NaN, +-Inf, -0, subnormals,
// huge values, ties, clamping at both ends, zero and non-finite scales), all
// block sizes 1..130, short last blocks, lengths around the vector size and
// misaligned starts.
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/simd_targets.h"
#include "kernels/quantize.h"

namespace lowp::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Counts and maxima exactly; the sums within the bound of
// kernels/error_stats.h: each path is within B = 21 * 2^-24 + count * 2^-52
// (relative) of the exact sums, so the two within 2B of each other.
double SumBound(uint64_t count) { return 21 * 0x1p-24 + static_cast<double>(count) * 0x1p-52; }

void ExpectSameStats(const ErrorStats& w, const ErrorStats& g) {
  EXPECT_EQ(w.count, g.count);
  EXPECT_EQ(w.nan_inputs, g.nan_inputs);
  EXPECT_EQ(w.inf_inputs, g.inf_inputs);
  EXPECT_EQ(w.nonfinite_outputs, g.nonfinite_outputs);
  EXPECT_EQ(w.measured, g.measured);
  EXPECT_EQ(w.zeroed, g.zeroed);
  EXPECT_EQ(w.subnormal, g.subnormal);
  EXPECT_EQ(w.clipped, g.clipped);
  EXPECT_EQ(w.relative_count, g.relative_count);
  EXPECT_EQ(w.max_abs_error, g.max_abs_error);
  EXPECT_EQ(w.max_relative_error, g.max_relative_error);
  const double kTol = 2 * SumBound(w.count);
  EXPECT_NEAR(w.sum_squared_error, g.sum_squared_error, kTol * w.sum_squared_error);
  EXPECT_NEAR(w.sum_squared_input, g.sum_squared_input, kTol * w.sum_squared_input);
  EXPECT_NEAR(w.sum_squared_output, g.sum_squared_output, kTol * w.sum_squared_output);
  // |x q| <= (x^2 + q^2) / 2
  EXPECT_NEAR(w.sum_product, g.sum_product, kTol * (w.sum_squared_input + w.sum_squared_output));
  EXPECT_NEAR(w.sum_abs_error, g.sum_abs_error, kTol * w.sum_abs_error);
  EXPECT_NEAR(w.sum_relative_error, g.sum_relative_error, kTol * w.sum_relative_error);
  EXPECT_NEAR(w.sum_squared_relative_error, g.sum_squared_relative_error,
              kTol * w.sum_squared_relative_error);
}

// The sums of got against long double sums of the exact e = q - x and
// r = |e| / |x| over the finite pairs: within the bound of
// kernels/error_stats.h (sum_product against (sum x^2 + sum q^2) / 2).
void ExpectWithinBoundOfExact(std::span<const float> x, std::span<const float> q,
                              const CompareOptions& o, const ErrorStats& got) {
  long double ee = 0, xx = 0, qq = 0, xq = 0, ae = 0, rel = 0, rel2 = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!std::isfinite(x[i]) || !std::isfinite(q[i])) continue;
    const long double xi = x[i], qi = q[i], e = qi - xi, a = std::fabs(e);
    ee += e * e;
    xx += xi * xi;
    qq += qi * qi;
    xq += xi * qi;
    ae += a;
    if (xi != 0 && std::fabs(x[i]) >= o.relative_floor) {
      rel += a / std::fabs(xi);
      rel2 += (a / xi) * (a / xi);
    }
  }
  const double b = SumBound(got.count);
  auto near = [&](double g, long double want, long double scale, const char* what) {
    EXPECT_LE(std::fabs(static_cast<long double>(g) - want), b * scale)
        << what << " got " << g << " exact " << static_cast<double>(want);
  };
  near(got.sum_squared_error, ee, ee, "sum e^2");
  near(got.sum_squared_input, xx, xx, "sum x^2");
  near(got.sum_squared_output, qq, qq, "sum q^2");
  near(got.sum_product, xq, (xx + qq) / 2, "sum x q");
  near(got.sum_abs_error, ae, ae, "sum |e|");
  near(got.sum_relative_error, rel, rel, "sum r");
  near(got.sum_squared_relative_error, rel2, rel2, "sum r^2");
}

// ------------------------------ Known answers of the references

TEST(QuantizeRef, BlockAbsMaxAndMinMaxByHand) {
  // Two rows of 5 in blocks of 2: [0,1] [2,3] [4] per row.
  const std::vector<float> x = {1, -3,    kNaN, 2,    -kInf,  // row 0
                                0, -0.0f, kInf, kNaN, -7};    // row 1
  std::vector<float> amax(6, -1), lo(6, -1), hi(6, -1);
  BlockAbsMaxRef(x, 5, 2, amax);
  // |1|,|-3| -> 3; NaN skipped -> 2; -Inf skipped, none left -> 0;
  // 0,-0 -> +0; Inf, NaN -> none -> 0; |-7| -> 7.
  ExpectSameBits({3, 2, 0, 0, 0, 7}, amax);
  BlockMinMaxRef(x, 5, 2, lo, hi);
  ExpectSameBits({-3, 2, 0, 0, 0, -7}, lo);  // the zeros are +0, also for {0, -0}
  ExpectSameBits({1, 2, 0, 0, 0, -7}, hi);
}

TEST(QuantizeRef, IntRoundsHalfToEvenAndClamps) {
  // scale 1, zero 0, q in [-3, 3]: x / 1 rounded half to even.
  const std::vector<float> x = {2.5f, 3.5f, -2.5f, 0.5f, 1.5f, -0.5f, 7, -9, kNaN, -kInf};
  std::vector<float> out(x.size());
  std::vector<int16_t> codes(x.size());
  const float scale[] = {1};
  const uint64_t clipped = QuantizeIntBlocksRef(x, 10, 10, scale, {}, {-3, 3}, out, codes);
  // 2.5 -> 2, 3.5 -> 4 -> clamped to 3, -2.5 -> -2, 0.5 -> 0, 1.5 -> 2,
  // -0.5 -> -0 (+ zero 0 = +0), 7 -> 3, -9 -> -3; NaN and -Inf pass through
  // with q = zero = 0. Clipped: 3.5, 7, -9.
  EXPECT_EQ(clipped, 3u);
  ExpectSameBits({2, 3, -2, 0, 2, 0, 3, -3, kNaN, -kInf}, out);
  EXPECT_THAT(codes, ::testing::ElementsAre(2, 3, -2, 0, 2, 0, 3, -3, 0, 0));
}

TEST(QuantizeRef, IntScaleZeroPointAndShortBlock) {
  // cols 5, block 2: blocks [0,1] [2,3] [4] with scales 2, 0, 0.5 and zeros
  // 1, 4, -1, q in [0, 3].
  const std::vector<float> x = {5, -3, 1, kInf, 0.75f};
  const std::vector<float> scale = {2, 0, 0.5f};
  const std::vector<float> zero = {1, 4, -1};
  std::vector<float> out(5);
  std::vector<int16_t> codes(5);
  const uint64_t clipped = QuantizeIntBlocksRef(x, 5, 2, scale, zero, {0, 3}, out, codes);
  // 5 / 2 = 2.5 -> 2, + 1 = 3, out (3 - 1) * 2 = 4.
  // -3 / 2 = -1.5 -> -2, + 1 = -1 -> clamped to 0 (clipped), out (0 - 1) * 2 = -2.
  // scale 0: q = zero 4 clamped to 3, out 0; Inf passes through, q 3.
  // 0.75 / 0.5 = 1.5 -> 2, - 1 = 1, out (1 + 1) * 0.5 = 1.
  EXPECT_EQ(clipped, 1u);
  ExpectSameBits({4, -2, 0, kInf, 1}, out);
  EXPECT_THAT(codes, ::testing::ElementsAre(3, 0, 3, 3, 1));
}

TEST(QuantizeRef, ErrorStatsByHand) {
  const std::vector<float> x = {1, -2, 0.5f, 3, kNaN, kInf, 1, 0};
  const std::vector<float> q = {1.25f, -2, 0, 4, kNaN, kInf, kInf, 0};
  CompareOptions o;
  o.relative_floor = 0.75f;
  o.subnormal_below = 1.5f;
  o.clip_above = 2.5f;
  ErrorStats s;
  ComparePairsRef(x, q, o, s);
  // Measured: the first four and (0, 0); e = 0.25, 0, -0.5, 1, 0.
  EXPECT_EQ(s.count, 8u);
  EXPECT_EQ(s.nan_inputs, 1u);
  EXPECT_EQ(s.inf_inputs, 1u);
  EXPECT_EQ(s.nonfinite_outputs, 1u);  // 1 -> Inf
  EXPECT_EQ(s.measured, 5u);
  EXPECT_EQ(s.zeroed, 1u);                   // 0.5 -> 0 (0 -> 0 is not zeroed)
  EXPECT_EQ(s.subnormal, 1u);                // 0 < |1.25| < 1.5
  EXPECT_EQ(s.clipped, 1u);                  // |3| > 2.5
  EXPECT_EQ(s.relative_count, 3u);           // |x| >= 0.75: 1, -2, 3
  EXPECT_EQ(s.sum_squared_error, 1.3125);    // 1/16 + 0 + 1/4 + 1
  EXPECT_EQ(s.sum_squared_input, 14.25);     // 1 + 4 + 1/4 + 9
  EXPECT_EQ(s.sum_squared_output, 21.5625);  // 25/16 + 4 + 0 + 16
  EXPECT_EQ(s.sum_product, 17.25);           // 5/4 + 4 + 0 + 12
  EXPECT_EQ(s.sum_abs_error, 1.75);
  EXPECT_EQ(s.max_abs_error, 1.0);
  // Relative: 0.25 / 1, 0 / 2, 1 / 3, each a float division (the rule of
  // kernels/error_stats.h for |x|, |q| <= 2^60); their squares in double.
  const double third = 1.0f / 3.0f;
  EXPECT_EQ(s.sum_relative_error, 0.25 + third);
  EXPECT_EQ(s.sum_squared_relative_error, 0.0625 + third * third);
  EXPECT_EQ(s.max_relative_error, third);

  // No floor: x = 0 still has no relative error; Add sums and takes maxima.
  ErrorStats t;
  t.max_abs_error = 5;
  ComparePairsRef(std::vector<float>{0, 4}, std::vector<float>{0.5f, 3}, {}, t);
  EXPECT_EQ(t.relative_count, 1u);
  EXPECT_EQ(t.max_relative_error, 0.25);  // |3 - 4| / 4
  EXPECT_EQ(t.max_abs_error, 5.0);        // kept: above 1
  EXPECT_EQ(t.sum_squared_error, 1.25);   // 0.25 + 1
  EXPECT_EQ(t.zeroed, 0u);
  s.Merge(t);
  EXPECT_EQ(s.count, 10u);
  EXPECT_EQ(s.relative_count, 4u);
  EXPECT_EQ(s.max_abs_error, 5.0);
  EXPECT_EQ(s.sum_squared_error, 2.5625);
}

// Where e and r are double: |x| or |q| above 2^60, and a float r that would
// overflow.
TEST(QuantizeRef, ErrorStatsDoubleTerms) {
  const float big = 0x1p100f, tiny = 0x1p-140f;
  const float third = 1.0f / 3.0f;
  ErrorStats s;
  // Out of range: e = q - x in double (exact here), r = |e| / |x| in double.
  ComparePairsRef(std::vector<float>{big}, std::vector<float>{big * third}, {}, s);
  const double e = static_cast<double>(big * third) - static_cast<double>(big);
  EXPECT_EQ(s.max_abs_error, -e);
  EXPECT_EQ(s.sum_squared_error, e * e);
  EXPECT_EQ(s.max_relative_error, -e / static_cast<double>(big));
  // x = 2^-140, q = 1: e is a float, 1 - 2^-140 rounds to 1, and r = 2^140
  // overflows a float, so it is 1 / 2^-140 in double.
  ErrorStats t;
  ComparePairsRef(std::vector<float>{tiny}, std::vector<float>{1}, {}, t);
  EXPECT_EQ(t.max_abs_error, 1.0);
  EXPECT_EQ(t.max_relative_error, 0x1p140);
  EXPECT_EQ(t.sum_squared_relative_error, 0x1p280);
}

// ------------------------------ SIMD against the references

// Mostly ordinary values, with the special ones mixed in at rate `special`.
std::vector<float> RandomValues(std::mt19937& rng, size_t n, double special) {
  static const float kSpecial[] = {kNaN,
                                   -kNaN,
                                   kInf,
                                   -kInf,
                                   0.0f,
                                   -0.0f,
                                   std::numeric_limits<float>::denorm_min(),
                                   -1e-40f,
                                   std::numeric_limits<float>::min(),
                                   std::numeric_limits<float>::max(),
                                   -std::numeric_limits<float>::max(),
                                   3e38f,
                                   -1e30f,
                                   2.5f,
                                   3.5f,
                                   -2.5f,
                                   0.5f,
                                   -0.5f,
                                   1.5f,
                                   126.5f,
                                   -127.5f,
                                   1000,
                                   -1000,
                                   8388609,
                                   16777216};
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<float> normal(0, 1);
  std::uniform_int_distribution<int> pick(0, std::size(kSpecial) - 1);
  std::uniform_int_distribution<int> half(-300, 300);
  std::vector<float> v(n);
  for (float& f : v) {
    const double r = u(rng);
    if (r < special) {
      f = kSpecial[pick(rng)];
    } else if (r < 2 * special) {
      f = static_cast<float>(half(rng)) + 0.5f;  // a tie at scale 1, 0.5, 0.25, ...
    } else {
      f = normal(rng) * 40;
    }
  }
  return v;
}

TEST(QuantizeSimd, BlockAbsMaxAndMinMaxMatchRef) {
  std::mt19937 rng(1);
  ForEachTarget([&] {
    for (int64_t block = 1; block <= 130; ++block) {
      for (const int64_t cols : {block, 3 * block, block + 1, 2 * block - 1, int64_t{257}, 20 * block}) {
        const int64_t rows = 1 + block % 3;
        const int64_t per_row = (cols + block - 1) / block;
        const double special = block % 2 ? 0.05 : 0.5;
        const size_t offset = static_cast<size_t>(block % 4);  // misaligned starts
        std::vector<float> buffer = RandomValues(rng, rows * cols + offset, special);
        if (block % 5 == 0) std::fill(buffer.begin(), buffer.begin() + block, 0.0f);
        const std::span<const float> x(buffer.data() + offset, rows * cols);
        std::vector<float> want(rows * per_row), got(rows * per_row, -1);
        BlockAbsMaxRef(x, cols, block, want);
        BlockAbsMax(x, cols, block, got);
        ExpectSameBits(want, got);
        std::vector<float> want_hi(want.size()), got_lo(want.size(), -1), got_hi(want.size(), -1);
        BlockMinMaxRef(x, cols, block, want, want_hi);
        BlockMinMax(x, cols, block, got_lo, got_hi);
        ExpectSameBits(want, got_lo);
        ExpectSameBits(want_hi, got_hi);
        if (::testing::Test::HasFailure()) {
          FAIL() << "block " << block << " cols " << cols;
        }
      }
    }
  });
}

TEST(QuantizeSimd, QuantizeIntBlocksMatchesRef) {
  std::mt19937 rng(2);
  const float kScales[] = {1,      0.5f,   0.25f, 2,     1.0f / 1024, 3.7f, 0.013f, -1.5f,
                           1e-38f, 1e-45f, 0,     -0.0f, kInf,        kNaN, 1e30f,  0.1f};
  const IntQuantParams kParams[] = {{-127, 127}, {-8, 7}, {0, 15}, {-32768, 32767}, {0, 3}, {5, 5}};
  std::uniform_int_distribution<int> pick_scale(0, std::size(kScales) - 1);
  std::uniform_int_distribution<int> pick_zero(-10, 20);
  ForEachTarget([&] {
    for (int64_t block = 1; block <= 130; ++block) {
      for (const int64_t cols : {block, 2 * block + 3, block - 1 + (block == 1), int64_t{131}}) {
        const int64_t rows = 1 + block % 3;
        const int64_t per_row = (cols + block - 1) / block;
        const size_t n = static_cast<size_t>(rows * cols);
        const size_t offset = static_cast<size_t>(block % 4);
        const std::vector<float> buffer = RandomValues(rng, n + offset, block % 2 ? 0.05 : 0.4);
        const std::span<const float> x(buffer.data() + offset, n);
        std::vector<float> scale(rows * per_row), zero;
        for (float& s : scale) s = kScales[pick_scale(rng)];
        if (block % 3 != 0) {
          zero.resize(scale.size());
          for (float& z : zero) z = static_cast<float>(pick_zero(rng));
          if (block % 7 == 0) zero[0] = -0.0f;
        }
        const IntQuantParams& p = kParams[block % std::size(kParams)];
        std::vector<float> want(n), got(n, -1);
        std::vector<int16_t> want_codes(n), got_codes(n, 99);
        const uint64_t want_clipped =
            QuantizeIntBlocksRef(x, cols, block, scale, zero, p, want, want_codes);
        const bool with_codes = block % 4 != 1;
        const uint64_t got_clipped =
            QuantizeIntBlocks(x, cols, block, scale, zero, p, got,
                              with_codes ? std::span<int16_t>(got_codes) : std::span<int16_t>());
        EXPECT_EQ(want_clipped, got_clipped);
        ExpectSameBits(want, got);
        if (with_codes) {
          EXPECT_EQ(want_codes, got_codes);
        }
        // In place: out is x.
        std::vector<float> in_place(x.begin(), x.end());
        EXPECT_EQ(want_clipped, QuantizeIntBlocks(in_place, cols, block, scale, zero, p, in_place));
        ExpectSameBits(want, in_place);
        if (::testing::Test::HasFailure()) FAIL() << "block " << block << " cols " << cols;
      }
    }
  });
}

TEST(QuantizeSimd, ComparePairsMatchesRef) {
  std::mt19937 rng(3);
  CompareOptions options[4];
  options[1].relative_floor = 1e-3f;
  options[1].subnormal_below = std::numeric_limits<float>::min();
  options[2].relative_floor = 0.5f;
  options[2].subnormal_below = 1;
  options[2].clip_above = 100;
  options[3].relative_floor = -1;
  options[3].clip_above = 448;
  std::vector<size_t> lengths;
  for (size_t n = 0; n <= 70; ++n) lengths.push_back(n);
  for (size_t n : {127, 128, 129, 1000, 4099, 65536 + 5}) lengths.push_back(n);
  ForEachTarget([&] {
    for (const size_t n : lengths) {
      for (int variant = 0; variant < 4; ++variant) {
        const size_t offset = (n + variant) % 4;
        const double special = variant == 0 ? 0 : variant == 1 ? 0.01 : 0.3;
        const std::vector<float> xb = RandomValues(rng, n + offset, special);
        std::vector<float> qb = RandomValues(rng, n + offset, special);
        // Mostly q near x, as a reconstruction is.
        for (size_t i = 0; i < qb.size(); ++i) {
          if (i % 3 != 0) qb[i] = xb[i] * 1.01f;
          if (i % 7 == 0) qb[i] = 0;
        }
        const std::span<const float> x(xb.data() + offset, n), q(qb.data() + offset, n);
        const CompareOptions& o = options[variant];
        ErrorStats want, got;
        want.max_abs_error = got.max_abs_error = 1e-9;  // Add to existing stats
        want.count = got.count = 7;
        ComparePairsRef(x, q, o, want);
        ComparePairs(x, q, o, got);
        ExpectSameStats(want, got);
        if (::testing::Test::HasFailure()) FAIL() << "n " << n << " variant " << variant;
      }
    }
  });
}

// More elements than the int32 lane counters take in one chunk (2^24).
TEST(QuantizeSimd, ComparePairsLongInput) {
  const size_t n = (size_t{1} << 24) + 37;
  std::vector<float> x(n), q(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i % 1000) - 500;
    q[i] = i % 5 == 0 ? 0.0f : x[i] + 0.25f;
  }
  x[n - 1] = kNaN;
  CompareOptions o;
  o.relative_floor = 1;
  o.subnormal_below = 1;
  ErrorStats want, got;
  ComparePairsRef(x, q, o, want);
  ComparePairs(x, q, o, got);
  ExpectSameStats(want, got);
  ExpectWithinBoundOfExact(x, q, o, got);
}

// Adversarial data against long double sums: exponents from 2^-149 to 2^120
// mixed within runs (so that runs fall back to double, or not), values
// that cancel in sum x q, long runs of equal terms (which a float sum over
// 2^24 of them would lose), exact and inexact float e, relative errors
// whose float overflows.
TEST(QuantizeSimd, ComparePairsWithinBoundOfExactSums) {
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> unit(1, 2);
  std::uniform_int_distribution<int> bit(0, 1);
  CompareOptions o;
  o.relative_floor = 0;  // every nonzero x counts
  ForEachTarget([&] {
    for (int kind = 0; kind < 6; ++kind) {
      const size_t n = kind == 5 ? (size_t{1} << 20) + 5 : 4096 + 3;
      std::vector<float> x(n), q(n);
      for (size_t i = 0; i < n; ++i) {
        const float sign = bit(rng) ? 1.0f : -1.0f;
        float v = sign * unit(rng);
        switch (kind) {
          case 0:  // huge dynamic range, element by element
            v = std::ldexp(v, std::uniform_int_distribution<int>(-149, 120)(rng));
            break;
          case 1:  // mostly ordinary, now and then one tiny or huge element
            v = std::ldexp(v, i % 97 == 0 ? 70 : i % 89 == 0 ? -100 : -6);
            break;
          case 2:  // cancellation: pairs +v, -v
            v = i % 2 ? -x[i - 1] : v * 0.02f;
            break;
          case 3:  // all tiny: the float squares would underflow
            v = std::ldexp(v, -80);
            break;
          case 4:  // near the top of the float range
            v = std::ldexp(v, 126);
            break;
          case 5:  // long: the same terms over 2^20 elements
            v = 0.75f;
            break;
        }
        x[i] = v;
        const int how = static_cast<int>(i % 6);
        q[i] = how == 0   ? 0.0f
               : how == 1 ? v * 1.0009765625f                          // e exact
               : how == 2 ? v * 0.999f                                 // e rounded
               : how == 3 ? -v                                         // e = -2x
               : how == 4 ? std::ldexp(1.0f, 40) * (bit(rng) ? 1 : -1)  // q far from x
                          : v;
      }
      ErrorStats got;
      ComparePairs(x, q, o, got);
      ExpectWithinBoundOfExact(x, q, o, got);
      ErrorStats ref;
      ComparePairsRef(x, q, o, ref);
      ExpectSameStats(ref, got);
      if (::testing::Test::HasFailure()) FAIL() << "kind " << kind;
    }
  });
}

// The float partials do not depend on the vector length: the x86 targets with
// FMA (AVX2: two vectors of 8 per step, AVX3: one of 16) form the same float
// partials, so their sums differ only in the order of the double additions.
TEST(QuantizeSimd, ComparePairsSameSumsOnFmaTargets) {
  std::mt19937 rng(18);
  std::normal_distribution<float> normal(0, 0.02f);
  const size_t n = 100003;
  std::vector<float> x(n), q(n);
  for (size_t i = 0; i < n; ++i) {
    x[i] = normal(rng);
    q[i] = i % 5 == 0 ? 0.0f : x[i] * 1.0123f;
  }
  CompareOptions o;
  o.relative_floor = 1e-3f;
  std::vector<ErrorStats> stats;
  for (int64_t target : hwy::SupportedAndGeneratedTargets()) {
    if (target != HWY_AVX2 && target != HWY_AVX3 && target != HWY_AVX3_DL) continue;
    hwy::SetSupportedTargetsForTest(target);
    ComparePairs(x, q, o, stats.emplace_back());
  }
  hwy::SetSupportedTargetsForTest(0);
  for (size_t t = 1; t < stats.size(); ++t) {
    const ErrorStats& w = stats[0];
    const ErrorStats& g = stats[t];
    const double tol = 1e-13;
    EXPECT_NEAR(w.sum_squared_error, g.sum_squared_error, tol * w.sum_squared_error);
    EXPECT_NEAR(w.sum_squared_input, g.sum_squared_input, tol * w.sum_squared_input);
    EXPECT_NEAR(w.sum_squared_output, g.sum_squared_output, tol * w.sum_squared_output);
    EXPECT_NEAR(w.sum_product, g.sum_product, tol * w.sum_squared_input);
    EXPECT_NEAR(w.sum_abs_error, g.sum_abs_error, tol * w.sum_abs_error);
    EXPECT_NEAR(w.sum_relative_error, g.sum_relative_error, tol * w.sum_relative_error);
    EXPECT_NEAR(w.sum_squared_relative_error, g.sum_squared_relative_error,
                tol * w.sum_squared_relative_error);
  }
  std::cout << stats.size() << " FMA targets compared\n";
}

}  // namespace
}  // namespace lowp::testing

namespace lowp::testing {
namespace {

TEST(QuantizeSimd, CountCastEventsMatchesRef) {
  std::mt19937 rng(9);
  ForEachTarget([&] {
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{16}, size_t{33}, size_t{1000}}) {
      const std::vector<float> x = RandomValues(rng, n, 0.3), q = RandomValues(rng, n, 0.3);
      for (const float clip : {448.0f, 6.0f, kInf, kNaN}) {
        for (const float sub : {0.0f, 0.015625f, 1e-40f, kInf}) {
          uint64_t want_c = 5, want_s = 7, got_c = 5, got_s = 7;  // added to
          CountCastEventsRef(x, q, clip, sub, want_c, want_s);
          CountCastEvents(x, q, clip, sub, got_c, got_s);
          EXPECT_EQ(want_c, got_c) << n << " " << clip;
          EXPECT_EQ(want_s, got_s) << n << " " << sub;
        }
      }
    }
  });
}

}  // namespace
}  // namespace lowp::testing
