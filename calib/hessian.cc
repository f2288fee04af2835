#include "calib/hessian.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "kernels/thread_pool.h"
#include "model/blas.h"

namespace lowp {
namespace {

// Rows of H per OpenBLAS call.
constexpr int64_t kBlockRows = 256;
// Input rows per pass over H: what the double copy of the rows holds.
constexpr int64_t kChunkRows = 1024;

}  // namespace

Hessian::Hessian(int64_t dim)
    : dim_(dim),
      h_(static_cast<size_t>(dim * dim), 0.0),
      abs_sum_(static_cast<size_t>(dim), 0.0),
      abs_max_(static_cast<size_t>(dim), 0.0f) {}

void Hessian::Add(std::span<const float> rows, int threads) {
  const int64_t n = static_cast<int64_t>(rows.size()) / dim_;
  threads = ResolveThreads(threads);
  BlasSetup();
  std::vector<double> x;  // a chunk of the rows, in double
  for (int64_t first = 0; first < n; first += kChunkRows) {
    const std::span<const float> chunk =
        rows.subspan(static_cast<size_t>(first * dim_),
                     static_cast<size_t>(std::min(kChunkRows, n - first) * dim_));
    x.assign(chunk.begin(), chunk.end());
    AddChunk(x, threads);
  }
}

void Hessian::AddChunk(std::span<const double> x, int threads) {
  const int64_t n = static_cast<int64_t>(x.size()) / dim_;
  const int64_t blocks = (dim_ + kBlockRows - 1) / kBlockRows;
  // Block b: H[i0:i1, i0:] += X[:, i0:i1]^T X[:, i0:], the upper triangle's
  // rows i0..i1 (and a few entries below the diagonal, never read).
  ParallelFor(static_cast<size_t>(blocks), threads, [&](size_t b) {
    const int64_t i0 = static_cast<int64_t>(b) * kBlockRows;
    const int64_t i1 = std::min(dim_, i0 + kBlockRows);
    cblas_dgemm(CblasRowMajor, CblasTrans, CblasNoTrans, static_cast<int>(i1 - i0),
                static_cast<int>(dim_ - i0), static_cast<int>(n), 1.0, x.data() + i0,
                static_cast<int>(dim_), x.data() + i0, static_cast<int>(dim_), 1.0,
                h_.data() + i0 * dim_ + i0, static_cast<int>(dim_));
  });
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t j = 0; j < dim_; ++j) {
      const double a = std::fabs(x[static_cast<size_t>(r * dim_ + j)]);
      abs_sum_[static_cast<size_t>(j)] += a;
      float& m = abs_max_[static_cast<size_t>(j)];
      m = std::max(m, static_cast<float>(a));  // exact: a is a float32 value
    }
  }
  count_ += n;
}

std::vector<double> Hessian::MeanAbs() const {
  std::vector<double> out(abs_sum_.size(), 0.0);
  if (count_ == 0) return out;
  for (size_t j = 0; j < out.size(); ++j) out[j] = abs_sum_[j] / static_cast<double>(count_);
  return out;
}

std::vector<float> Hessian::MeanSquares() const {
  std::vector<float> out(static_cast<size_t>(dim_), 0.0f);
  if (count_ == 0) return out;
  for (int64_t i = 0; i < dim_; ++i) {
    out[static_cast<size_t>(i)] = static_cast<float>(at(i, i) / static_cast<double>(count_));
  }
  return out;
}

}  // namespace lowp
