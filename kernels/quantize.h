// SIMD building blocks of quantization schemes and of their error metrics:
// block absmax and min/max, integer quantize-dequantize with per-group scale
// and zero point, and the comparison of a tensor with its reconstruction.
// Written with Highway, dispatched at run time like kernels/convert.h. Each
// function has a scalar twin with the suffix `Ref` that states its rule; the
// SIMD versions give the same results on every target (bit for bit, except
// the order of the double sums in PairStats, see there).
#ifndef LOWP_KERNELS_QUANTIZE_H_
#define LOWP_KERNELS_QUANTIZE_H_

#include <cstdint>
#include <limits>
#include <span>

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

// A tensor x against its reconstruction q, element by element.
struct CompareOptions {
  // Relative error |q - x| / |x| is taken over the measured elements with
  // |x| >= this and x != 0.
  float relative_floor = 0;
  // Results with 0 < |q| < this count as subnormal (0 disables).
  float subnormal_below = 0;
  // Finite inputs with |x| > this count as clipped (a cast's largest finite).
  float clip_above = std::numeric_limits<float>::infinity();
};

struct PairStats {
  uint64_t count = 0;              // elements
  uint64_t nan_inputs = 0;         // x is NaN
  uint64_t inf_inputs = 0;         // x is +-Inf
  uint64_t nonfinite_outputs = 0;  // x finite, q NaN or +-Inf (overflow to inf)
  uint64_t measured = 0;           // x and q finite: the elements the sums cover
  uint64_t zeroed = 0;             // x finite and nonzero, q == 0
  uint64_t subnormal = 0;          // 0 < |q| < subnormal_below (q finite, any x)
  uint64_t clipped = 0;            // |x| > clip_above (x finite)
  uint64_t relative_count = 0;     // measured, x != 0, |x| >= relative_floor
  // Sums in double over the measured elements (e = q - x and |e| / |x| each
  // one correctly rounded double operation, e exact when x and q are within
  // 2^29 of each other): their last bits depend on the order of summation,
  // which differs between targets and splits; counts and maxima do not.
  double sum_squared_error = 0;           // sum e^2
  double sum_squared_input = 0;           // sum x^2
  double sum_squared_output = 0;          // sum q^2
  double sum_product = 0;                 // sum x q
  double sum_abs_error = 0;               // sum |e|
  double max_abs_error = 0;               // max |e|
  double sum_relative_error = 0;          // sum |e| / |x| over relative_count
  double sum_squared_relative_error = 0;  // sum (|e| / |x|)^2
  double max_relative_error = 0;

  void Add(const PairStats& other);
};

// Adds the comparison of x with q (same size) into `stats`.
void ComparePairs(std::span<const float> x, std::span<const float> q, const CompareOptions& options,
                  PairStats& stats);
void ComparePairsRef(std::span<const float> x, std::span<const float> q,
                     const CompareOptions& options, PairStats& stats);

}  // namespace lowp

#endif  // LOWP_KERNELS_QUANTIZE_H_
