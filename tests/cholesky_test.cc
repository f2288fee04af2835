// CholeskyLower (calib/cholesky.h) against the definition: L lower with
// L L^T = A to rounding, on sizes that are and are not whole panels; the
// same bits on one thread and on three; refusal of what is not positive
// definite.
#include "calib/cholesky.h"

#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace lowp {
namespace {

// A = X^T X / rows + I for a random X: symmetric positive definite, full.
std::vector<double> Spd(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal;
  const int64_t rows = n + 8;
  std::vector<double> x(static_cast<size_t>(rows * n));
  for (double& v : x) v = normal(rng);
  std::vector<double> a(static_cast<size_t>(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j <= i; ++j) {
      double s = 0;
      for (int64_t r = 0; r < rows; ++r) s += x[r * n + i] * x[r * n + j];
      a[i * n + j] = a[j * n + i] = s / static_cast<double>(rows) + (i == j ? 1.0 : 0.0);
    }
  }
  return a;
}

TEST(CholeskyLower, ReproducesTheMatrixOnAnySizeAndThreadCount) {
  for (int64_t n : {int64_t{1}, int64_t{100}, int64_t{256}, int64_t{600}}) {
    const std::vector<double> a = Spd(n, static_cast<uint32_t>(n));
    std::vector<double> one = a, three = a;
    ASSERT_TRUE(CholeskyLower(one, n, 1).ok());
    ASSERT_TRUE(CholeskyLower(three, n, 3).ok());
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j <= i; ++j) {
        ASSERT_EQ(one[i * n + j], three[i * n + j]) << n << ": " << i << "," << j;
        double s = 0;
        for (int64_t k = 0; k <= j; ++k) s += one[i * n + k] * one[j * n + k];
        worst = std::max(worst, std::fabs(s - a[i * n + j]));
      }
      ASSERT_GT(one[i * n + i], 0) << n;
    }
    EXPECT_LT(worst, 1e-12) << n;
  }
}

TEST(CholeskyLower, RefusesWhatIsNotPositiveDefinite) {
  const int64_t n = 300;
  std::vector<double> a = Spd(n, 3);
  a[280 * n + 280] = -1;  // in the second panel
  const absl::Status s = CholeskyLower(a, n, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("not positive definite"), std::string::npos) << s;
}

}  // namespace
}  // namespace lowp
