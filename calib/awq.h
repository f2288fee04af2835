// AWQ (Lin, Tang, Tang, Yang, Dang, Gan, Han 2023, "AWQ: Activation-aware
// Weight Quantization for LLM Compression and Acceleration"): before a group
// of matrices that multiply the same input is quantized, each input channel
// j is scaled by s_j = m_j^alpha (m_j the channel's mean |x| over the
// calibration rows), the weights' column j multiplied by s_j and the input
// divided by it (folded into the operation before: a norm's weight, the rows
// of the matrix that produced the input), so that the channels the inputs
// make important lose less to rounding. As the reference (llm-awq's
// auto_scale) chooses it:
//   s = max(m^alpha, 1e-4), then s / sqrt(max(s) min(s)); alpha = k / grid
//   for k = 0 .. grid - 1 (alpha 0: s = 1, rounding to nearest);
// the alpha whose quantized group moves the group's output least on the
// calibration rows: sum over the group's matrices W of tr(D H D^T), D = W -
// Q(W diag(s)) diag(s)^-1, H the inputs' Hessian (calib/hessian.h). (The
// reference measures the whole block's output on the tokens; this is each
// product's, the loss GPTQ minimizes too.)
#ifndef LOWP_CALIB_AWQ_H_
#define LOWP_CALIB_AWQ_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "calib/hessian.h"
#include "quant/scheme.h"

namespace lowp {

// A matrix of the group: [rows, H's dim] and the scheme it is stored in.
struct AwqMatrix {
  std::string name;
  std::span<const float> weight;
  int64_t rows = 0;
  const Scheme* scheme = nullptr;
};

struct AwqOptions {
  int grid = 20;
  double alpha = -1;  // in [0, 1]: this alpha alone, no search
  int threads = 0;
};

struct AwqScales {
  std::vector<float> scale;  // per input channel
  double alpha = 0;
  double error = 0;          // the group's output error with `scale`, per calibration row
  double nearest_error = 0;  // the same with s = 1 (NaN with a given alpha)
};

// The group's scales. InvalidArgument naming a matrix whose shape does not
// fit H, or a group with no calibration rows.
absl::StatusOr<AwqScales> SearchAwqScales(std::span<const AwqMatrix> group, const Hessian& h,
                                          const AwqOptions& options);

// W diag(s) (`weight` [rows, scale.size()]) quantized by `scheme` and
// dequantized into `out`: what the deployed model stores.
void QuantizeScaled(std::span<const float> weight, std::span<const float> scale,
                    const Scheme& scheme, std::span<float> out, int threads);

}  // namespace lowp

#endif  // LOWP_CALIB_AWQ_H_
