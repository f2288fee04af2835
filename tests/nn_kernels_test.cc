// The forward pass's elementwise kernels (kernels/nn.h) on every Highway
// target this CPU runs: each equal bit for bit to its scalar reference, and
// ExpF32 to std::exp; the reordered double sums within their stated bound of
// the running sums the forward pass used before.
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/nn.h"
#include "tests/simd_targets.h"

namespace lowp {
namespace {

using testing::ExpectSameBits;
using testing::ForEachTarget;

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Activation-like values: N(0, scale^2) with a few outliers, specials at
// `with_specials`.
std::vector<float> Values(size_t n, float scale, uint32_t seed, bool with_specials = false) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  for (size_t i = 7; i < n; i += 53) v[i] *= 40;
  if (with_specials && n > 6) {
    v[1] = kInf;
    v[2] = -kInf;
    v[3] = kNaN;
    v[4] = 0.0f;
    v[5] = -0.0f;
    v[6] = std::numeric_limits<float>::denorm_min();
  }
  return v;
}

// Bit for bit but that any NaN equals any NaN: which NaN a product of two
// NaNs keeps depends on the compiler's operand order (it treats * as
// commutative), in the reference and in the forward pass alike.
void ExpectSameBitsOrBothNaN(const std::vector<float>& want, const std::vector<float>& got) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(want[i]) && std::isnan(got[i])) continue;
    ASSERT_EQ(std::bit_cast<uint32_t>(want[i]), std::bit_cast<uint32_t>(got[i]))
        << "at " << i << ": " << want[i] << " vs " << got[i];
  }
}

// Every length from 0 to a few vectors of the widest target, and a row.
std::vector<size_t> Lengths() {
  std::vector<size_t> n;
  for (size_t i = 0; i <= 70; ++i) n.push_back(i);
  for (size_t i : {127, 128, 129, 255, 256, 1000}) n.push_back(i);
  return n;
}

TEST(ExpF32, EqualsStdExpOnSpreadInputsAndEverySpecialCase) {
  // Every 997th float32 bit pattern (all exponents, both signs, NaNs) and the
  // thresholds of glibc's special cases with their neighbours.
  std::vector<float> x;
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 997) x.push_back(std::bit_cast<float>(uint32_t(b)));
  for (float t : {88.0f, 0x1.62e42ep6f, -0x1.9fe368p6f, -0x1.9d1d9ep6f, -87.33655f, -88.0f,
                  0.0f, -0.0f, kInf, -kInf, kNaN, -kNaN}) {
    x.push_back(t);
    x.push_back(std::nextafter(t, kInf));
    x.push_back(std::nextafter(t, -kInf));
  }
  std::vector<float> want(x.size());
  ExpF32Ref(x, want);
  ForEachTarget([&] {
    std::vector<float> got(x.size());
    ExpF32(x, got);
    ExpectSameBits(want, got);
  });
}

TEST(ExpF32, TableIsTwoToTheIOver32) {
  const uint64_t* t = kernels::ExpF32Table();
  for (uint64_t i = 0; i < 32; ++i) {
    const double v = std::bit_cast<double>(t[i] + (i << 47));
    EXPECT_NEAR(v, std::exp2(i / 32.0), 0x1p-52) << i;
  }
}

TEST(NnKernels, SoftmaxEqualsItsReference) {
  for (size_t n : Lengths()) {
    for (bool specials : {false, true}) {
      std::vector<float> want = Values(n, 3.0f, static_cast<uint32_t>(n), specials);
      std::vector<float> x = want;
      SoftmaxRef(want);
      ForEachTarget([&] {
        std::vector<float> got = x;
        Softmax(got);
        ExpectSameBitsOrBothNaN(want, got);
      });
    }
  }
}

TEST(NnKernels, SoftmaxWithinItsBoundOfARunningSum) {
  // The sum in 8 partial sums against one running double sum (what the
  // forward pass did before): 1/sum within one float32 ulp, so every
  // probability within one ulp of the product by the other 1/sum.
  for (size_t n : {3, 64, 256, 4096}) {
    for (uint32_t seed = 0; seed < 50; ++seed) {
      std::vector<float> x = Values(n, 4.0f, seed);
      std::vector<float> got = x;
      Softmax(got);
      float max = -kInf;
      for (float v : x) max = std::max(max, v);
      double sum = 0;
      for (float& v : x) sum += v = std::exp(v - max);
      const float inv = static_cast<float>(1.0 / sum);
      for (size_t i = 0; i < n; ++i) {
        const float old = x[i] * inv;
        ASSERT_LE(std::fabs(got[i] - old), std::fabs(std::nextafter(old, kInf) - old) * 1.01f)
            << n << " " << seed << " " << i;
      }
    }
  }
}

TEST(NnKernels, RmsNormEqualsItsReference) {
  for (size_t width : Lengths()) {
    if (width == 0) continue;
    const int64_t rows = 3;
    std::vector<float> in = Values(rows * width, 1.5f, static_cast<uint32_t>(width), width > 40);
    std::vector<float> weight = Values(width, 1.0f, 99);
    for (bool adds_one : {false, true}) {
      std::vector<float> want(in.size());
      RmsNormRef(in.data(), want.data(), rows, static_cast<int64_t>(width), weight.data(),
                 adds_one, 1e-5);
      ForEachTarget([&] {
        std::vector<float> got = in;  // in place, as the forward pass calls it
        RmsNorm(got.data(), got.data(), rows, static_cast<int64_t>(width), weight.data(), adds_one,
                1e-5);
        ExpectSameBits(want, got);
      });
    }
  }
}

TEST(NnKernels, RmsNormWithinItsBoundOfARunningSum) {
  for (int64_t width : {64, 256, 2048}) {
    std::vector<float> x = Values(static_cast<size_t>(width) * 200, 2.0f, 5);
    std::vector<float> w(static_cast<size_t>(width), 1.0f), got(x.size());
    RmsNorm(x.data(), got.data(), 200, width, w.data(), false, 1e-6);
    for (int64_t r = 0; r < 200; ++r) {
      double ss = 0;
      for (int64_t j = 0; j < width; ++j) ss += static_cast<double>(x[r * width + j]) * x[r * width + j];
      const float scale = static_cast<float>(1.0 / std::sqrt(ss / width + 1e-6));
      for (int64_t j = 0; j < width; ++j) {
        const float old = x[r * width + j] * scale;
        const float g = got[r * width + j];
        ASSERT_LE(std::fabs(g - old), std::fabs(std::nextafter(old, kInf) - old) * 1.01f);
      }
    }
  }
}

TEST(NnKernels, RopeEqualsItsReference) {
  for (int64_t dim : {2, 8, 16, 32, 64, 80, 128, 256}) {
    const int64_t heads = 3;
    std::vector<float> x = Values(static_cast<size_t>(heads * dim), 1.0f, 3, dim > 8);
    std::vector<float> cos = Values(static_cast<size_t>(dim / 2), 0.7f, 4);
    std::vector<float> sin = Values(static_cast<size_t>(dim / 2), 0.7f, 5);
    std::vector<float> want = x;
    RopeRef(want.data(), heads, dim, cos.data(), sin.data());
    ForEachTarget([&] {
      std::vector<float> got = x;
      Rope(got.data(), heads, dim, cos.data(), sin.data());
      ExpectSameBits(want, got);
    });
  }
}

TEST(NnKernels, SiluAddMultiplyCountEqualTheirReferences) {
  for (size_t n : Lengths()) {
    const std::vector<float> x = Values(n, 6.0f, static_cast<uint32_t>(n), true);
    const std::vector<float> y = Values(n, 1.0f, static_cast<uint32_t>(n + 1000), n > 20);
    std::vector<float> silu = x, sum = x, product = x;
    SiluRef(silu);
    AddToRef(sum, y);
    MultiplyByRef(product, y);
    const uint64_t nonfinite = CountNonfiniteRef(x);
    ForEachTarget([&] {
      std::vector<float> got = x;
      Silu(got);
      ExpectSameBits(silu, got);
      got = x;
      AddTo(got, y);
      ExpectSameBits(sum, got);
      got = x;
      MultiplyBy(got, y);
      ExpectSameBits(product, got);
      EXPECT_EQ(CountNonfinite(x), nonfinite);
    });
  }
}

}  // namespace
}  // namespace lowp
