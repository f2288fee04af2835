// ":rotate=hadamard[N]" on any scheme (quant/rotated_scheme.cc): names and
// refusals, the block a row is rotated in, the value Q(r H) H against a
// dense double Hadamard matrix, products of rotated weights and activations
// against the deployment's Q_a(x H) Q(W H)^T, and what a rotation buys on a
// row with an outlier.
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "kernels/hadamard.h"
#include "quant/scheme.h"
#include "tests/scheme_run.h"

namespace lowp {
namespace {

using ::testing::HasSubstr;
using testing::Make;
using testing::RunScheme;

std::vector<float> Normal(size_t n, uint32_t seed, float sigma = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, sigma);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

// H_n[i][j] = (-1)^popcount(i & j) / sqrt(n), in double: the matrix without
// the fast transform.
double DenseHadamard(int64_t n, int64_t i, int64_t j) {
  return (__builtin_popcountll(static_cast<uint64_t>(i & j)) % 2 ? -1.0 : 1.0) /
         std::sqrt(static_cast<double>(n));
}

// Rows of `x` ([rows, cols]) times H in blocks of n, in double.
std::vector<double> RotateDense(const std::vector<float>& x, int64_t cols, int64_t n) {
  std::vector<double> out(x.size(), 0.0);
  for (size_t base = 0; base < x.size(); base += static_cast<size_t>(n)) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t i = 0; i < n; ++i) sum += x[base + i] * DenseHadamard(n, i, j);
      out[base + j] = sum;
    }
  }
  (void)cols;
  return out;
}

TEST(RotatedScheme, NamesAndOptions) {
  EXPECT_EQ(Make("int4-g128:rotate=hadamard")->name(), "int4-g128:rotate=hadamard");
  EXPECT_EQ(Make("mxfp4:rotate=hadamard32")->name(), "mxfp4:rotate=hadamard32");
  // The rotation comes after the scheme's own options, wherever it was given.
  EXPECT_EQ(Make("int4-g128:rotate=hadamard64:scale=bf16")->name(),
            "int4-g128:scale=bf16:rotate=hadamard64");
  for (const char* bad :
       {"int4-g128:rotate", "int4-g128:rotate=", "int4-g128:rotate=hadamard3",
        "int4-g128:rotate=hadamard1", "int4-g128:rotate=hadamard131072", "int4-g128:rotate=walsh",
        "int4-g128:rotate=hadamard:rotate=hadamard", "Q4_K_M:rotate=hadamard",
        "iq2_xxs:rotate=hadamard", "nope:rotate=hadamard"}) {
    absl::StatusOr<std::unique_ptr<Scheme>> s = ParseScheme(bad);
    EXPECT_FALSE(s.ok()) << bad;
  }
  absl::StatusOr<std::unique_ptr<Scheme>> s = ParseScheme("int4-g128:rotate=hadamard3");
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("power of two"));
  s = ParseScheme("Q4_K_M:rotate=hadamard");
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("recipe"));
  s = ParseScheme("iq2_xxs:rotate=hadamard");
  EXPECT_THAT(std::string(s.status().message()), HasSubstr("importance"));
}

TEST(RotatedScheme, StorageIsTheSchemesAndTheReportNamesTheBlockUsed) {
  const auto plain = Make("q4_0"), whole = Make("q4_0:rotate=hadamard"),
             blocks = Make("q4_0:rotate=hadamard128");
  EXPECT_EQ(whole->StorageBits(7, 4096), plain->StorageBits(7, 4096));
  EXPECT_EQ(blocks->StorageBits(3, 768), plain->StorageBits(3, 768));
  EXPECT_EQ(whole->AppliedName(4096), whole->name());
  EXPECT_EQ(whole->AppliedName(768), "q4_0:rotate=hadamard256");  // 768 = 3 x 256
  EXPECT_EQ(blocks->AppliedName(768), blocks->name());
  EXPECT_EQ(blocks->AppliedName(96), "q4_0:rotate=hadamard32");
  EXPECT_EQ(Make("int8-channel:rotate=hadamard")->AppliedName(7), "int8-channel");
  // llama.cpp's fallback stays visible under the rotation.
  EXPECT_EQ(Make("q4_K:rotate=hadamard")->AppliedName(96), "q5_0:rotate=hadamard32");
}

TEST(RotatedScheme, ValueIsTheRotatedRowsQuantizationRotatedBack) {
  // An fp32 cast quantizes nothing: the value is r H H = r up to the
  // transform's rounding. A format that rounds: Q(r H) H, with Q the
  // scheme's own output on the rotated row and H the dense matrix in double.
  const int64_t cols = 256, rows = 6;
  const std::vector<float> x = Normal(static_cast<size_t>(rows * cols), 1);
  const auto identity = RunScheme(*Make("fp32:rotate=hadamard"), x, cols);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(identity.out[i], x[i], 1e-6) << i;

  for (const char* name : {"int4-g32", "mxfp4", "fp8_e4m3fn-channel", "nvfp4"}) {
    for (int64_t n : {int64_t{32}, cols}) {
      const std::vector<double> dense = RotateDense(x, cols, n);
      std::vector<float> rotated(dense.begin(), dense.end());
      const auto inner = RunScheme(*Make(name), rotated, cols);
      const std::vector<double> expected = RotateDense(inner.out, cols, n);
      const std::string full =
          std::string(name) + ":rotate=hadamard" + (n == cols ? "" : std::to_string(n));
      const auto r = RunScheme(*Make(full), x, cols);
      // The fast transform's rotated row differs from the dense one in the
      // last bits, which can move a value across a rounding boundary: count
      // such elements, and bound every other's difference by the rounding.
      int moved = 0;
      for (size_t i = 0; i < x.size(); ++i) {
        if (std::fabs(r.out[i] - expected[i]) > 1e-5 * (1 + std::fabs(expected[i]))) ++moved;
      }
      EXPECT_LE(moved, static_cast<int>(x.size() / 50)) << full;
    }
  }
}

TEST(RotatedScheme, RotatedWeightsAndActivationsGiveTheDeploymentsProducts) {
  // y = x W^T with both rotated: the emulated values (original basis)
  // multiplied as the model multiplies them equal Q_a(x H) Q(W H)^T, the
  // product a rotated deployment computes, to float32 rounding.
  const int64_t in = 512, out = 24, tokens = 8;
  const std::vector<float> w = Normal(static_cast<size_t>(out * in), 2, 0.02f);
  const std::vector<float> x = Normal(static_cast<size_t>(tokens * in), 3);
  for (const auto& [ws, as] : {std::pair{"int4-g128", "int8-channel"}, std::pair{"mxfp4", "mxfp8"},
                               std::pair{"fp32", "fp32"}}) {
    for (const char* rotation : {":rotate=hadamard", ":rotate=hadamard64"}) {
      const auto we = RunScheme(*Make(std::string(ws) + rotation), w, in);
      const auto xe = RunScheme(*Make(std::string(as) + rotation), x, in);
      const int64_t n = std::string(rotation) == ":rotate=hadamard" ? in : 64;
      std::vector<float> wr = w, xr = x;
      HadamardBlocks(wr, n);
      HadamardBlocks(xr, n);
      const auto wq = RunScheme(*Make(ws), wr, in), xq = RunScheme(*Make(as), xr, in);
      for (int64_t t = 0; t < tokens; ++t) {
        for (int64_t o = 0; o < out; ++o) {
          double emulated = 0, deployed = 0, scale = 0;
          for (int64_t i = 0; i < in; ++i) {
            emulated += double{xe.out[t * in + i]} * we.out[o * in + i];
            deployed += double{xq.out[t * in + i]} * wq.out[o * in + i];
            scale += std::fabs(double{xq.out[t * in + i]} * wq.out[o * in + i]);
          }
          EXPECT_NEAR(emulated, deployed, 1e-5 * scale) << ws << rotation << " " << t << "," << o;
        }
      }
      // Without quantization the rotation changes no product.
      if (std::string(ws) == "fp32") {
        for (int64_t t = 0; t < tokens; ++t) {
          for (int64_t o = 0; o < out; ++o) {
            double plain = 0, emulated = 0, scale = 0;
            for (int64_t i = 0; i < in; ++i) {
              plain += double{x[t * in + i]} * w[o * in + i];
              emulated += double{xe.out[t * in + i]} * we.out[o * in + i];
              scale += std::fabs(double{x[t * in + i]} * w[o * in + i]);
            }
            EXPECT_NEAR(emulated, plain, 1e-5 * scale);
          }
        }
      }
    }
  }
}

TEST(RotatedScheme, SpreadsAnOutlierSoFourBitsKeepTheRest) {
  // One row of N(0, 1) with an outlier of 100: int4-g128 spends its scale
  // on the outlier and flushes most of its group to zero; rotated, the
  // outlier spreads over the row (100 / sqrt(128) per element) and the
  // error falls several times.
  const int64_t cols = 128;
  std::vector<float> x = Normal(cols, 4);
  x[17] = 100.0f;
  auto mse = [&](const std::vector<float>& y) {
    double s = 0;
    for (int64_t i = 0; i < cols; ++i) s += (y[i] - x[i]) * double{y[i] - x[i]};
    return s / cols;
  };
  const double plain = mse(RunScheme(*Make("int4-g128"), x, cols).out);
  const double rotated = mse(RunScheme(*Make("int4-g128:rotate=hadamard"), x, cols).out);
  EXPECT_LT(rotated * 3, plain) << plain << " " << rotated;
}

TEST(RotatedScheme, ANonFiniteValueSpreadsToItsBlockOnly) {
  const int64_t cols = 64;
  std::vector<float> x = Normal(static_cast<size_t>(2 * cols), 5);
  x[3] = std::numeric_limits<float>::quiet_NaN();
  const auto r = RunScheme(*Make("int8-channel:rotate=hadamard16"), x, cols);
  for (int64_t i = 0; i < 2 * cols; ++i) {
    EXPECT_EQ(std::isnan(r.out[i]), i < 16) << i;
  }
}

TEST(RotatedScheme, TensorPassSeesTheRotatedRows) {
  // fp8_e4m3fn-tensor's one scale comes from the rotated tensor's absmax:
  // an outlier of 448 * 16 spread over 256 values leaves max |x H| near
  // 448 * 16 / 16 = 448 plus the rest.
  const int64_t cols = 256;
  std::vector<float> x(cols, 0.0f);
  x[0] = 448.0f * 16;
  const auto r = RunScheme(*Make("fp8_e4m3fn-tensor:rotate=hadamard"), x, cols);
  EXPECT_FLOAT_EQ(r.context.absmax, 448.0f);
  for (int64_t i = 0; i < cols; ++i) EXPECT_NEAR(r.out[i], x[i], 1e-3) << i;
  EXPECT_EQ(r.counts.clipped, 0u);
}

}  // namespace
}  // namespace lowp
