#include "calib/cholesky.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/thread_pool.h"
#include "model/blas.h"

extern "C" {
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info);
}

namespace lowp {
namespace {

// Columns per step, and rows (and columns) per task of a step's updates.
constexpr int64_t kPanel = 256;
constexpr int64_t kTile = 256;

}  // namespace

absl::Status CholeskyLower(std::span<double> a, int64_t n, int threads) {
  BlasSetup();
  const int ld = static_cast<int>(n);
  auto at = [&](int64_t i, int64_t j) { return a.data() + i * n + j; };
  for (int64_t k0 = 0; k0 < n; k0 += kPanel) {
    const int64_t k1 = std::min(n, k0 + kPanel), nb = k1 - k0;
    // The diagonal block: LAPACK reads the row-major lower triangle as the
    // column-major upper one, and its U^T U is our L L^T.
    int info = 0;
    const int nbi = static_cast<int>(nb);
    dpotrf_("U", &nbi, at(k0, k0), &ld, &info);
    if (info != 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("not positive definite at column ", k0 + info - 1));
    }
    if (k1 == n) break;
    // The panel below it: L_ik = A_ik L_kk^-T.
    const int64_t below = n - k1;
    const size_t row_tiles = static_cast<size_t>((below + kTile - 1) / kTile);
    ParallelFor(row_tiles, threads, [&](size_t t) {
      const int64_t r0 = k1 + static_cast<int64_t>(t) * kTile, r1 = std::min(n, r0 + kTile);
      cblas_dtrsm(CblasRowMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit,
                  static_cast<int>(r1 - r0), nbi, 1.0, at(k0, k0), ld, at(r0, k0), ld);
    });
    // The trailing lower triangle: A_ij -= L_ik L_jk^T, tile by tile.
    std::vector<std::pair<int64_t, int64_t>> tiles;
    for (int64_t i = 0; i < static_cast<int64_t>(row_tiles); ++i) {
      for (int64_t j = 0; j <= i; ++j) tiles.emplace_back(i, j);
    }
    ParallelFor(tiles.size(), threads, [&](size_t t) {
      const int64_t r0 = k1 + tiles[t].first * kTile, r1 = std::min(n, r0 + kTile);
      const int64_t c0 = k1 + tiles[t].second * kTile, c1 = std::min(n, c0 + kTile);
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(r1 - r0),
                  static_cast<int>(c1 - c0), nbi, -1.0, at(r0, k0), ld, at(c0, k0), ld, 1.0,
                  at(r0, c0), ld);
    });
  }
  return absl::OkStatus();
}

}  // namespace lowp
