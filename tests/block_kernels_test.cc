// kernels/blocks.h: known answers of the scalar references, then the SIMD
// kernels against them on every Highway target this CPU runs, on random and
// adversarial data (NaN, +-Inf, -0, subnormals, huge values, ties of
// magnitude, values that land exactly on the truncation and rounding edges),
// block sizes 1..70, short last blocks and misaligned starts.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/blocks.h"
#include "tests/simd_targets.h"

namespace lowp::testing {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::vector<float> RandomValues(std::mt19937& rng, size_t n, double special) {
  static const float kSpecial[] = {kNaN,    -kNaN,  kInf,  -kInf,    0.0f,  -0.0f,  1e-45f,
                                   -1e-40f, 1e-38f, 3e38f, -3e38f,   2.5f,  -2.5f,  0.5f,
                                   -0.5f,   7.5f,   -8.0f, 8.0f,     15.5f, -16.0f, 127.5f,
                                   -128.5f, 1000,   -1000, 0.999999f};
  std::uniform_real_distribution<double> u(0, 1);
  std::normal_distribution<float> normal(0, 1);
  std::uniform_int_distribution<int> pick(0, std::size(kSpecial) - 1);
  std::vector<float> v(n);
  for (float& f : v) {
    const double r = u(rng);
    f = r < special ? kSpecial[pick(rng)] : normal(rng) * 3;
  }
  return v;
}

TEST(BlocksRef, SignedMaxTakesTheFirstOfEqualMagnitudes) {
  const std::vector<float> x = {1, -3, 3, 2, kInf, -kNaN, 0.5f, 0};
  std::vector<float> max(3);
  BlockSignedMaxRef(x, 8, 3, max);  // blocks {1,-3,3} {2,inf,nan} {0.5,0}
  EXPECT_EQ(max[0], -3.0f);
  EXPECT_EQ(max[1], 2.0f);
  EXPECT_EQ(max[2], 0.5f);
}

TEST(BlocksRef, GgmlRulesByHand) {
  // q4_0 with d = -0.5 (max 4): id = -2; x = 4 -> trunc(-8 + 8.5) = 0 -> (0 - 8) * d = 4;
  // x = -4 -> 16.5 -> clamped to 15 -> -3.5; x = 0.2 -> 8.1 -> 8 -> 0.
  const GgmlElementRule q4{GgmlRule::kTrunc, 8.5f, 15, 8};
  const std::vector<float> x = {4, -4, 0.2f, kNaN};
  const std::vector<float> id = {-2}, d = {-0.5f};
  std::vector<float> out(4);
  EXPECT_EQ(QuantizeGgmlBlocksRef(q4, x, 4, 4, {id, d, {}, {}}, out), 1u);
  EXPECT_EQ(out[0], 4.0f);
  EXPECT_EQ(out[1], -3.5f);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_TRUE(std::isnan(out[3]));
  // q8_0 rounds half away from zero: 2.5 -> 3, -2.5 -> -3; beyond int8 clamps.
  const GgmlElementRule q8{GgmlRule::kRound, 0, 127, 0};
  const std::vector<float> y = {2.5f, -2.5f, 200, -200};
  const std::vector<float> one = {1}, half = {0.5f};
  EXPECT_EQ(QuantizeGgmlBlocksRef(q8, y, 4, 4, {one, half, {}, {}}, out), 2u);
  EXPECT_EQ(out, (std::vector<float>{1.5f, -1.5f, 63.5f, -64.0f}));
}

TEST(BlocksRef, CodebookTiesGoToTheLowerCode) {
  const std::vector<float> thresholds = {-0.5f, 0.5f}, values = {-1, 0, 1};
  const std::vector<float> x = {-0.5f, 0.5f, 0.6f, -2, kInf};
  const std::vector<float> inverse = {1}, scale = {10};
  std::vector<float> out(5);
  QuantizeCodebookBlocksRef(x, 5, 5, inverse, scale, thresholds, values, out);
  EXPECT_EQ(out[0], -10.0f);
  EXPECT_EQ(out[1], 0.0f);
  EXPECT_EQ(out[2], 10.0f);
  EXPECT_EQ(out[3], -10.0f);
  EXPECT_EQ(out[4], kInf);
}

TEST(BlocksSimd, SignedMaxMatchesRef) {
  std::mt19937 rng(3);
  ForEachTarget([&] {
    for (int64_t block = 1; block <= 70; ++block) {
      for (const int64_t cols :
           {block, 3 * block, block + 1, 2 * block - 1, int64_t{131}, 20 * block}) {
        const int64_t rows = 1 + block % 3, per_row = (cols + block - 1) / block;
        const size_t offset = static_cast<size_t>(block % 4);
        std::vector<float> buffer = RandomValues(rng, rows * cols + offset, block % 2 ? 0.1 : 0.6);
        const std::span<const float> x(buffer.data() + offset, rows * cols);
        std::vector<float> want(rows * per_row), got(rows * per_row, -7);
        BlockSignedMaxRef(x, cols, block, want);
        BlockSignedMax(x, cols, block, got);
        ExpectSameBits(want, got);
        if (::testing::Test::HasFailure()) FAIL() << "block " << block << " cols " << cols;
      }
    }
  });
}

TEST(BlocksSimd, GgmlRulesMatchRef) {
  std::mt19937 rng(4);
  const float kIds[] = {-2, 0.25f, 0, 1e30f, -1e-30f, 3.3f, kInf, 1.0f / 3};
  const GgmlElementRule kRules[] = {{GgmlRule::kTrunc, 8.5f, 15, 8},
                                    {GgmlRule::kTrunc, 16.5f, 31, 16},
                                    {GgmlRule::kOffset, 0.5f, 15, 0},
                                    {GgmlRule::kOffset, 0.5f, 31, 0},
                                    {GgmlRule::kRound, 0, 127, 0}};
  std::uniform_int_distribution<int> pick(0, std::size(kIds) - 1);
  std::normal_distribution<float> normal(0, 1);
  ForEachTarget([&] {
    for (const GgmlElementRule& rule : kRules) {
      for (int64_t block = 1; block <= 70; ++block) {
        for (const int64_t cols : {block, 2 * block + 3, int64_t{131}}) {
          const int64_t rows = 1 + block % 3, per_row = (cols + block - 1) / block;
          const size_t n = static_cast<size_t>(rows * cols), offset = block % 4;
          const std::vector<float> buffer = RandomValues(rng, n + offset, block % 2 ? 0.1 : 0.5);
          const std::span<const float> x(buffer.data() + offset, n);
          std::vector<float> id(rows * per_row), d(id.size()), min(id.size()), m(id.size());
          for (size_t g = 0; g < id.size(); ++g) {
            id[g] = kIds[pick(rng)];
            d[g] = id[g] == 0 ? 0 : 1 / id[g];
            min[g] = normal(rng) * 3;
            m[g] = min[g] * 1.001f;
          }
          const GgmlBlockParams params{id, d, min, m};
          std::vector<float> want(n), got(n, -7);
          const uint64_t want_clipped = QuantizeGgmlBlocksRef(rule, x, cols, block, params, want);
          EXPECT_EQ(want_clipped, QuantizeGgmlBlocks(rule, x, cols, block, params, got));
          ExpectSameBits(want, got);
          if (::testing::Test::HasFailure()) FAIL() << "block " << block << " cols " << cols;
        }
      }
    }
  });
}

TEST(BlocksSimd, CodebookMatchesRef) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0, 1);
  ForEachTarget([&] {
    for (const int count : {2, 5, 9, 16}) {
      std::vector<float> values(count), thresholds(count - 1);
      for (float& v : values) v = normal(rng);
      std::sort(values.begin(), values.end());
      for (int k = 0; k + 1 < count; ++k) thresholds[k] = (values[k] + values[k + 1]) / 2;
      for (int64_t block = 1; block <= 70; block += 3) {
        for (const int64_t cols : {block, 2 * block + 3, int64_t{131}}) {
          const int64_t rows = 1 + block % 3, per_row = (cols + block - 1) / block;
          const size_t n = static_cast<size_t>(rows * cols), offset = block % 4;
          std::vector<float> buffer = RandomValues(rng, n + offset, block % 2 ? 0.1 : 0.5);
          for (size_t i = 0; i < buffer.size(); i += 7) buffer[i] = thresholds[i % (count - 1)];
          const std::span<const float> x(buffer.data() + offset, n);
          std::vector<float> inverse(rows * per_row), scale(inverse.size());
          for (size_t g = 0; g < inverse.size(); ++g) {
            inverse[g] = g % 5 == 0 ? 1.0f : (g % 5 == 1 ? 0.0f : 1 / (1 + std::fabs(normal(rng))));
            scale[g] = g % 7 == 3 ? -0.0f : 2.5f * (1 + normal(rng));
          }
          std::vector<float> want(n), got(n, -7);
          QuantizeCodebookBlocksRef(x, cols, block, inverse, scale, thresholds, values, want);
          QuantizeCodebookBlocks(x, cols, block, inverse, scale, thresholds, values, got);
          ExpectSameBits(want, got);
          if (::testing::Test::HasFailure()) FAIL() << "count " << count << " block " << block;
        }
      }
    }
  });
}

TEST(BlocksSimd, ScaleAndUnscaleMatchRef) {
  std::mt19937 rng(6);
  const float kMultipliers[] = {1, 0.5f, 0x1p-20f, 0x1p100f, 0x1p-126f, 4};
  std::uniform_int_distribution<int> pick(0, std::size(kMultipliers) - 1);
  ForEachTarget([&] {
    for (int64_t block = 1; block <= 70; block += 3) {
      for (const int64_t cols : {block, 2 * block + 3, int64_t{131}, 20 * block}) {
        const int64_t rows = 1 + block % 3, per_row = (cols + block - 1) / block;
        const size_t n = static_cast<size_t>(rows * cols), offset = block % 4;
        const std::vector<float> buffer = RandomValues(rng, n + offset, block % 2 ? 0.1 : 0.5);
        const std::span<const float> x(buffer.data() + offset, n);
        std::vector<float> m(rows * per_row);
        for (float& f : m) f = kMultipliers[pick(rng)];
        for (const bool clamp : {false, true}) {
          std::vector<float> want(n), got(n, -7);
          EXPECT_EQ(ScaleBlocksRef(x, cols, block, m, 64.0f, 6.0f, clamp, want),
                    ScaleBlocks(x, cols, block, m, 64.0f, 6.0f, clamp, got));
          ExpectSameBits(want, got);
          std::vector<float> want_out(n), got_out = got;  // in place, as the MX schemes call it
          EXPECT_EQ(UnscaleBlocksRef(x, want, cols, block, m, 0.5f, want_out),
                    UnscaleBlocks(x, got_out, cols, block, m, 0.5f, got_out));
          ExpectSameBits(want_out, got_out);
        }
        if (::testing::Test::HasFailure()) FAIL() << "block " << block << " cols " << cols;
      }
    }
  });
}

TEST(BlocksRef, DivideGivesSignedZeroForAZeroDivisor) {
  const std::vector<float> x = {3, -3, kNaN, 1e30f, -2, kInf};
  const std::vector<float> divisor = {2, 0};
  std::vector<float> v(6);
  EXPECT_EQ(DivideBlocksRef(x, 6, 4, divisor, 100.0f, v), 1u);  // 1e30 / 2
  EXPECT_EQ(v[0], 1.5f);
  EXPECT_EQ(v[1], -1.5f);
  EXPECT_EQ(std::bit_cast<uint32_t>(v[2]), 0u);
  EXPECT_EQ(v[3], 5e29f);
  EXPECT_EQ(std::bit_cast<uint32_t>(v[4]), 0x80000000u);  // -0
  EXPECT_EQ(std::bit_cast<uint32_t>(v[5]), 0u);
}

TEST(BlocksRef, MinMaxReadsNonFiniteAsZero) {
  const std::vector<float> x = {1, 2, kNaN, -kInf, -3, -1, -0.0f, -0.0f};
  std::vector<float> min(2), max(2);
  BlockMinMaxNonFiniteAsZeroRef(x, 8, 4, min, max);  // {1, 2, 0, 0} {-3, -1, -0, -0}
  EXPECT_EQ(min[0], 0.0f);
  EXPECT_EQ(max[0], 2.0f);
  EXPECT_EQ(min[1], -3.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(max[1]), 0u);  // +0
}

TEST(BlocksRef, GgmlFp4TiesGoToTheSmallerMagnitude) {
  // e = 1: values 0, 1, 2, 3, 4, 6, 8, 12 and their negatives.
  const std::vector<float> x = {2.5f, 5, -5, -0.5f, 100, -0.0f, 10, kNaN};
  const std::vector<float> e = {1};
  std::vector<float> out(8);
  EXPECT_EQ(QuantizeGgmlFp4BlocksRef(x, 8, 8, e, out), 1u);  // 100 > 12
  EXPECT_EQ(out[0], 2.0f);
  EXPECT_EQ(out[1], 4.0f);
  EXPECT_EQ(out[2], -4.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(out[3]), 0u);  // code 0 is +0
  EXPECT_EQ(out[4], 12.0f);
  EXPECT_EQ(std::bit_cast<uint32_t>(out[5]), 0u);
  EXPECT_EQ(out[6], 8.0f);
  EXPECT_TRUE(std::isnan(out[7]));
}

TEST(BlocksSimd, DivideMatchesRef) {
  std::mt19937 rng(7);
  const float kDivisors[] = {1, 0, 0.5f, 1.0f / 3, 0x1p-140f, 3e38f, 7.1e-3f, 2.2e-45f};
  std::uniform_int_distribution<int> pick(0, std::size(kDivisors) - 1);
  ForEachTarget([&] {
    for (int64_t block = 1; block <= 70; block += 3) {
      for (const int64_t cols : {block, 2 * block + 3, int64_t{131}, 20 * block}) {
        const int64_t rows = 1 + block % 3, per_row = (cols + block - 1) / block;
        const size_t n = static_cast<size_t>(rows * cols), offset = block % 4;
        const std::vector<float> buffer = RandomValues(rng, n + offset, block % 2 ? 0.1 : 0.5);
        const std::span<const float> x(buffer.data() + offset, n);
        std::vector<float> s(rows * per_row);
        for (float& f : s) f = kDivisors[pick(rng)];
        std::vector<float> want(n), got(n, -7);
        EXPECT_EQ(DivideBlocksRef(x, cols, block, s, 448.0f, want),
                  DivideBlocks(x, cols, block, s, 448.0f, got));
        ExpectSameBits(want, got);
        if (::testing::Test::HasFailure()) FAIL() << "block " << block << " cols " << cols;
      }
    }
  });
}

TEST(BlocksSimd, MinMaxNonFiniteAsZeroMatchesRef) {
  std::mt19937 rng(8);
  ForEachTarget([&] {
    for (int64_t block = 1; block <= 70; ++block) {
      for (const int64_t cols : {block, 2 * block + 3, int64_t{131}, 20 * block}) {
        const int64_t rows = 1 + block % 3, per_row = (cols + block - 1) / block;
        const size_t n = static_cast<size_t>(rows * cols), offset = block % 4;
        std::vector<float> buffer = RandomValues(rng, n + offset, block % 2 ? 0.1 : 0.6);
        if (block % 5 == 0) {  // blocks of signed zeros and non-finite values only
          for (float& f : buffer) f = std::isfinite(f) ? std::copysign(0.0f, f) : f;
        }
        const std::span<const float> x(buffer.data() + offset, n);
        std::vector<float> want_min(rows * per_row), want_max(want_min.size());
        std::vector<float> got_min(want_min.size(), -7), got_max(want_min.size(), -7);
        BlockMinMaxNonFiniteAsZeroRef(x, cols, block, want_min, want_max);
        BlockMinMaxNonFiniteAsZero(x, cols, block, got_min, got_max);
        ExpectSameBits(want_min, got_min);
        ExpectSameBits(want_max, got_max);
        if (::testing::Test::HasFailure()) FAIL() << "block " << block << " cols " << cols;
      }
    }
  });
}

TEST(BlocksSimd, GgmlFp4MatchesRef) {
  std::mt19937 rng(9);
  // Half scales as MXFP4 (2^(e - 128), the two denormal ones included) and
  // NVFP4 (ue4m3 / 2, 0 included) make them.
  const float kScales[] = {0.5f, 0x1p-128f, 0x1p-127f, 0x1p127f, 0x1p-20f, 0,
                           0.00390625f * 0.5f, 448 * 0.5f, 1.125f * 0.5f, 0x1p-10f * 0.5f};
  const float kMagnitudes[] = {0, 1, 2, 3, 4, 6, 8, 12};
  std::uniform_int_distribution<int> pick(0, std::size(kScales) - 1), level(0, 7);
  std::uniform_int_distribution<int> ulps(-2, 2);
  ForEachTarget([&] {
    for (int64_t block = 1; block <= 70; block += 3) {
      for (const int64_t cols : {block, 2 * block + 3, int64_t{131}, 20 * block}) {
        const int64_t rows = 1 + block % 3, per_row = (cols + block - 1) / block;
        const size_t n = static_cast<size_t>(rows * cols), offset = block % 4;
        std::vector<float> buffer = RandomValues(rng, n + offset, block % 2 ? 0.1 : 0.5);
        std::vector<float> e(rows * per_row);
        for (float& f : e) f = kScales[pick(rng)];
        // Every third element near a midpoint of two codes (or on a code),
        // a few ulps off, in its own block's scale.
        for (int64_t i = 0; i < rows * cols; i += 3) {
          const int64_t g = (i / cols) * per_row + (i % cols) / block;
          const int j = level(rng), k = std::min(j + 1, 7);
          float v = (kMagnitudes[j] + kMagnitudes[k]) / 2 * e[g];
          v = std::bit_cast<float>(std::bit_cast<int32_t>(v) + (v > 0 ? ulps(rng) : 0));
          buffer[offset + i] = i % 2 ? -v : v;
        }
        const std::span<const float> x(buffer.data() + offset, n);
        std::vector<float> want(n), got(n, -7);
        EXPECT_EQ(QuantizeGgmlFp4BlocksRef(x, cols, block, e, want),
                  QuantizeGgmlFp4Blocks(x, cols, block, e, got));
        ExpectSameBits(want, got);
        if (::testing::Test::HasFailure()) FAIL() << "block " << block << " cols " << cols;
      }
    }
  });
}

}  // namespace
}  // namespace lowp::testing
