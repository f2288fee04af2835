// The range study: what the dynamic range of fp16, bf16 and fp8 does to a
// tensor's values, and which power-of-two scale (fp16's loss-scale question)
// keeps them in range.
//
// For each format, over the tensor's finite elements x and their casts q
// (nearest-even, the format's overflow policy):
//   overflow     |x| > the format's largest finite value (they become inf,
//                NaN or the largest value, by the format's policy)
//   subnormal    0 < |q| < the smallest normal: results in the subnormal range
//   flushed      x != 0 and q == 0
//   relative     |q - x| / |x| over x != 0 with q finite: max and RMS
//   max_scale    the largest k such that every |x| * 2^k <= the largest finite
//   min_scale    the smallest k such that at least `fraction` of the nonzero
//                x have |x| * 2^k >= the smallest normal
// A power-of-two scale 2^k with min_scale <= k <= max_scale keeps every value
// finite and the chosen fraction out of the subnormal range.
#ifndef LOWP_QUANT_RANGE_H_
#define LOWP_QUANT_RANGE_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/format.h"
#include "io/tensor.h"

namespace lowp {

struct RangeOptions {
  double fraction = 0.999;  // for min_scale
  int threads = 0;
  // As MeasureOptions::release: called with the bytes of each piece read.
  std::function<void(std::span<const uint8_t>)> release;
};

struct RangeRow {
  std::string tensor;
  std::string format;
  uint64_t elements = 0;
  uint64_t finite = 0;     // finite elements
  uint64_t nonzero = 0;    // finite and nonzero
  double absmax = 0;       // max |x|
  double min_nonzero = 0;  // min |x| over nonzero x (0 if none)
  uint64_t overflow = 0;
  uint64_t subnormal = 0;
  uint64_t flushed = 0;
  double max_relative_error = 0;
  double rms_relative_error = 0;
  // log2 of the scales above; absent when there is no nonzero element.
  std::optional<int> max_scale_log2;
  std::optional<int> min_scale_log2;

  double fraction_of_finite(uint64_t count) const {
    return finite == 0 ? 0 : static_cast<double>(count) / static_cast<double>(finite);
  }
};

// One row per format for a floating tensor; InvalidArgument naming the tensor
// otherwise, or naming a format without zero or not floating.
absl::StatusOr<std::vector<RangeRow>> StudyRange(const TensorView& tensor,
                                                 const std::vector<Format>& formats,
                                                 const RangeOptions& options = {});

}  // namespace lowp

#endif  // LOWP_QUANT_RANGE_H_
