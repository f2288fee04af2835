// What each training-state recipe does to AdamW's updates on a real tensor
// (`lowp update-error`): N steps from the tensor's values with a seeded
// gradient model, once in float64 (optim/adamw.h) and once per recipe
// (optim/recipe.h), compared element by element.
//
// Gradient model, per element i of a tensor and step t:
//   g = sigma * (rho * d_i + sqrt(1 - rho^2) * z_{t,i})
// d_i a persistent direction (the part of the gradient that points the same
// way step after step: what training follows), z fresh noise each step (the
// minibatch's), both unit-variance draws from a counter-based hash of (seed,
// tensor, i, t): the sum of four 16-bit uniforms, centred and scaled (Irwin-
// Hall: bounded at +-3.46, otherwise close to a Gaussian), so a run never
// depends on threads. sigma = grad_scale * rms(tensor): gradients scale with
// the weights they belong to; the default 1e-3 puts a weight of rms 0.02
// at gradients of 2e-5, below fp16's and e5m2's smallest normals, where the
// per-tensor scaling of low-precision gradients matters. rho = grad_signal
// (default 0.5).
//
// Each recipe's step, in float32 as a fused optimizer computes it: the
// gradient rounded to its format (scaled per tensor and step for fp16 and
// fp8, the tensor's amax taken first), the moments updated from it in
// float32, the update u = -lr/c1 * m / (sqrt(v)/sqrt(c2) + eps) from the
// new float32 moments (as bitsandbytes' kernel and fused AdamW do), then the
// moments stored in their format. The weight: x' = x * (1 - lr*wd) + u in
// float32, x the master copy when there is one (then the weights are x'
// rounded to nearest), else x' rounded once into the weights' format
// (nearest-even or stochastic), or, for Kahan, y = (x' - x) - c, w' =
// round(w + y), c = round((w' - w) - y) with c kept in the weights' format.
#ifndef LOWP_OPTIM_UPDATE_ERROR_H_
#define LOWP_OPTIM_UPDATE_ERROR_H_

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "optim/adamw.h"
#include "optim/recipe.h"

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

// Reads out.size() of a tensor's elements, from element `first`, as float32.
using ValueReader = std::function<absl::Status(int64_t first, std::span<float> out)>;

// Runs every recipe on a tensor of `n` elements read through `read` (twice,
// a block at a time: memory does not grow with the tensor; `tensor_index`
// keys its gradients), filling reports[r] for recipes[r] (same size).
// InvalidArgument naming `name` when a value is not finite; read's errors
// as they are.
absl::Status MeasureUpdates(const std::string& name, int64_t n, const ValueReader& read,
                            uint64_t tensor_index, const UpdateErrorOptions& options,
                            std::span<const TrainingRecipe> recipes,
                            std::span<UpdateReport> reports);
// The same on values in memory.
absl::Status MeasureUpdates(const std::string& name, std::span<const float> values,
                            uint64_t tensor_index, const UpdateErrorOptions& options,
                            std::span<const TrainingRecipe> recipes,
                            std::span<UpdateReport> reports);

// The gradient model's draw for element `i` at step `t` (t = 0: the
// persistent direction d_i), unit variance.
double GradientDraw(uint64_t seed, uint64_t tensor_index, uint64_t i, uint64_t t);

}  // namespace lowp

#endif  // LOWP_OPTIM_UPDATE_ERROR_H_
