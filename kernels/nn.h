// The forward pass's elementwise loops (model/forward.cc) and the exp they
// share: each entry runs the best Highway target of the CPU over a whole row
// or tensor (kernels/nn_simd.cc), beside its scalar reference (the *Ref
// functions, kernels/nn.cc), which it equals bit for bit on every target
// (tests/nn_kernels_test.cc).
//
// ExpF32 is glibc's expf, bit for bit: its algorithm (2^(k/32) from a
// 32-entry table times a degree-3 polynomial, in double, the products and sums
// fused as the FMA build of glibc 2.27+ fuses them; the same special cases)
// in double lanes. On a target without fused multiply-add (SSE2/SSSE3/SSE4)
// it calls std::exp per element. The test compares it with std::exp over
// 2^32 / 997 spread float32 inputs and every special case.
//
// What differs from the loops model/forward.cc ran before (tests give the
// bound; bench/results/HISTORY.md, "Issue 29: the forward pass's elementwise loops"):
//   - Softmax's denominator and RmsNorm's sum of squares are double sums in
//     8 partial sums (element i into sum i mod 8, the eight added pairwise),
//     not one running sum. Their terms are float32 values (exp results,
//     exact squares), so the two orders differ by at most n * 2^-53 relative
//     (n terms); the float32 1/sum or 1/rms drawn from them differs by at
//     most one ulp, and only when it lies that close to a rounding boundary.
//     Measured on the bundled models (the held-out TinyStories text, 232
//     chunks of 256, reference + int8-channel + q4_0 on stories260K and
//     stories3M): 12,828,672 softmax rows (1.65 G probabilities) and
//     3,563,520 norm rows, not one result differed from the running sums'.
//   - Everything else (max, exp, the products, sums and quotients of the
//     rows) is the same float32 operations in the same order.
#ifndef LOWP_KERNELS_NN_H_
#define LOWP_KERNELS_NN_H_

#include <cstddef>
#include <cstdint>
#include <span>

namespace lowp {

// out[i] = std::exp(in[i]) (float). `out` may be `in`.
void ExpF32(std::span<const float> in, std::span<float> out);
void ExpF32Ref(std::span<const float> in, std::span<float> out);

// x = softmax(x) in place: m = max of x (NaN ignored), e_i = exp(x_i - m)
// in float32, sum = the e_i in double by 8 partial sums, x_i = e_i *
// float(1 / sum). An empty span is left alone.
void Softmax(std::span<float> x);
void SoftmaxRef(std::span<float> x);

// Each `width`-wide row r of `in` ([rows, width]) as RMSNorm: out_j = in_j *
// scale * w_j, w_j = weight[j] (+ 1 when `adds_one`), scale = float(1 /
// sqrt(ss / width + eps)), ss = the squares in double by 8 partial sums.
// `out` may be `in`; width > 0.
void RmsNorm(const float* in, float* out, int64_t rows, int64_t width, const float* weight,
             bool adds_one, double eps);
void RmsNormRef(const float* in, float* out, int64_t rows, int64_t width, const float* weight,
                bool adds_one, double eps);

// The rotary embedding of `heads` vectors of `dim` values at x (one token's
// [heads, dim]): for i < dim / 2, (a, b) = (x_i, x_{i + dim/2}) becomes
// (a * cos_i - b * sin_i, b * cos_i + a * sin_i), cos and sin of dim / 2
// values each (the token's position's angles, rounded to float).
void Rope(float* x, int64_t heads, int64_t dim, const float* cos, const float* sin);
void RopeRef(float* x, int64_t heads, int64_t dim, const float* cos, const float* sin);

// x_i = x_i / (1 + exp(-x_i)) in float32 (SiLU).
void Silu(std::span<float> x);
void SiluRef(std::span<float> x);

// x_i += y_i and x_i *= y_i (y at least as long as x).
void AddTo(std::span<float> x, std::span<const float> y);
void AddToRef(std::span<float> x, std::span<const float> y);
void MultiplyBy(std::span<float> x, std::span<const float> y);
void MultiplyByRef(std::span<float> x, std::span<const float> y);

// How many x_i are NaN or infinite.
uint64_t CountNonfinite(std::span<const float> x);
uint64_t CountNonfiniteRef(std::span<const float> x);

namespace kernels {
// glibc's 2^(i/32) table, less i << 47 in each entry's bits (nn.cc).
const uint64_t* ExpF32Table();
}  // namespace kernels

}  // namespace lowp

#endif  // LOWP_KERNELS_NN_H_
