// GPTQ's pieces (calib/): the Hessian's sums, the column loop against a
// plain transcription of the paper's algorithm, ggml's blocks chosen on the
// updated weights decoding to the values GPTQ gives, and its refusals.
// (python/tests/test_gptq.py checks it against a NumPy GPTQ.)
#include "calib/gptq.h"
#include "calib/smooth.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "calib/awq.h"
#include "calib/hessian.h"
#include "codecs/ggml.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "quant/scheme.h"

namespace lowp {
namespace {

using ::testing::HasSubstr;

// Correlated inputs: x = z A with A a random mixing matrix, so that H is far
// from diagonal (where GPTQ and rounding to nearest differ most).
std::vector<float> Inputs(int64_t rows, int64_t dim, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> mix(static_cast<size_t>(dim * dim));
  for (float& v : mix) v = normal(rng) / std::sqrt(static_cast<float>(dim));
  std::vector<float> x(static_cast<size_t>(rows * dim), 0.0f), z(static_cast<size_t>(dim));
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : z) v = normal(rng);
    for (int64_t j = 0; j < dim; ++j) {
      float s = 0;
      for (int64_t k = 0; k < dim; ++k) s += z[k] * mix[static_cast<size_t>(k * dim + j)];
      x[static_cast<size_t>(r * dim + j)] = s * (1.0f + 0.1f * static_cast<float>(j % 7));
    }
  }
  return x;
}

std::vector<float> Weights(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  std::vector<float> w(static_cast<size_t>(rows * cols));
  for (float& v : w) v = normal(rng);
  return w;
}

// tr(D H D^T) / count for D = a - b: the mean squared change of the layer's
// output over the calibration rows.
double OutputError(const std::vector<float>& a, const std::vector<float>& b, int64_t rows,
                   const Hessian& h) {
  const int64_t n = h.dim();
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t i = 0; i < n; ++i) {
      const double di = static_cast<double>(a[r * n + i]) - b[r * n + i];
      for (int64_t j = 0; j < n; ++j) {
        const double dj = static_cast<double>(a[r * n + j]) - b[r * n + j];
        total += di * dj * h.at(std::min(i, j), std::max(i, j));
      }
    }
  }
  return total / static_cast<double>(h.count());
}

// The tensor's context for `s` (its absmax when the scheme scales by it).
TensorContext ContextOf(const std::vector<float>& w, int64_t cols, const Scheme& s) {
  TensorContext context;
  if (s.NeedsTensorPass()) s.Observe(w, cols, context);
  return context;
}

std::vector<float> RoundToNearest(const std::vector<float>& w, int64_t cols, const Scheme& s) {
  std::vector<float> out(w.size());
  SchemeCounts counts;
  s.Apply(w, cols, ContextOf(w, cols, s), out, counts);
  return out;
}

TEST(Hessian, SumsAreExactAndDoNotDependOnThreadsOrBlocks) {
  // Values k/8: every product and partial sum is exact in double, so H must
  // equal the plain sums exactly.
  const int64_t dim = 150, n = 37;
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> k(-100, 100);
  std::vector<float> x(static_cast<size_t>(n * dim));
  for (float& v : x) v = static_cast<float>(k(rng)) / 8.0f;
  Hessian h(dim);
  h.Add(std::span<const float>(x).first(20 * dim), 1);
  h.Add(std::span<const float>(x).subspan(20 * dim), 2);
  ASSERT_EQ(h.count(), n);
  for (int64_t i = 0; i < dim; ++i) {
    for (int64_t j = i; j < dim; ++j) {
      double s = 0;
      for (int64_t r = 0; r < n; ++r) s += static_cast<double>(x[r * dim + i]) * x[r * dim + j];
      ASSERT_EQ(h.at(i, j), s) << i << "," << j;
    }
  }
  // Real-valued inputs: one thread and two give the same bits.
  const std::vector<float> y = Inputs(64, dim, 5);
  Hessian one(dim), two(dim);
  one.Add(y, 1);
  two.Add(y, 2);
  for (int64_t i = 0; i < dim; ++i) {
    for (int64_t j = i; j < dim; ++j) ASSERT_EQ(one.at(i, j), two.at(i, j));
  }
}

// The paper's Algorithm 1 as written (no lazy batches, float64), for a
// symmetric int scheme with groups: a group's scale from its columns as they
// stand when the loop reaches it. Returns the quantized weight.
std::vector<float> PaperGptq(std::vector<double> w, int64_t rows, int64_t n, const Hessian& hs,
                             double damp, const Scheme& scheme, int64_t group) {
  std::vector<double> h(static_cast<size_t>(n * n));
  double mean = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) h[i * n + j] = hs.at(std::min(i, j), std::max(i, j));
    mean += h[i * n + i] / static_cast<double>(n);
  }
  for (int64_t i = 0; i < n; ++i) h[i * n + i] += damp * mean;
  // H^-1 by Gauss-Jordan, then its upper Cholesky factor U (H^-1 = U^T U).
  std::vector<double> inv(static_cast<size_t>(n * n), 0.0), a = h;
  for (int64_t i = 0; i < n; ++i) inv[i * n + i] = 1;
  for (int64_t c = 0; c < n; ++c) {
    const double p = a[c * n + c];
    for (int64_t j = 0; j < n; ++j) a[c * n + j] /= p, inv[c * n + j] /= p;
    for (int64_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r * n + c];
      for (int64_t j = 0; j < n; ++j)
        a[r * n + j] -= f * a[c * n + j], inv[r * n + j] -= f * inv[c * n + j];
    }
  }
  std::vector<double> u(static_cast<size_t>(n * n), 0.0);  // U^T U = inv: U_ii = sqrt(...)
  for (int64_t i = 0; i < n; ++i) {
    double s = inv[i * n + i];
    for (int64_t k = 0; k < i; ++k) s -= u[k * n + i] * u[k * n + i];
    u[i * n + i] = std::sqrt(s);
    for (int64_t j = i + 1; j < n; ++j) {
      double t = inv[i * n + j];
      for (int64_t k = 0; k < i; ++k) t -= u[k * n + i] * u[k * n + j];
      u[i * n + j] = t / u[i * n + i];
    }
  }
  std::vector<float> q(static_cast<size_t>(rows * n)), block, out;
  for (int64_t i = 0; i < n; ++i) {
    // Quantize column i with its group's scale, chosen from the group's
    // current columns: the scheme's Apply on them gives exactly the values
    // its codes take, and column i's value is where it puts column i.
    if (i % group == 0) {
      const int64_t width = std::min(group, n - i);
      block.assign(static_cast<size_t>(rows * width), 0.0f);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t c = 0; c < width; ++c)
          block[r * width + c] = static_cast<float>(w[r * n + i + c]);
      }
    }
    const int64_t g0 = i / group * group, width = std::min(group, n - g0);
    // The group's scale is fixed by `block` (the columns at the group's
    // start); replace column i's entry with its current value and round.
    std::vector<float> probe = block;
    for (int64_t r = 0; r < rows; ++r)
      probe[r * width + (i - g0)] = static_cast<float>(w[r * n + i]);
    out.resize(probe.size());
    (void)scheme;
    for (int64_t r = 0; r < rows; ++r) {
      // The symmetric int4 rule with the block's fp16 scale: amax / 7.
      float amax = 0;
      for (int64_t c = 0; c < width; ++c) amax = std::max(amax, std::fabs(block[r * width + c]));
      const float scale = ggml::Fp16ToFp32(ggml::Fp32ToFp16(amax / 7.0f));  // fp16, nearest-even
      const float x = probe[r * width + (i - g0)];
      const float code = scale == 0 ? 0 : std::clamp(std::nearbyint(x / scale), -7.0f, 7.0f);
      const float v = code * scale;
      q[r * n + i] = v;
      const double e = (w[r * n + i] - v) / u[i * n + i];
      for (int64_t j = i + 1; j < n; ++j) w[r * n + j] -= e * u[i * n + j];
    }
  }
  return q;
}

TEST(Gptq, EqualsThePapersAlgorithm) {
  const int64_t rows = 24, cols = 96, group = 32;
  const std::vector<float> x = Inputs(400, cols, 11);
  const std::vector<float> w = Weights(rows, cols, 12);
  Hessian h(cols);
  h.Add(x, 2);
  auto scheme = *ParseScheme("int4-g32");
  for (int64_t batch : {int64_t{1}, int64_t{32}, int64_t{128}}) {
    GptqOptions options;
    options.batch = batch;
    absl::StatusOr<GptqResult> got = Gptq("w", w, rows, cols, h, *scheme, {}, options);
    ASSERT_TRUE(got.ok()) << got.status();
    const std::vector<float> want =
        PaperGptq(std::vector<double>(w.begin(), w.end()), rows, cols, h, 0.01, *scheme, group);
    int differ = 0;
    for (size_t i = 0; i < want.size(); ++i) differ += got->values[i] != want[i];
    // Two orders of double sums may put a weight on the other side of a
    // rounding boundary; with these sizes none does.
    EXPECT_EQ(differ, 0) << "batch " << batch;
  }
}

TEST(Gptq, LowersTheOutputErrorOfRoundingToNearest) {
  const int64_t rows = 32, cols = 256;
  const std::vector<float> x = Inputs(600, cols, 21);
  const std::vector<float> w = Weights(rows, cols, 22);
  Hessian h(cols);
  h.Add(x, 2);
  for (const char* name : {"int4-g128", "int3-channel", "uint4-g64-asym", "q4_0", "q4_K", "q3_K",
                           "q6_K", "iq4_xs", "q5_1", "ggml-mxfp4", "fp8_e4m3fn-channel",
                           "fp4_e2m1fn-g32", "fp8_e5m2-b16x64", "fp6_e3m2fn-tensor", "mxfp4",
                           "mxint8", "nvfp4", "nf4"}) {
    auto scheme = *ParseScheme(name);
    absl::StatusOr<GptqResult> got =
        Gptq(name, w, rows, cols, h, *scheme, ContextOf(w, cols, *scheme), {});
    ASSERT_TRUE(got.ok()) << got.status();
    const double gptq = OutputError(w, got->values, rows, h);
    const double rtn = OutputError(w, RoundToNearest(w, cols, *scheme), rows, h);
    EXPECT_LT(gptq, 0.8 * rtn) << name << ": GPTQ " << gptq << ", nearest " << rtn;
  }
}

// With uncorrelated inputs (H diagonal) no column's error reaches another:
// GPTQ is rounding to nearest, and its values are the scheme's own, bit for
// bit, whatever the layout of the scales.
TEST(Gptq, WithADiagonalHessianItIsTheSchemesRounding) {
  const int64_t rows = 32, cols = 128;
  std::vector<float> x(static_cast<size_t>(cols * cols), 0.0f);
  for (int64_t i = 0; i < cols; ++i) x[static_cast<size_t>(i * cols + i)] = 1.0f + 0.01f * i;
  Hessian h(cols);
  h.Add(x, 2);
  const std::vector<float> w = Weights(rows, cols, 41);
  for (const char* name : {"int4-g32", "fp8_e4m3fn-channel", "fp8_e4m3fn-tensor",
                           "fp4_e2m1fn-g32", "fp8_e5m2-b16x64", "fp8_e4m3fn-g64:scale=ue8m0",
                           "mxfp4", "mxfp8", "mxfp6_e3m2", "mxint8", "mxfp4:scale=round-up",
                           "nvfp4", "nf4"}) {
    auto scheme = *ParseScheme(name);
    const TensorContext context = ContextOf(w, cols, *scheme);
    absl::StatusOr<GptqResult> got = Gptq(name, w, rows, cols, h, *scheme, context, {});
    ASSERT_TRUE(got.ok()) << name << ": " << got.status();
    std::vector<float> want(w.size());
    SchemeCounts counts;
    scheme->Apply(w, cols, context, want, counts);
    for (size_t i = 0; i < w.size(); ++i) {
      ASSERT_EQ(got->values[i], want[i]) << name << " element " << i;
    }
  }
}

TEST(Gptq, GgmlBlocksDecodeToTheValuesGptqGives) {
  const int64_t rows = 8, cols = 512;
  const std::vector<float> x = Inputs(300, cols, 31);
  const std::vector<float> w = Weights(rows, cols, 32);
  Hessian h(cols);
  h.Add(x, 2);
  for (const char* name : {"q4_0", "q4_1", "q5_0", "q5_1", "q8_0", "q2_K", "q3_K", "q4_K", "q5_K",
                           "q6_K", "iq4_nl", "iq4_xs", "ggml-mxfp4", "ggml-nvfp4"}) {
    auto scheme = *ParseScheme(name);
    absl::StatusOr<GptqResult> got = Gptq(name, w, rows, cols, h, *scheme, {}, {});
    ASSERT_TRUE(got.ok()) << got.status();
    const ggml::TypeInfo* type =
        ggml::FindType(scheme->AppliedName(cols) == "ggml-mxfp4"   ? "mxfp4"
                       : scheme->AppliedName(cols) == "ggml-nvfp4" ? "nvfp4"
                                                                   : scheme->AppliedName(cols));
    ASSERT_NE(type, nullptr) << name;
    ASSERT_EQ(got->bytes.size(), static_cast<size_t>(rows * ggml::RowBytes(*type, cols))) << name;
    std::vector<float> decoded(w.size());
    ASSERT_TRUE(ggml::Decode(type->type, got->bytes, decoded).ok());
    for (size_t i = 0; i < decoded.size(); ++i) {
      ASSERT_EQ(decoded[i], got->values[i]) << name << " element " << i;
    }
  }
}

// GPTQ runs tiles of rows side by side: rows (and 2-D blocks of rows) are
// independent, so a matrix gives what its slices of rows give alone, and the
// thread count changes no bit.
TEST(Gptq, RowsAreIndependentAndThreadsChangeNoBit) {
  const int64_t rows = 640, cols = 256, slice = 128;
  const std::vector<float> x = Inputs(400, cols, 51);
  const std::vector<float> w = Weights(rows, cols, 52);
  Hessian h(cols);
  h.Add(x, 2);
  for (const char* name : {"q4_K", "int4-g32", "fp8_e4m3fn-b128x128", "nvfp4"}) {
    auto scheme = *ParseScheme(name);
    const TensorContext context = ContextOf(w, cols, *scheme);
    GptqOptions one, two;
    one.threads = 1;
    two.threads = 2;
    absl::StatusOr<GptqResult> a = Gptq(name, w, rows, cols, h, *scheme, context, one);
    absl::StatusOr<GptqResult> b = Gptq(name, w, rows, cols, h, *scheme, context, two);
    ASSERT_TRUE(a.ok() && b.ok()) << name;
    EXPECT_EQ(a->values, b->values) << name;
    EXPECT_EQ(a->bytes, b->bytes) << name;
    for (int64_t r0 = 0; r0 < rows; r0 += slice) {
      const std::vector<float> part(w.begin() + r0 * cols, w.begin() + (r0 + slice) * cols);
      absl::StatusOr<GptqResult> alone = Gptq(name, part, slice, cols, h, *scheme, context, two);
      ASSERT_TRUE(alone.ok()) << name;
      for (int64_t i = 0; i < slice * cols; ++i) {
        ASSERT_EQ(alone->values[i], a->values[r0 * cols + i]) << name << " row " << r0 + i / cols;
      }
      if (!a->bytes.empty()) {
        const size_t row_bytes = a->bytes.size() / rows;
        EXPECT_TRUE(std::equal(alone->bytes.begin(), alone->bytes.end(),
                               a->bytes.begin() + r0 * row_bytes))
            << name << " rows from " << r0;
      }
    }
  }
}

TEST(Gptq, ActOrderTakesColumnsByDescendingHessianDiagonal) {
  const int64_t rows = 16, cols = 64;
  const std::vector<float> x = Inputs(300, cols, 41);
  const std::vector<float> w = Weights(rows, cols, 42);
  Hessian h(cols);
  h.Add(x, 1);
  auto scheme = *ParseScheme("int4-g16");
  GptqOptions options;
  options.act_order = true;
  absl::StatusOr<GptqResult> got = Gptq("w", w, rows, cols, h, *scheme, {}, options);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->order.size(), static_cast<size_t>(cols));
  for (int64_t a = 1; a < cols; ++a) {
    EXPECT_GE(h.at(got->order[a - 1], got->order[a - 1]), h.at(got->order[a], got->order[a]));
  }
  const double ordered = OutputError(w, got->values, rows, h);
  const double rtn = OutputError(w, RoundToNearest(w, cols, *scheme), rows, h);
  EXPECT_LT(ordered, rtn);
}

// Inputs with a few channels 20 times the others' (the outliers AWQ is
// for): scaling those channels up before rounding protects them, and the
// search finds it; with no outliers it keeps s = 1 or near it.
TEST(Awq, ProtectsTheChannelsTheInputsMakeImportant) {
  const int64_t rows = 32, cols = 256, tokens = 400;
  std::vector<float> x = Inputs(tokens, cols, 51);
  for (int64_t r = 0; r < tokens; ++r) {
    for (int64_t j : {3, 77, 150, 201}) x[r * cols + j] *= 20.0f;
  }
  const std::vector<float> w = Weights(rows, cols, 52);
  Hessian h(cols);
  h.Add(x, 2);
  auto scheme = *ParseScheme("int4-g128");
  const AwqMatrix m{"w", w, rows, scheme.get()};
  absl::StatusOr<AwqScales> s = SearchAwqScales({&m, 1}, h, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_GT(s->alpha, 0.0);
  EXPECT_LT(s->error, 0.8 * s->nearest_error) << s->error << " vs " << s->nearest_error;
  EXPECT_GT(s->scale[77], 1.5f * s->scale[78]);  // an outlier channel scaled up
  // The error the search reports is the stored weight's, scales undone.
  std::vector<float> q(w.size());
  QuantizeScaled(w, s->scale, *scheme, q, 1);
  for (size_t i = 0; i < q.size(); ++i) q[i] /= s->scale[i % cols];
  EXPECT_NEAR(OutputError(w, q, rows, h), s->error, 1e-9 * s->error);
}

// SmoothQuant's scales by hand: s_j = max|x_j|^alpha / max|w_.j|^(1-alpha)
// over every matrix of the group; a channel with no input or no weight keeps 1.
TEST(Smooth, ScalesAreTheFormulaOverTheGroup) {
  const int64_t cols = 4;
  Hessian h(cols);
  h.Add(std::vector<float>{1, -8, 0, 2, -4, 2, 0, 0.5f}, 1);  // max |x|: 4 8 0 2
  const std::vector<float> a = {0.5f, 1, 3, 0, -2, 0.25f, 1, 0};  // max |w|: 2 1 3 0 (with b)
  const std::vector<float> b = {1, -0.5f, 0, 0};
  const AwqMatrix group[] = {{"a", a, 2, nullptr}, {"b", b, 1, nullptr}};
  absl::StatusOr<std::vector<float>> s = SmoothScales(group, h, 0.5);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->size(), 4u);
  EXPECT_FLOAT_EQ((*s)[0], static_cast<float>(std::sqrt(4.0) / std::sqrt(2.0)));
  EXPECT_FLOAT_EQ((*s)[1], static_cast<float>(std::sqrt(8.0) / std::sqrt(1.0)));
  EXPECT_EQ((*s)[2], 1.0f);  // no input
  EXPECT_EQ((*s)[3], 1.0f);  // no weight
  absl::StatusOr<std::vector<float>> all = SmoothScales(group, h, 1.0);
  ASSERT_TRUE(all.ok());
  EXPECT_FLOAT_EQ((*all)[1], 8.0f);  // alpha 1: the inputs' max alone
  EXPECT_THAT(SmoothScales(group, Hessian(cols), 0.5).status().message(),
              HasSubstr("no calibration rows"));
  EXPECT_FALSE(SmoothScales(group, h, 1.5).ok());
}

TEST(Gptq, RefusesWhatItCannotDo) {
  const int64_t rows = 4, cols = 256;
  const std::vector<float> w = Weights(rows, cols, 1);
  Hessian h(cols);
  h.Add(Inputs(50, cols, 2), 1);
  auto cast = *ParseScheme("fp8_e4m3fn");
  EXPECT_THAT(Gptq("blk.0.q", w, rows, cols, h, *cast, {}, {}).status().message(),
              HasSubstr("'fp8_e4m3fn' does not choose its codes one element at a time"));
  auto q4k = *ParseScheme("q4_K");
  GptqOptions act;
  act.act_order = true;
  EXPECT_THAT(Gptq("blk.0.q", w, rows, cols, h, *q4k, {}, act).status().message(),
              HasSubstr("act_order"));
  Hessian empty(cols);
  EXPECT_THAT(Gptq("blk.0.q", w, rows, cols, empty, *q4k, {}, {}).status().message(),
              HasSubstr("no calibration rows"));
  std::vector<float> bad = w;
  bad[5] = NAN;
  EXPECT_THAT(Gptq("blk.0.q", bad, rows, cols, h, *q4k, {}, {}).status().message(),
              HasSubstr("weight 0,5 is nan"));
  auto iq2 = *ParseScheme("iq2_xxs");
  EXPECT_FALSE(Gptq("blk.0.q", w, rows, cols, h, *iq2, {}, {}).ok());
  auto double_quant = *ParseScheme("nf4:double-quant");
  EXPECT_THAT(Gptq("blk.0.q", w, rows, cols, h, *double_quant, {}, {}).status().message(),
              HasSubstr("groups of 256 blocks"));
  auto group = *ParseScheme("fp8_e4m3fn-g64");  // consecutive columns: no act_order
  EXPECT_THAT(Gptq("blk.0.q", w, rows, cols, h, *group, {}, act).status().message(),
              HasSubstr("act_order"));
}

}  // namespace
}  // namespace lowp
