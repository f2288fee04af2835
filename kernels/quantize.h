// SIMD building blocks of quantization schemes and of their error metrics:
// block absmax and min/max, integer quantize-dequantize with per-group scale
// and zero point, and the comparison of a tensor with its reconstruction.
// Written with Highway, dispatched at run time like kernels/convert.h. Each
// function has a scalar twin with the suffix `Ref` that states its rule; the
// SIMD versions give the same results on every target (bit for bit, except
// the sums in ErrorStats, which stay within the bound of
// kernels/error_stats.h).
#ifndef LOWP_KERNELS_QUANTIZE_H_
#define LOWP_KERNELS_QUANTIZE_H_

#include <cstdint>
#include <limits>
#include <span>

#include "kernels/error_stats.h"

namespace lowp {

// Per block of `block` elements along rows of `cols` elements (a row's last
// block is short when block does not divide cols): max |x| over the finite
// elements, 0 when none. x.size() is a multiple of cols; amax.size() is
// rows * ceil(cols / block).
void BlockAbsMax(std::span<const float> x, int64_t cols, int64_t block, std::span<float> amax);
void BlockAbsMaxRef(std::span<const float> x, int64_t cols, int64_t block, std::span<float> amax);

// Per block as above: min and max over the finite elements (both 0 when none;
// a zero result is +0 whatever zeros the block holds).
void BlockMinMax(std::span<const float> x, int64_t cols, int64_t block, std::span<float> min,
                 std::span<float> max);
void BlockMinMaxRef(std::span<const float> x, int64_t cols, int64_t block, std::span<float> min,
                    std::span<float> max);

// Integer quantize-dequantize, block by block as above, for a finite x:
//   q   = clamp(round_half_even(x / scale) + zero, qmin, qmax)
//   out = (q - zero) * scale
// computed in float32 (x / scale is one correctly rounded division; clamp(v)
// is v > qmin ? v : qmin, then v < qmax ? v : qmax: a NaN v gives qmin). A
// block whose scale is 0 (or not finite) gives q = clamp(zero) and out = 0.
// `zero` may be empty (all 0); it is meant to hold integers. A non-finite x
// is copied to out unchanged with q = clamp(zero). `codes`, when not empty,
// receives q converted to int16 toward zero (-32768 <= qmin <= qmax <= 32767).
// Returns the number of finite elements whose rounded value (before the
// clamp) was outside [qmin, qmax] (clipped). out may be x itself.
struct IntQuantParams {
  int32_t qmin = -127;
  int32_t qmax = 127;
};
uint64_t QuantizeIntBlocks(std::span<const float> x, int64_t cols, int64_t block,
                           std::span<const float> scale, std::span<const float> zero,
                           const IntQuantParams& params, std::span<float> out,
                           std::span<int16_t> codes = {});
uint64_t QuantizeIntBlocksRef(std::span<const float> x, int64_t cols, int64_t block,
                              std::span<const float> scale, std::span<const float> zero,
                              const IntQuantParams& params, std::span<float> out,
                              std::span<int16_t> codes = {});

// What a cast did, over x and its rounded q (same size): `clipped` counts
// the finite x with |x| > clip_above, `subnormal` the q with 0 < |q| <
// subnormal_below. Added to the two counters.
void CountCastEvents(std::span<const float> x, std::span<const float> q, float clip_above,
                     float subnormal_below, uint64_t& clipped, uint64_t& subnormal);
void CountCastEventsRef(std::span<const float> x, std::span<const float> q, float clip_above,
                        float subnormal_below, uint64_t& clipped, uint64_t& subnormal);

// Observes every pair of x and q (same size) into `stats`: ComparePairsRef
// element by element with ErrorStats::Observe, ComparePairs with the SIMD
// kernel (the same counts and maxima; the sums in float over runs of 16 terms,
// then in double: within the bound of kernels/error_stats.h).
void ComparePairs(std::span<const float> x, std::span<const float> q, const CompareOptions& options,
                  ErrorStats& stats);
void ComparePairsRef(std::span<const float> x, std::span<const float> q,
                     const CompareOptions& options, ErrorStats& stats);

}  // namespace lowp

#endif  // LOWP_KERNELS_QUANTIZE_H_
