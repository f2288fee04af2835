// The error of values q against the values x they stand for: the one
// statistics type of lowp (as gemma.cpp's DistortionStats). ComparePairs
// (kernels/quantize.h) observes every field, for each scheme on each chunk of
// a tensor; the fused conversion measurement (MeasureArray,
// kernels/convert.h) the fields a cast needs; QuantReport (quant/measure.h)
// holds one per tensor and scheme, and the reports over many tensors merge
// theirs in order.
#ifndef LOWP_KERNELS_ERROR_STATS_H_
#define LOWP_KERNELS_ERROR_STATS_H_

#include <cstdint>
#include <limits>

namespace lowp {

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

// Above this |x| or |q|, the terms of the sums are in double (see below).
inline constexpr float kFloatRange = 0x1p60f;

struct ErrorStats {
  uint64_t count = 0;              // elements
  uint64_t nan_inputs = 0;         // x is NaN
  uint64_t inf_inputs = 0;         // x is +-Inf
  uint64_t nonfinite_outputs = 0;  // x finite, q NaN or +-Inf (overflow to inf)
  uint64_t measured = 0;           // x and q finite: the elements the sums cover
  uint64_t zeroed = 0;             // x finite and nonzero, q == 0
  uint64_t subnormal = 0;          // 0 < |q| < subnormal_below (q finite, any x)
  uint64_t clipped = 0;            // |x| > clip_above (x finite)
  uint64_t relative_count = 0;     // measured, x != 0, |x| >= relative_floor
  // Sums over the measured elements, whose terms follow one rule (Observe
  // states it per element, ComparePairs's SIMD kernel follows it): where |x|
  // and |q| are at most kFloatRange, e = q - x and r = |e| / |x| are float
  // operations (one rounding each; r in double where the float overflows);
  // elsewhere both are double (e exact when x and q are within 2^29 of each
  // other). The maxima are of these e and r, so every path gives the same
  // maxima and counts bit for bit. The sums do not: Observe adds each term
  // in double (products of floats are exact there); the SIMD kernel forms
  // the terms and adds them in float over runs of at most 16 per lane, then
  // adds the runs in double, and redoes in double any run where a lane's
  // max |x|, |q| or |e| lies in (0, 2^-40) or max |x|, |q| or r above
  // kFloatRange (so nothing overflows, and underflow costs at most 2^-70 of
  // a run's sum). Against the exact sums of the exact e and r, with u =
  // 2^-24, n the elements and B = 21u + n 2^-52:
  //   sums of nonnegative terms (squares, |e|, r, r^2): relative error <= B;
  //   sum_product: error <= B (sum x^2 + sum q^2) / 2.
  // Hence rmse and relative rmse within B/2 + u relative (~6.3e-7 + n 2^-53),
  // SQNR within 10 log10(1 + 2B) dB (~1.1e-5 dB), and cosine similarity
  // within ~2B absolute; tests/quantize_kernels_test.cc checks it against
  // long double sums. Observe alone is within n 2^-52 of the exact sums.
  double sum_squared_error = 0;           // sum e^2
  double sum_squared_input = 0;           // sum x^2
  double sum_squared_output = 0;          // sum q^2
  double sum_product = 0;                 // sum x q
  double sum_abs_error = 0;               // sum |e|
  double max_abs_error = 0;               // max |e|
  double sum_relative_error = 0;          // sum |e| / |x| over relative_count
  double sum_squared_relative_error = 0;  // sum (|e| / |x|)^2
  double max_relative_error = 0;

  // Adds one pair: x, and q its reconstruction (the rule ComparePairs's
  // SIMD kernel follows, element by element).
  void Observe(float x, float q, const CompareOptions& options);
  // Adds the statistics of other elements (a later chunk, another tensor):
  // counts and sums add, maxima take the larger. Merged in a fixed order,
  // results do not depend on how work was split.
  void Merge(const ErrorStats& other);
};

}  // namespace lowp

#endif  // LOWP_KERNELS_ERROR_STATS_H_
