#include "kernels/error_stats.h"

#include <cmath>

namespace lowp {

void ErrorStats::Observe(float xf, float qf, const CompareOptions& options) {
  const double floor = options.relative_floor;
  const float subnormal_below = options.subnormal_below;
  const float clip_above = options.clip_above;
  ++count;
  const bool x_finite = std::isfinite(xf);
  const bool q_finite = std::isfinite(qf);
  nan_inputs += std::isnan(xf);
  inf_inputs += std::isinf(xf);
  subnormal += q_finite && qf != 0 && std::fabs(qf) < subnormal_below;
  if (!x_finite) return;
  clipped += std::fabs(xf) > clip_above;
  zeroed += xf != 0 && qf == 0;
  if (!q_finite) {
    ++nonfinite_outputs;
    return;
  }
  ++measured;
  const double xd = xf, qd = qf;
  const float axf = std::fabs(xf);
  const bool in_range = axf <= kFloatRange && std::fabs(qf) <= kFloatRange;
  const double e = in_range ? static_cast<double>(qf - xf) : qd - xd;
  const double ae = std::fabs(e);
  sum_squared_error += e * e;
  sum_squared_input += xd * xd;
  sum_squared_output += qd * qd;
  sum_product += xd * qd;
  sum_abs_error += ae;
  if (ae > max_abs_error) max_abs_error = ae;
  const double ax = axf;
  if (ax != 0 && ax >= floor) {
    const float rf = in_range ? static_cast<float>(ae) / axf : 0.0f;  // ae is a float here
    const double rel = in_range && std::isfinite(rf) ? static_cast<double>(rf) : ae / ax;
    ++relative_count;
    sum_relative_error += rel;
    sum_squared_relative_error += rel * rel;
    if (rel > max_relative_error) max_relative_error = rel;
  }
}

void ErrorStats::Merge(const ErrorStats& o) {
  count += o.count;
  nan_inputs += o.nan_inputs;
  inf_inputs += o.inf_inputs;
  nonfinite_outputs += o.nonfinite_outputs;
  measured += o.measured;
  zeroed += o.zeroed;
  subnormal += o.subnormal;
  clipped += o.clipped;
  relative_count += o.relative_count;
  sum_squared_error += o.sum_squared_error;
  sum_squared_input += o.sum_squared_input;
  sum_squared_output += o.sum_squared_output;
  sum_product += o.sum_product;
  sum_abs_error += o.sum_abs_error;
  if (o.max_abs_error > max_abs_error) max_abs_error = o.max_abs_error;
  sum_relative_error += o.sum_relative_error;
  sum_squared_relative_error += o.sum_squared_relative_error;
  if (o.max_relative_error > max_relative_error) max_relative_error = o.max_relative_error;
}

}  // namespace lowp
