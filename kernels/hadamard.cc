#include "kernels/hadamard.h"

#include <cmath>
#include <cstddef>

namespace lowp {

bool IsPowerOfTwo(int64_t n) { return n > 0 && (n & (n - 1)) == 0; }

int64_t LargestPowerOfTwoDividing(int64_t d) { return d & -d; }

void HadamardBlocks(std::span<float> x, int64_t n) {
  if (n <= 1) return;
  const size_t m = static_cast<size_t>(n);
  const float norm = static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)));
  for (size_t base = 0; base + m <= x.size(); base += m) {
    float* c = x.data() + base;
    // Butterflies over strides 1, 2, 4, ...: after the round of stride h,
    // each pair (i, i + h) within a 2h-block holds (u + v, u - v). The
    // result is the unnormalized Sylvester product; the inner loop over
    // j runs along contiguous values, which the compiler vectorizes.
    for (size_t h = 1; h < m; h *= 2) {
      for (size_t i = 0; i < m; i += 2 * h) {
        for (size_t j = i; j < i + h; ++j) {
          const float u = c[j], v = c[j + h];
          c[j] = u + v;
          c[j + h] = u - v;
        }
      }
    }
    for (size_t j = 0; j < m; ++j) c[j] *= norm;
  }
}

}  // namespace lowp
