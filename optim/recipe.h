// Training-state recipes: in which formats mixed-precision AdamW keeps the
// weights, a master copy, the gradients and the two moments, and how the
// update is rounded into the stored weight. `lowp update-error --list` and
// `lowp size` name them with their bytes per parameter.
//
// Spelled by name (TrainingRecipes()) or as KEY=VALUE items joined by '+':
//   weights=fp32|bf16|fp16             the weights the model computes with
//   master=none|fp32                   a float32 copy the update goes into
//   update=rne|sr|kahan                how the update enters a weight without
//                                      a master copy: nearest-even, stochastic
//                                      rounding (lowp's reproducible SR,
//                                      formats/reference.h), or Kahan summation
//                                      with a compensation buffer in the
//                                      weights' format (Zamirai et al.)
//   grads=fp32|bf16|fp16|fp8_e4m3fn|fp8_e5m2   fp16 and fp8 scaled per tensor
//                                      and step: fp16 by the power of two 2^k
//                                      <= 65504 / amax (a loss scaler's
//                                      settled scale), fp8 by max_finite /
//                                      amax (Transformer Engine's current
//                                      scaling)
//   moments=fp32|bf16|fp8|8bit         both moments: fp8 = e4m3 with one
//                                      float32 absmax scale per 256 values
//                                      (torchao's AdamWFp8), 8bit =
//                                      bitsandbytes' blockwise dynamic map
//                                      (optim/dynamic_map.h)
// e.g. "weights=bf16+master=none+update=sr+grads=bf16+moments=8bit".
#ifndef LOWP_OPTIM_RECIPE_H_
#define LOWP_OPTIM_RECIPE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "formats/format.h"

namespace lowp {

struct TrainingRecipe {
  enum class Update { kNearestEven, kStochastic, kKahan };
  enum class Moments { kFp32, kBf16, kFp8Blocks, kDynamic8 };

  std::string name;
  std::string description;
  Format weights;
  bool master = false;
  Update update = Update::kNearestEven;
  Format grads;
  Moments moments = Moments::kFp32;

  // The canonical KEY=VALUE spelling.
  std::string Spelling() const;
  // Bytes of training state per parameter: weights, master, Kahan buffer,
  // gradients and both moments (with the block scales of fp8 and 8bit).
  double BytesPerParameter() const;
  // Whether the gradients are scaled per tensor and step (fp16, fp8).
  bool ScaledGradients() const;
};

// The named recipes, most bytes first: the 16 / 12 / 10 / 8 / 6 ladder.
const std::vector<TrainingRecipe>& TrainingRecipes();

// A name of TrainingRecipes() or a '+'-joined spelling (above).
// InvalidArgument naming the recipe and the part that is wrong; a spelling
// must give weights.
absl::StatusOr<TrainingRecipe> ParseTrainingRecipe(absl::string_view name);

}  // namespace lowp

#endif  // LOWP_OPTIM_RECIPE_H_
