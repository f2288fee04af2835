#include "calib/gptq.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/thread_pool.h"
#include "model/blas.h"
#include "quant/rounder.h"

extern "C" {
// LAPACK (OpenBLAS ships it; Debian's libopenblas has no LAPACKE header).
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
void dtrtri_(const char* uplo, const char* diag, const int* n, double* a, const int* lda,
             int* info);
}

namespace lowp {
namespace {

// Rows of W per thread task (fixed, so that the bits do not depend on the
// thread count).
constexpr int64_t kRowTile = 256;

absl::Status Invalid(const std::string& name, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("GPTQ of '", name, "': ", what));
}

// The upper Cholesky factor U of H^-1 (H^-1 = U^T U), row-major, from the
// symmetric positive definite `h` ([n, n], overwritten). With J the
// reversal of the indices and J H J = L L^T (Cholesky, L lower), H = M M^T
// for the upper M = J L J, so H^-1 = (M^-1)^T M^-1 and U = M^-1 = J L^-1 J:
// one Cholesky and one triangular inverse (2n^3/3 flops, where factoring,
// inverting and factoring H^-1 again took 4n^3/3).
absl::StatusOr<std::vector<double>> InverseCholeskyUpper(const std::string& name,
                                                         std::vector<double>& h, int n) {
  const size_t m = static_cast<size_t>(n);
  std::vector<double> a(h.size());
  for (size_t i = 0; i < m; ++i) {  // J H J (symmetric: the same read either way)
    for (size_t j = 0; j < m; ++j) a[i * m + j] = h[(m - 1 - i) * m + (m - 1 - j)];
  }
  h = {};
  // LAPACK is column-major: its lower L(p, q), p >= q, is a[p + q * n].
  int info = 0;
  dpotrf_("L", &n, a.data(), &n, &info);
  if (info == 0) dtrtri_("L", "N", &n, a.data(), &n, &info);
  if (info != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("GPTQ of '", name,
                     "': the inputs' Hessian is not positive definite after dampening "
                     "(LAPACK info ",
                     info, "); raise the dampening"));
  }
  std::vector<double> u(a.size(), 0.0);
  for (size_t i = 0; i < m; ++i) {
    for (size_t j = i; j < m; ++j) u[i * m + j] = a[(m - 1 - i) + (m - 1 - j) * m];
  }
  return u;
}

}  // namespace

absl::StatusOr<GptqFactor> FactorHessian(const std::string& name, const Hessian& h,
                                         const GptqOptions& options) {
  const int64_t n = h.dim();
  if (h.count() == 0) return Invalid(name, "no calibration rows reached it");
  if (n > (int64_t{1} << 16)) {
    return Invalid(name, absl::StrCat(n, " columns: GPTQ takes at most 65536"));
  }
  if (!(options.damp >= 0 && options.damp < 1e6)) {
    return Invalid(name, absl::StrCat("dampening ", options.damp, " is not in [0, 1e6)"));
  }
  BlasSetup();
  GptqFactor f;
  f.act_order = options.act_order;
  f.order.resize(static_cast<size_t>(n));
  std::iota(f.order.begin(), f.order.end(), 0);
  if (options.act_order) {
    std::stable_sort(f.order.begin(), f.order.end(),
                     [&](int32_t a, int32_t b) { return h.at(a, a) > h.at(b, b); });
  }
  // H with its columns in `order`; dead columns; dampening.
  const std::vector<int32_t>& order = f.order;
  std::vector<double> hp(static_cast<size_t>(n * n));
  for (int64_t a = 0; a < n; ++a) {
    for (int64_t b = 0; b < n; ++b) {
      const int64_t i = std::min(order[a], order[b]), j = std::max(order[a], order[b]);
      const double v = h.at(i, j);
      if (!std::isfinite(v)) return Invalid(name, "its inputs are not all finite");
      hp[static_cast<size_t>(a * n + b)] = v;
    }
  }
  f.dead.assign(static_cast<size_t>(n), 0);
  double diagonal = 0;
  for (int64_t a = 0; a < n; ++a) {
    double& d = hp[static_cast<size_t>(a * n + a)];
    if (d == 0) {
      d = 1;
      f.dead[static_cast<size_t>(a)] = 1;
    }
    diagonal += d;
  }
  const double damp = options.damp * diagonal / static_cast<double>(n);
  for (int64_t a = 0; a < n; ++a) hp[static_cast<size_t>(a * n + a)] += damp;
  absl::StatusOr<std::vector<double>> u = InverseCholeskyUpper(name, hp, static_cast<int>(n));
  if (!u.ok()) return u.status();
  f.u = *std::move(u);
  const std::vector<float> importance = h.MeanSquares();
  f.importance.resize(importance.size());
  for (int64_t a = 0; a < n; ++a) {
    f.importance[static_cast<size_t>(a)] = importance[static_cast<size_t>(order[a])];
  }
  return f;
}

absl::StatusOr<GptqResult> Gptq(const std::string& name, std::span<const float> w, int64_t rows,
                                int64_t cols, const Hessian& h, const Scheme& scheme,
                                const TensorContext& context, const GptqOptions& options) {
  absl::StatusOr<GptqFactor> f = FactorHessian(name, h, options);
  if (!f.ok()) return f.status();
  return Gptq(name, w, rows, cols, *f, scheme, context, options);
}

absl::StatusOr<GptqResult> Gptq(const std::string& name, std::span<const float> w, int64_t rows,
                                int64_t cols, const GptqFactor& f, const Scheme& scheme,
                                const TensorContext& context, const GptqOptions& options) {
  if (rows < 1 || cols < 1 || static_cast<int64_t>(w.size()) != rows * cols) {
    return Invalid(name, absl::StrCat(w.size(), " values are not ", rows, " x ", cols));
  }
  const int64_t n = static_cast<int64_t>(f.order.size());
  if (n != cols) {
    return Invalid(name, absl::StrCat("its inputs have ", n, " columns, the weight ", cols));
  }
  for (size_t i = 0; i < w.size(); ++i) {
    if (!std::isfinite(w[i])) {
      return Invalid(name, absl::StrCat("weight ", i / cols, ",", i % cols, " is ", w[i]));
    }
  }
  const int threads = ResolveThreads(options.threads);
  absl::StatusOr<std::unique_ptr<BlockRounder>> made =
      scheme.BlockRounderFor(rows, cols, context, threads);
  if (!made.ok()) return Invalid(name, std::string(made.status().message()));
  BlockRounder& rounder = **made;
  if (f.act_order && !rounder.Permutable()) {
    return Invalid(name, absl::StrCat("act_order needs a scheme whose groups may be any columns "
                                      "(integer groups, stored with g_idx); '",
                                      scheme.name(), "' stores consecutive columns"));
  }
  BlasSetup();
  const std::vector<int32_t>& order = f.order;
  const std::vector<double>& u = f.u;
  const std::vector<float>& importance = f.importance;
  // W with its columns in `order`, dead columns 0.
  std::vector<double> wp(static_cast<size_t>(rows * n));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t a = 0; a < n; ++a) {
      wp[static_cast<size_t>(r * n + a)] =
          f.dead[static_cast<size_t>(a)] ? 0 : w[static_cast<size_t>(r * n + order[a])];
    }
  }
  const int64_t block = rounder.block_cols();
  int64_t batch = std::max<int64_t>(1, options.batch);
  if (block < n && block % batch != 0 && batch % block != 0) batch = block;

  std::vector<float> quantized(static_cast<size_t>(rows * n));
  std::vector<float> column(static_cast<size_t>(rows)), rounded(static_cast<size_t>(rows));
  std::vector<float> block_values;
  std::vector<double> errors(static_cast<size_t>(rows * batch));
  const size_t row_tiles = static_cast<size_t>((rows + kRowTile - 1) / kRowTile);
  for (int64_t i1 = 0; i1 < n; i1 += batch) {
    const int64_t i2 = std::min(n, i1 + batch);
    for (int64_t i = i1; i < i2; ++i) {
      if (i % block == 0) {
        const int64_t width = std::min(block, n - i);
        block_values.resize(static_cast<size_t>(rows * width));
        for (int64_t r = 0; r < rows; ++r) {
          for (int64_t c = 0; c < width; ++c) {
            block_values[static_cast<size_t>(r * width + c)] =
                static_cast<float>(wp[static_cast<size_t>(r * n + i + c)]);
          }
        }
        std::span<const float> weights(importance.data() + i, static_cast<size_t>(width));
        if (std::all_of(weights.begin(), weights.end(), [](float x) { return x == 0; })) {
          weights = {};  // no input reaches the block: weigh its columns alike
        }
        rounder.Choose(i, block_values, weights);
      }
      for (int64_t r = 0; r < rows; ++r) {
        column[static_cast<size_t>(r)] = static_cast<float>(wp[static_cast<size_t>(r * n + i)]);
      }
      rounder.Round(i, column, rounded);
      const double* ui = u.data() + i * n;
      ParallelFor(row_tiles, threads, [&](size_t tile) {
        const int64_t r0 = static_cast<int64_t>(tile) * kRowTile;
        const int64_t r1 = std::min(rows, r0 + kRowTile);
        for (int64_t r = r0; r < r1; ++r) {
          double* wr = wp.data() + r * n;
          const float q = rounded[static_cast<size_t>(r)];
          quantized[static_cast<size_t>(r * n + i)] = q;
          const double e = (wr[i] - q) / ui[i];
          errors[static_cast<size_t>(r * batch + (i - i1))] = e;
          for (int64_t j = i + 1; j < i2; ++j) wr[j] -= e * ui[j];
        }
      });
    }
    if (i2 == n) break;
    // The columns after the batch, once: W[:, i2:] -= E U[i1:i2, i2:].
    ParallelFor(row_tiles, threads, [&](size_t tile) {
      const int64_t r0 = static_cast<int64_t>(tile) * kRowTile;
      const int64_t r1 = std::min(rows, r0 + kRowTile);
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(r1 - r0),
                  static_cast<int>(n - i2), static_cast<int>(i2 - i1), -1.0,
                  errors.data() + r0 * batch, static_cast<int>(batch), u.data() + i1 * n + i2,
                  static_cast<int>(n), 1.0, wp.data() + r0 * n + i2, static_cast<int>(n));
    });
  }

  GptqResult result;
  result.values.resize(quantized.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t a = 0; a < n; ++a) {
      result.values[static_cast<size_t>(r * n + order[a])] =
          quantized[static_cast<size_t>(r * n + a)];
    }
  }
  const std::span<const uint8_t> bytes = rounder.Bytes();
  result.bytes.assign(bytes.begin(), bytes.end());
  if (f.act_order) result.order = order;
  return result;
}

}  // namespace lowp
