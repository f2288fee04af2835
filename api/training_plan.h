// The training plan (`lowp size --compare-recipes`, `lowp plan --recipes`,
// lowp.plan(recipes=...)): for each training-state recipe, the job's memory
// with the recipe's formats (lowp size) beside what the recipe does to
// AdamW's updates on real tensors (lowp update-error): the 16 / 12 / 10 / 8 /
// 6 bytes ladder with its numeric cost, as the inference plan shows bytes
// beside measured error.
#ifndef LOWP_API_TRAINING_PLAN_H_
#define LOWP_API_TRAINING_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/size.h"
#include "api/update_error.h"
#include "nlohmann/json.hpp"

namespace lowp::api {

struct TrainingPlanOptions {
  // The job: a training mode (pretrain, finetune); its weights, grads,
  // master and opt_state unset (each recipe sets them).
  SizeOptions size;
  // The measurement: recipes (empty: kDefaultTrainingRecipes), tensors,
  // AdamW and the gradient model; no inputs: the bundled stories260K
  // checkpoint.
  UpdateErrorApiOptions measure;
};

struct TrainingPlanRow {
  TrainingRecipe recipe;
  SizingReport memory;   // the job with the recipe's formats
  UpdateReport figures;  // over every measured tensor ("(all)")
};

struct TrainingPlanResult {
  std::vector<TrainingPlanRow> rows;
  std::vector<std::string> measured_on;  // the files measured ("" entries: arrays)
  UpdateErrorResult measured;            // per tensor, for --json
};

// The sizing formats of a recipe: weights, grads, master ("none" without a
// copy; the weights' format for Kahan's compensation buffer, which has the
// size of a copy), opt_state (fp32, bf16, fp8_e4m3fn-g256) and, for 8-bit
// moments, bitsandbytes' optimizer.
void ApplyRecipe(const TrainingRecipe& recipe, SizingOptions& sizing);

absl::StatusOr<TrainingPlanResult> TrainingPlan(const TrainingPlanOptions& options);
nlohmann::json ToJson(const TrainingPlanResult& result);

}  // namespace lowp::api

#endif  // LOWP_API_TRAINING_PLAN_H_
