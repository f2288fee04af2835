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
