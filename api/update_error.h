// What training-state formats do to AdamW's updates (`lowp update-error`,
// lowp.update_error): every recipe of optim/recipe.h run on a checkpoint's
// tensors beside a float64 AdamW (optim/update_error.h).
#ifndef LOWP_API_UPDATE_ERROR_H_
#define LOWP_API_UPDATE_ERROR_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/quant.h"
#include "nlohmann/json.hpp"
#include "optim/recipe.h"
#include "optim/update_error.h"

namespace lowp::api {

// The recipes measured when none are named: the ladder from 16 to 6 bytes.
inline constexpr char kDefaultTrainingRecipes[] =
    "fp32-master,bf16-kahan,bf16-rne,bf16-sr,fp32-master-8bit,bf16-sr-bf16-moments,bf16-sr-8bit";

struct UpdateErrorApiOptions {
  TensorInputs inputs;
  std::string tensors;               // comma-separated globs; empty: every floating tensor
  std::vector<std::string> recipes;  // names or spellings; empty: kDefaultTrainingRecipes
  UpdateErrorOptions update;         // AdamW, the gradient model, threads
  ProgressFn progress;
};

struct UpdateErrorResult {
  UpdateErrorOptions update;
  std::vector<TrainingRecipe> recipes;
  std::vector<UpdateReport> results;     // per tensor and recipe
  std::vector<UpdateReport> aggregates;  // per recipe over every tensor ("(all)")
  std::vector<std::string> skipped;      // selected but not floating
};

absl::StatusOr<UpdateErrorResult> UpdateError(const UpdateErrorApiOptions& options);
// One report's fields (tensor, recipe, spelling, bytes_per_parameter,
// updates_lost, update_ratio, weight_relative_error and its steps, the
// moments' errors, census).
nlohmann::json UpdateReportJson(const UpdateReport& report, const TrainingRecipe& recipe);
nlohmann::json ToJson(const UpdateErrorResult& result);

// `lowp update-error --list`: each named recipe with its spelling,
// description and bytes per parameter.
nlohmann::json TrainingRecipesJson();

}  // namespace lowp::api

#endif  // LOWP_API_UPDATE_ERROR_H_
