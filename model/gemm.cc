#include "model/gemm.h"

#include <algorithm>

#include "kernels/thread_pool.h"
#include "model/blas.h"

namespace lowp {

int64_t GemmTileColumns(int64_t n, int64_t k) {
  if (n <= 256 || n * k < (int64_t{1} << 20)) return std::max<int64_t>(n, 1);
  // Each tile packs the rows of A again: few wide tiles cost less (measured on
  // 2 threads, M = 256: n / 4 to n / 8 beat n / 16 by 10-15%), enough of them
  // keep 8 threads busy on one block of rows.
  const int64_t eighth = (n / 8 + 63) / 64 * 64;
  return std::clamp<int64_t>(eighth, 256, 2048);
}

void LinearProduct(std::span<const RowBlock> blocks, const float* a, int64_t lda, const float* w,
                   int64_t n, int64_t k, const float* bias, float* c, int64_t ldc, int threads) {
  BlasSetup();
  const int64_t width = GemmTileColumns(n, k);
  const int64_t tiles = (n + width - 1) / width;
  const size_t count = blocks.size() * static_cast<size_t>(tiles);
  int64_t rows = 0;
  for (const RowBlock& b : blocks) rows += b.end - b.begin;
  // A product below a million multiply-adds stays on the calling thread.
  const int workers = rows * n * k >= (int64_t{1} << 20) ? threads : 1;
  ParallelFor(count, workers, [&](size_t index) {
    const RowBlock& rows = blocks[index / tiles];
    const int64_t first = static_cast<int64_t>(index % tiles) * width;
    const int64_t cols = std::min(width, n - first);
    const int64_t m = rows.end - rows.begin;
    float* out = c + rows.begin * ldc + first;
    Sgemm(true, m, cols, k, 1.0f, a + rows.begin * lda, lda, w + first * k, k, out, ldc);
    if (bias != nullptr) {
      for (int64_t r = 0; r < m; ++r) {
        float* row = out + r * ldc;
        for (int64_t j = 0; j < cols; ++j) row[j] += bias[first + j];
      }
    }
  });
}

}  // namespace lowp
