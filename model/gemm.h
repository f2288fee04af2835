// Matrix products on lowp's pool (kernels/thread_pool.h), each tile one
// OpenBLAS call on one thread (model/blas.h). A product's output is split
// into row blocks (given by the caller: model/batch.h groups whole sequences)
// and column tiles whose width depends only on the number of columns, and
// the tiles run on the pool; a dot product is never split. OpenBLAS's bits
// for an element depend on the shape of the call that computes it (its
// kernels treat edge tiles differently), so with the tiles fixed by shape the
// results never depend on the thread count.
#ifndef LOWP_MODEL_GEMM_H_
#define LOWP_MODEL_GEMM_H_

#include <cstdint>
#include <span>

namespace lowp {

// Rows [begin, end) of a product's left operand, multiplied in one call.
struct RowBlock {
  int64_t begin = 0;
  int64_t end = 0;
};

// The width of the column tiles of a product of a weight [n, k]: about
// n / 8, between 256 and 2048 and a multiple of 64; n itself (one tile) for
// a weight below 2^20 values, too little to share.
int64_t GemmTileColumns(int64_t n, int64_t k);

// c[r, :] = a[r, :k] w^T (+ bias) for the rows r of every block: w is [n, k]
// row-major (a linear layer's weight), a has row stride `lda`, c row stride
// `ldc`, bias (n values) may be null.
void LinearProduct(std::span<const RowBlock> blocks, const float* a, int64_t lda, const float* w,
                   int64_t n, int64_t k, const float* bias, float* c, int64_t ldc, int threads);

}  // namespace lowp

#endif  // LOWP_MODEL_GEMM_H_
