// The Walsh-Hadamard rotation (kernels/hadamard.h) against a transcription
// of llama.cpp's ggml_gen_hadamard (PR #21038), its orthonormality, and the
// block sizes llama.cpp's KV cache rotation picks (model/forward.h).
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/hadamard.h"
#include "model/forward.h"

namespace lowp {
namespace {

// llama.cpp's construction, transcribed: data[0] = 1/sqrt(n); for s = 1, 2,
// 4, ... < n, the s x s block is copied right, copied down, and negated at
// the bottom right.
std::vector<double> GenHadamard(int64_t n) {
  std::vector<double> h(static_cast<size_t>(n * n), 0.0);
  h[0] = 1.0 / std::sqrt(static_cast<double>(n));
  for (int64_t s = 1; s < n; s *= 2) {
    for (int64_t i = 0; i < s; ++i) {
      for (int64_t j = 0; j < s; ++j) {
        const double v = h[i * n + j];
        h[i * n + j + s] = v;
        h[(i + s) * n + j] = v;
        h[(i + s) * n + j + s] = -v;
      }
    }
  }
  return h;
}

std::vector<float> Random(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

TEST(Hadamard, EqualsLlamaCppsMatrixBlockByBlock) {
  for (int64_t n : {1, 2, 4, 8, 16, 32, 64, 128, 256}) {
    SCOPED_TRACE(n);
    const std::vector<double> h = GenHadamard(n);
    // Sylvester's ordering: entry (i, j) is (-1)^popcount(i & j) / sqrt(n).
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const double want = (__builtin_popcountll(static_cast<uint64_t>(i & j)) % 2 ? -1 : 1) /
                            std::sqrt(static_cast<double>(n));
        ASSERT_EQ(h[i * n + j], want) << i << ", " << j;
      }
    }
    const int64_t blocks = 3;
    const std::vector<float> x = Random(static_cast<size_t>(blocks * n), 7);
    std::vector<float> y = x;
    HadamardBlocks(y, n);
    double sum_abs = 0;
    for (float v : x) sum_abs += std::fabs(v);
    for (int64_t b = 0; b < blocks; ++b) {
      for (int64_t i = 0; i < n; ++i) {
        double exact = 0, block_abs = 0;
        for (int64_t j = 0; j < n; ++j) {
          exact += h[i * n + j] * x[b * n + j];
          block_abs += std::fabs(x[b * n + j]);
        }
        // The bound kernels/hadamard.h states.
        const double bound =
            (std::log2(static_cast<double>(n)) + 2) * std::ldexp(1.0, -24) * block_abs /
            std::sqrt(static_cast<double>(n));
        EXPECT_LE(std::fabs(y[b * n + i] - exact), bound * 1.01 + 1e-30) << b << ", " << i;
        EXPECT_NEAR(y[b * n + i], exact, 1e-6 * std::max(1.0, sum_abs / std::sqrt(n)));
      }
    }
  }
}

TEST(Hadamard, OrthonormalAndItsOwnInverse) {
  for (int64_t n : {2, 8, 64, 128}) {
    const std::vector<float> x = Random(static_cast<size_t>(4 * n), 11);
    std::vector<float> y = x;
    HadamardBlocks(y, n);
    double norm_x = 0, norm_y = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      norm_x += double{x[i]} * x[i];
      norm_y += double{y[i]} * y[i];
    }
    EXPECT_NEAR(norm_y, norm_x, 1e-6 * norm_x) << n;
    HadamardBlocks(y, n);  // H H = I
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(y[i], x[i], 1e-6) << n << ": " << i;
  }
}

TEST(Hadamard, DotProductsSurviveTheRotation) {
  // (H q) . (H k) = q . k: what keeps attention's scores in llama.cpp.
  const int64_t n = 64;
  std::vector<float> q = Random(n, 1), k = Random(n, 2);
  double before = 0;
  for (int64_t i = 0; i < n; ++i) before += double{q[i]} * k[i];
  HadamardBlocks(q, n);
  HadamardBlocks(k, n);
  double after = 0;
  for (int64_t i = 0; i < n; ++i) after += double{q[i]} * k[i];
  EXPECT_NEAR(after, before, 1e-5);
}

TEST(KvRotation, LlamaCppsBlockSizes) {
  // llama-kv-cache.cpp: rotated only when the head size is a multiple of 64;
  // K by the largest power of two dividing it, V by 64.
  const KvRotation llama{KvRotation::kLlamaCpp, 0};
  const struct {
    int64_t head_dim, k, v;
  } cases[] = {{64, 64, 64},  {128, 128, 64}, {256, 256, 64}, {192, 64, 64},
               {576, 64, 64}, {32, 0, 0},     {80, 0, 0},     {8, 0, 0}};
  for (const auto& c : cases) {
    absl::StatusOr<std::pair<int64_t, int64_t>> b = KvRotationBlocks(llama, c.head_dim);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->first, c.k) << c.head_dim;
    EXPECT_EQ(b->second, c.v) << c.head_dim;
  }
  EXPECT_EQ(*KvRotationBlocks({KvRotation::kBlocks, 16}, 32), (std::pair<int64_t, int64_t>{16, 16}));
  EXPECT_FALSE(KvRotationBlocks({KvRotation::kBlocks, 64}, 32).ok());
  EXPECT_FALSE(KvRotationBlocks({KvRotation::kBlocks, 12}, 48).ok());
  EXPECT_EQ(*KvRotationBlocks({}, 128), (std::pair<int64_t, int64_t>{0, 0}));
  EXPECT_EQ(LargestPowerOfTwoDividing(576), 64);
  EXPECT_TRUE(IsPowerOfTwo(1));
  EXPECT_FALSE(IsPowerOfTwo(0));
  EXPECT_FALSE(IsPowerOfTwo(96));
}

}  // namespace
}  // namespace lowp
