// SmoothQuant (Xiao, Lin, Seznec, Wu, Demouth, Han 2023, "SmoothQuant:
// Accurate and Efficient Post-Training Quantization for Large Language
// Models"): before a group of matrices that multiply the same input is
// quantized together with that input, each input channel j is divided by
//   s_j = max|X_j|^alpha / max|W_.j|^(1 - alpha)
// (max|X_j| over the calibration rows, max|W_.j| over column j of every
// matrix of the group), clamped below at 1e-5 as the reference
// (smoothquant/smooth.py, smooth_ln_fcs) does, and the weights' column j
// multiplied by it: the product is unchanged, the activations' outlier
// channels are moved into the weights, and both become easier to quantize
// (alpha = 0.5 balances them; larger moves more). A channel whose inputs
// or weights are all zero keeps s_j = 1. The scales fold into the operation
// before, as AWQ's do (eval/calibrator.cc).
#ifndef LOWP_CALIB_SMOOTH_H_
#define LOWP_CALIB_SMOOTH_H_

#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "calib/awq.h"
#include "calib/hessian.h"

namespace lowp {

inline constexpr double kSmoothDefaultAlpha = 0.5;

// The group's scales (alpha in [0, 1]). InvalidArgument naming a matrix
// whose shape does not fit H, or a group with no calibration rows.
absl::StatusOr<std::vector<float>> SmoothScales(std::span<const AwqMatrix> group,
                                                const Hessian& h, double alpha);

}  // namespace lowp

#endif  // LOWP_CALIB_SMOOTH_H_
