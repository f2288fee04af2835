// What update-error reports, and its options: a recipe's sums on a tensor
// (UpdateReport), the stored states' census, the checkpoints of the weights'
// error, and the gradient model's draw (optim/update_error.h describes the
// model and the steps).
#ifndef LOWP_OPTIM_UPDATE_REPORT_H_
#define LOWP_OPTIM_UPDATE_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "optim/adamw.h"

namespace lowp {

struct UpdateErrorOptions {
  AdamWOptions adamw;
  double grad_scale = 1e-3;  // sigma / rms(tensor)
  double grad_signal = 0.5;  // rho
  uint64_t seed = 0;
  int threads = 0;  // 0: every core
};

// InvalidArgument naming the field (AdamW's, grad-scale > 0 finite,
// grad-signal in [0, 1]).
absl::Status ValidateUpdateError(const UpdateErrorOptions& options);

// Overflow and underflow of the stored gradients and moments.
struct StateCensus {
  uint64_t grad_underflow = 0;    // a nonzero gradient stored as 0
  uint64_t grad_overflow = 0;     // a gradient beyond the format's range (saturated or inf)
  uint64_t moment_underflow = 0;  // a nonzero moment stored as 0
  uint64_t moment_overflow = 0;   // a moment beyond its format's range
  void Merge(const StateCensus& other);
};

// Checkpoints at which the weights' error is taken: steps N/4, N/2, 3N/4, N
// (rounded up, distinct).
std::vector<int64_t> UpdateCheckpoints(int64_t steps);

// One recipe on one tensor (or, merged, on many).
struct UpdateReport {
  std::string tensor;  // "(all)" for the merged row
  std::string recipe;
  double bytes_per_parameter = 0;
  uint64_t elements = 0;
  int64_t steps = 0;
  // Element-steps at which the reference's weight moved, and of those the
  // ones where the recipe's stored weight (its master copy when it has one)
  // did not.
  uint64_t reference_moves = 0;
  uint64_t lost = 0;
  // sum of applied * intended and intended^2 over every element and step:
  // intended = the recipe's own float32 update of the step (decay included),
  // applied = what its stored weight moved.
  double applied_dot_intended = 0;
  double intended_squared = 0;
  // Per checkpoint: sum ((x - x0) - (p - p0))^2 and sum (p - p0)^2, x the
  // stored weight (master when present), p the float64 reference.
  std::vector<int64_t> checkpoints;
  std::vector<double> error_squared, movement_squared;
  // After the last step: sum (m - m_ref)^2, sum m_ref^2, and v's.
  double m_error_squared = 0, m_squared = 0, v_error_squared = 0, v_squared = 0;
  StateCensus census;

  double updates_lost() const;  // lost / reference_moves
  double update_ratio() const;  // applied_dot_intended / intended_squared
  // sqrt(error_squared / movement_squared) at checkpoint k (the last by
  // default): 0 when the recipe moved the weights as the reference did, 1
  // when it did not move them at all.
  double weight_relative_error(size_t k) const;
  double weight_relative_error() const { return weight_relative_error(checkpoints.size() - 1); }
  double m_relative_error() const;
  double v_relative_error() const;
  void Merge(const UpdateReport& other);  // adds the sums
};

// The gradient model's draw for element `i` at step `t` (t = 0: the
// persistent direction d_i), unit variance.
double GradientDraw(uint64_t seed, uint64_t tensor_index, uint64_t i, uint64_t t);

namespace internal {
// SplitMix64's finalizer: the hash of the gradient model and the seeds.
uint64_t Mix64(uint64_t x);
}  // namespace internal

}  // namespace lowp

#endif  // LOWP_OPTIM_UPDATE_REPORT_H_
