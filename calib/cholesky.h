// Cholesky factorization of a symmetric positive definite matrix on several
// threads, with the same bits on any number of them: the right-looking
// blocked algorithm, each block's work one single-threaded BLAS/LAPACK call
// (lowp runs OpenBLAS on one thread, model/blas.h) on the thread pool.
#ifndef LOWP_CALIB_CHOLESKY_H_
#define LOWP_CALIB_CHOLESKY_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"

namespace lowp {

// Overwrites the lower triangle of `a` ([n, n] row-major, symmetric: only
// its lower triangle and diagonal are read) with L, a = L L^T; what the
// strict upper triangle holds after is unspecified. FailedPrecondition
// naming the first column where `a` is not positive definite.
absl::Status CholeskyLower(std::span<double> a, int64_t n, int threads);

}  // namespace lowp

#endif  // LOWP_CALIB_CHOLESKY_H_
