#include "calib/gptq.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "calib/cholesky.h"
#include "kernels/thread_pool.h"
#include "model/blas.h"
#include "quant/rounder.h"

extern "C" {
// LAPACK (OpenBLAS ships it; Debian's libopenblas has no LAPACKE header).
void dtrtri_(const char* uplo, const char* diag, const int* n, double* a, const int* lda,
             int* info);
}

namespace lowp {
namespace {

// Rows of W per thread task (rounded up to whole groups of the rounder's
// rows; fixed, so that the bits do not depend on the thread count).
constexpr int64_t kRowTile = 256;

absl::Status Invalid(const std::string& name, const std::string& what) {
  return absl::InvalidArgumentError(absl::StrCat("GPTQ of '", name, "': ", what));
}

// Copies the upper triangle of `h` ([n, n] row-major) into its lower one,
// a tile at a time.
void Symmetrize(std::vector<double>& h, int64_t n) {
  constexpr int64_t kTile = 64;
  for (int64_t i0 = 0; i0 < n; i0 += kTile) {
    for (int64_t j0 = i0; j0 < n; j0 += kTile) {
      for (int64_t i = i0; i < std::min(n, i0 + kTile); ++i) {
        for (int64_t j = std::max(i, j0); j < std::min(n, j0 + kTile); ++j) {
          h[static_cast<size_t>(j * n + i)] = h[static_cast<size_t>(i * n + j)];
        }
      }
    }
  }
}

// Puts the symmetric `h` ([n, n] row-major, both triangles set) in the
// column order `order` (row a and column b become order[a], order[b]), in
// place: the rows by the permutation's cycles, then each row's columns.
void Permute(std::vector<double>& h, int64_t n, std::span<const int32_t> order) {
  std::vector<double> row(static_cast<size_t>(n));
  std::vector<uint8_t> placed(static_cast<size_t>(n), 0);
  auto at = [&](int64_t r) { return h.begin() + r * n; };
  for (int64_t start = 0; start < n; ++start) {
    if (placed[static_cast<size_t>(start)]) continue;
    std::copy(at(start), at(start) + n, row.begin());  // row `start` is overwritten first
    int64_t a = start;
    while (true) {
      placed[static_cast<size_t>(a)] = 1;
      const int64_t from = order[static_cast<size_t>(a)];
      if (from == start) {
        std::copy(row.begin(), row.end(), at(a));
        break;
      }
      std::copy(at(from), at(from) + n, at(a));
      a = from;
    }
  }
  for (int64_t r = 0; r < n; ++r) {
    std::copy(at(r), at(r) + n, row.begin());
    for (int64_t b = 0; b < n; ++b) h[static_cast<size_t>(r * n + b)] = row[order[b]];
  }
}

}  // namespace

absl::StatusOr<GptqFactor> FactorHessian(const std::string& name, const Hessian& h,
                                         const GptqOptions& options) {
  return FactorHessian(name, Hessian(h), options);
}

absl::StatusOr<GptqFactor> FactorHessian(const std::string& name, Hessian&& h,
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
  const std::vector<float> importance = h.MeanSquares();
  f.importance.resize(importance.size());
  for (int64_t a = 0; a < n; ++a) {
    f.importance[static_cast<size_t>(a)] = importance[static_cast<size_t>(f.order[a])];
  }
  // H's upper triangle (in `order`, whole first when it is permuted); dead
  // columns; dampening.
  std::vector<double> m = h.ReleaseMatrix();
  const size_t un = static_cast<size_t>(n);
  for (size_t i = 0; i < un; ++i) {
    for (size_t j = i; j < un; ++j) {
      if (!std::isfinite(m[i * un + j])) return Invalid(name, "its inputs are not all finite");
    }
  }
  if (options.act_order) {
    Symmetrize(m, n);
    Permute(m, n, f.order);
  }
  f.dead.assign(un, 0);
  double diagonal = 0;
  for (size_t a = 0; a < un; ++a) {
    double& d = m[a * un + a];
    if (d == 0) {
      d = 1;
      f.dead[a] = 1;
    }
    diagonal += d;
  }
  const double damp = options.damp * diagonal / static_cast<double>(n);
  for (size_t a = 0; a < un; ++a) m[a * un + a] += damp;
  // With J the reversal of the indices (reversing the array is J H J, its
  // upper triangle now the lower one): J H J = L L^T, and H = M M^T for the
  // upper M = J L J, which reversing the array again puts in the upper
  // triangle.
  std::reverse(m.begin(), m.end());
  if (absl::Status s = CholeskyLower(m, n, ResolveThreads(options.threads)); !s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("GPTQ of '", name,
                     "': the inputs' Hessian is not positive definite after dampening; raise "
                     "the dampening"));
  }
  std::reverse(m.begin(), m.end());
  // I + A = M with each column divided by its diagonal (D = diag(M)^2).
  std::vector<double> inverse_diagonal(un);
  for (size_t k = 0; k < un; ++k) inverse_diagonal[k] = 1.0 / m[k * un + k];
  for (size_t i = 0; i < un; ++i) {
    double* row = m.data() + i * un;
    for (size_t k = i + 1; k < un; ++k) row[k] *= inverse_diagonal[k];
  }
  f.a = std::move(m);
  return f;
}

absl::StatusOr<GptqResult> Gptq(const std::string& name, std::span<const float> w, int64_t rows,
                                int64_t cols, Hessian h, const Scheme& scheme,
                                const TensorContext& context, const GptqOptions& options) {
  absl::StatusOr<GptqFactor> f = FactorHessian(name, std::move(h), options);
  if (!f.ok()) return f.status();
  return Gptq(name, w, rows, cols, *f, scheme, context, options);
}

absl::StatusOr<GptqResult> Gptq(const std::string& name, std::span<const float> w, int64_t rows,
                                int64_t cols, const GptqFactor& f, const Scheme& scheme,
                                const TensorContext& context, const GptqOptions& options,
                                std::span<float> out) {
  if (rows < 1 || cols < 1 || static_cast<int64_t>(w.size()) != rows * cols) {
    return Invalid(name, absl::StrCat(w.size(), " values are not ", rows, " x ", cols));
  }
  if (!out.empty() && out.size() != w.size()) {
    return Invalid(name, absl::StrCat("an output of ", out.size(), " values for ", w.size()));
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
      scheme.BlockRounderFor(rows, cols, context);
  if (!made.ok()) return Invalid(name, std::string(made.status().message()));
  BlockRounder& rounder = **made;
  if (f.act_order && !rounder.Permutable()) {
    return Invalid(name, absl::StrCat("act_order needs a scheme whose groups may be any columns "
                                      "(integer groups, stored with g_idx); '",
                                      scheme.name(), "' stores consecutive columns"));
  }
  BlasSetup();
  const std::vector<int32_t>& order = f.order;
  const std::vector<double>& a = f.a;
  // W with its columns in `order`, dead columns 0, as it enters (`given`)
  // and as the rounding errors move it (`wp`).
  auto given = [&](int64_t r, int64_t c) -> double {
    return f.dead[static_cast<size_t>(c)] ? 0 : w[static_cast<size_t>(r * n + order[c])];
  };
  std::vector<double> wp(static_cast<size_t>(rows * n));
  const int64_t block = rounder.block_cols();
  int64_t batch = std::max<int64_t>(1, options.batch);
  if (block < n && block % batch != 0 && batch % block != 0) batch = block;
  // Rows per task: whole groups of the rounder's rows, fixed so that the
  // bits do not depend on the thread count.
  const int64_t tile = (kRowTile + rounder.block_rows() - 1) / rounder.block_rows() *
                       rounder.block_rows();
  const size_t tiles = static_cast<size_t>((rows + tile - 1) / tile);
  ParallelFor(tiles, threads, [&](size_t t) {
    const int64_t r0 = static_cast<int64_t>(t) * tile, r1 = std::min(rows, r0 + tile);
    for (int64_t r = r0; r < r1; ++r) {
      for (int64_t c = 0; c < n; ++c) wp[static_cast<size_t>(r * n + c)] = given(r, c);
    }
  });

  // (I + A_bb)^-1 for the block b that starts at column i: with the
  // corrections E A (E = w - q) of the columns before i, rows of `wp` hold
  // column i as GPTQ has it, but its later columns not: GPTQ's are
  // w + E A_(<i, b) (I + A_bb)^-1 (I + A is the inverse of GPTQ's U with its
  // rows divided by their diagonal). Row-major upper with a unit diagonal:
  // LAPACK reads the row-major upper triangle as the column-major lower one,
  // and the inverse of the transpose is the transpose of the inverse.
  auto block_inverse = [&](int64_t i) {
    const int64_t width = std::min(block, n - i);
    std::vector<double> inverse(static_cast<size_t>(width * width), 0.0);
    for (int64_t r = 0; r < width; ++r) {
      for (int64_t c = r + 1; c < width; ++c) {
        inverse[static_cast<size_t>(r * width + c)] = a[static_cast<size_t>((i + r) * n + i + c)];
      }
    }
    int info = 0;
    const int wd = static_cast<int>(width);
    dtrtri_("L", "U", &wd, inverse.data(), &wd, &info);  // unit triangular: always invertible
    return inverse;
  };
  // The importance weights of the block that starts at column i.
  auto block_importance = [&](int64_t i) {
    const int64_t width = std::min(block, n - i);
    std::span<const float> weights(f.importance.data() + i, static_cast<size_t>(width));
    if (std::all_of(weights.begin(), weights.end(), [](float x) { return x == 0; })) {
      weights = {};  // no input reaches the block: weigh its columns alike
    }
    return weights;
  };

  // The quantized weight, in the columns' own order.
  GptqResult result;
  if (out.empty()) {
    result.values.resize(w.size());
    out = result.values;
  }
  std::vector<double> errors(static_cast<size_t>(rows * batch));  // w - q of the batch's columns
  std::vector<std::vector<double>> inverses;  // of the blocks that start in the batch
  for (int64_t i1 = 0; i1 < n; i1 += batch) {
    const int64_t i2 = std::min(n, i1 + batch);
    inverses.clear();
    for (int64_t i = i1; i < i2; ++i) {
      if (i % block == 0 && i > 0) inverses.push_back(block_inverse(i));
    }
    // Each tile of rows through the batch's columns, then its columns
    // after the batch once: W[:, i2:] += E A[i1:i2, i2:].
    ParallelFor(tiles, threads, [&](size_t t) {
      const int64_t r0 = static_cast<int64_t>(t) * tile, r1 = std::min(rows, r0 + tile);
      const size_t count = static_cast<size_t>(r1 - r0);
      thread_local std::vector<double> corrections;
      thread_local std::vector<float> values, column, rounded;
      column.resize(count);
      rounded.resize(count);
      size_t next_inverse = 0;
      for (int64_t i = i1; i < i2; ++i) {
        if (i % block == 0) {
          const int64_t width = std::min(block, n - i);
          values.resize(count * static_cast<size_t>(width));
          if (i == 0) {  // nothing corrected yet
            for (int64_t r = r0; r < r1; ++r) {
              for (int64_t c = 0; c < width; ++c) {
                values[static_cast<size_t>((r - r0) * width + c)] =
                    static_cast<float>(given(r, c));
              }
            }
          } else {
            const std::vector<double>& inverse = inverses[next_inverse++];
            corrections.resize(values.size());
            for (int64_t r = r0; r < r1; ++r) {
              for (int64_t c = 0; c < width; ++c) {
                corrections[static_cast<size_t>((r - r0) * width + c)] =
                    wp[static_cast<size_t>(r * n + i + c)] - given(r, i + c);
              }
            }
            const int wd = static_cast<int>(width);
            cblas_dtrmm(CblasRowMajor, CblasRight, CblasUpper, CblasNoTrans, CblasUnit,
                        static_cast<int>(count), wd, 1.0, inverse.data(), wd, corrections.data(),
                        wd);
            for (int64_t r = r0; r < r1; ++r) {
              for (int64_t c = 0; c < width; ++c) {
                const size_t k = static_cast<size_t>((r - r0) * width + c);
                values[k] = static_cast<float>(given(r, i + c) + corrections[k]);
              }
            }
          }
          rounder.Choose(i, r0, values, block_importance(i));
        }
        for (int64_t r = r0; r < r1; ++r) {
          column[static_cast<size_t>(r - r0)] = static_cast<float>(wp[static_cast<size_t>(r * n + i)]);
        }
        rounder.Round(i, r0, column, rounded);
        const double* ai = a.data() + i * n;
        for (int64_t r = r0; r < r1; ++r) {
          double* wr = wp.data() + r * n;
          const float q = rounded[static_cast<size_t>(r - r0)];
          out[static_cast<size_t>(r * n + order[i])] = q;
          const double e = given(r, i) - q;
          errors[static_cast<size_t>(r * batch + (i - i1))] = e;
          for (int64_t j = i + 1; j < i2; ++j) wr[j] += e * ai[j];
        }
      }
      if (i2 < n) {
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(count),
                    static_cast<int>(n - i2), static_cast<int>(i2 - i1), 1.0,
                    errors.data() + r0 * batch, static_cast<int>(batch), a.data() + i1 * n + i2,
                    static_cast<int>(n), 1.0, wp.data() + r0 * n + i2, static_cast<int>(n));
      }
    });
  }

  const std::span<const uint8_t> bytes = rounder.Bytes();
  result.bytes.assign(bytes.begin(), bytes.end());
  if (f.act_order) result.order = order;
  result.parameters = rounder.Parameters();
  return result;
}

}  // namespace lowp
