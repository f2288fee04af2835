// The normalized Walsh-Hadamard transform, the rotation of QuaRot-style
// schemes and of llama.cpp's KV cache (PR #21038, ggml_gen_hadamard): for n
// a power of two, H_n[i][j] = (-1)^popcount(i & j) / sqrt(n) (Sylvester's
// ordering, no random signs). H_n is symmetric and orthonormal (H_n H_n = I),
// so the same call rotates and rotates back.
#ifndef LOWP_KERNELS_HADAMARD_H_
#define LOWP_KERNELS_HADAMARD_H_

#include <cstdint>
#include <span>

namespace lowp {

// Replaces each consecutive run c of n values of x (x.size() a multiple of
// n, n a power of two) by H_n c, in float32: the fast transform's log2(n)
// rounds of butterflies (u, v) -> (u + v, u - v), then a product by
// float(1 / sqrt(n)) (exact for n a power of 4). Each entry is within
// (log2(n) + 2) * 2^-24 * sum_j |c_j| / sqrt(n) of H_n c exactly (to first
// order: one rounding per round, one for 1/sqrt(n), one for the product;
// tests/hadamard_test.cc).
void HadamardBlocks(std::span<float> x, int64_t n);

// The largest power of two dividing d (d > 0).
int64_t LargestPowerOfTwoDividing(int64_t d);

// True when n is a power of two (1, 2, 4, ...).
bool IsPowerOfTwo(int64_t n);

}  // namespace lowp

#endif  // LOWP_KERNELS_HADAMARD_H_
