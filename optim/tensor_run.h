// Internal to optim/: one tensor's run of every recipe beside the float64
// reference, a chunk of elements at a time (optim/update_error.h states the
// rules). Not installed.
#ifndef LOWP_OPTIM_TENSOR_RUN_H_
#define LOWP_OPTIM_TENSOR_RUN_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "optim/recipe.h"
#include "optim/update_report.h"

namespace lowp::internal {

// Elements a chunk holds at most: a multiple of the 256-value blocks of the
// fp8 and 8bit moments, which start at the tensor's first element.
inline constexpr int64_t kChunkElements = 16 * 256;

class TensorRun {
 public:
  // A tensor of `n` elements (keyed `tensor_index` in the gradient model)
  // whose values have the given rms.
  TensorRun(const UpdateErrorOptions& options, std::span<const TrainingRecipe> recipes, int64_t n,
            uint64_t tensor_index, double rms);
  ~TensorRun();

  // Takes each step's gradient amax over the whole tensor, for the recipes
  // that scale their gradients per tensor (a pass over the gradient model,
  // not the values); nothing when none does.
  void ScanGradientAmax();

  // Runs every step on the chunk `values` (elements base.. of the tensor, at
  // most kChunkElements) into out[r] for recipe r.
  void Chunk(std::span<const float> values, int64_t base, std::vector<UpdateReport>& out) const;

  const std::vector<int64_t>& checkpoints() const { return checkpoints_; }

 private:
  struct Rounders;
  double Gradient(double d, int64_t i, int64_t t) const;

  const UpdateErrorOptions& options_;
  std::span<const TrainingRecipe> recipes_;
  int64_t n_;
  uint64_t tensor_index_;
  double sigma_, rho_, noise_;
  std::vector<int64_t> checkpoints_;
  std::vector<double> lr_, amax_;  // per step, from 1
  std::vector<std::unique_ptr<Rounders>> rounders_;
};

}  // namespace lowp::internal

#endif  // LOWP_OPTIM_TENSOR_RUN_H_
