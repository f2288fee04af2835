// The second moment of a linear layer's inputs, GPTQ's Hessian of the
// layer's squared output error: H = sum over calibration rows x of x x^T,
// accumulated in double (each product of two float32 values is exact there)
// over as many rows as given, in the order given, 1024 rows at a time. The
// sums are split into blocks of H fixed by its size, each one OpenBLAS call
// on one thread, so H does not depend on the thread count.
#ifndef LOWP_CALIB_HESSIAN_H_
#define LOWP_CALIB_HESSIAN_H_

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace lowp {

class Hessian {
 public:
  explicit Hessian(int64_t dim);

  // Adds rows of `dim` values ([rows, dim], row-major). Rows with a
  // non-finite value are added all the same: H then holds them, and GPTQ
  // refuses it (CheckFinite).
  void Add(std::span<const float> rows, int threads);  // threads: 0 for all

  int64_t dim() const { return dim_; }
  // The rows added so far.
  int64_t count() const { return count_; }
  // H[i][j] for j >= i (the upper triangle; the lower one is not kept).
  double at(int64_t i, int64_t j) const { return h_[static_cast<size_t>(i * dim_ + j)]; }
  // Each column's mean square over the rows (H's diagonal / count): what an
  // importance matrix holds for these inputs (eval/imatrix.h).
  std::vector<float> MeanSquares() const;
  // Each column's mean |x| over the rows (AWQ's activation statistic).
  std::vector<double> MeanAbs() const;
  // Each column's max |x| over the rows (SmoothQuant's), 0 before any row.
  const std::vector<float>& AbsMax() const { return abs_max_; }

  // Moves H out: [dim, dim] row-major, its upper triangle set (the lower
  // one not). The Hessian holds no matrix after (GPTQ factors H in place,
  // calib/gptq.h).
  std::vector<double> ReleaseMatrix() { return std::move(h_); }

 private:
  void AddChunk(std::span<const double> x, int threads);  // rows of dim_ values

  int64_t dim_;
  int64_t count_ = 0;
  std::vector<double> h_;        // [dim, dim], upper triangle
  std::vector<double> abs_sum_;  // per column, sum |x| in row order
  std::vector<float> abs_max_;   // per column, max |x| (NaN rows leave it alone)
};

}  // namespace lowp

#endif  // LOWP_CALIB_HESSIAN_H_
