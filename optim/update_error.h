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
#include "optim/recipe.h"
#include "optim/update_report.h"

namespace lowp {

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

}  // namespace lowp

#endif  // LOWP_OPTIM_UPDATE_ERROR_H_
