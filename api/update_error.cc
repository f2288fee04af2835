#include "api/update_error.h"

#include <utility>

#include "absl/strings/str_split.h"
#include "api/inputs.h"
#include "formats/option_error.h"
#include "io/tensor.h"

namespace lowp::api {
nlohmann::json UpdateReportJson(const UpdateReport& r, const TrainingRecipe& recipe) {
  nlohmann::json j;
  j["tensor"] = r.tensor;
  j["recipe"] = r.recipe;
  j["spelling"] = recipe.Spelling();
  j["bytes_per_parameter"] = r.bytes_per_parameter;
  j["elements"] = r.elements;
  j["updates_lost"] = r.updates_lost();
  j["update_ratio"] = r.update_ratio();
  j["weight_relative_error"] = r.weight_relative_error();
  nlohmann::json by_step = nlohmann::json::array();
  for (size_t k = 0; k < r.checkpoints.size(); ++k) {
    by_step.push_back({{"step", r.checkpoints[k]}, {"value", r.weight_relative_error(k)}});
  }
  j["weight_relative_error_by_step"] = by_step;
  j["m_relative_error"] = r.m_relative_error();
  j["v_relative_error"] = r.v_relative_error();
  j["census"] = {{"grad_underflow", r.census.grad_underflow},
                 {"grad_overflow", r.census.grad_overflow},
                 {"moment_underflow", r.census.moment_underflow},
                 {"moment_overflow", r.census.moment_overflow}};
  return j;
}

absl::StatusOr<UpdateErrorResult> UpdateError(const UpdateErrorApiOptions& o) {
  if (absl::Status s = ValidateUpdateError(o.update); !s.ok()) return s;
  UpdateErrorResult r;
  r.update = o.update;
  std::vector<std::string> names = o.recipes;
  if (names.empty()) names = absl::StrSplit(kDefaultTrainingRecipes, ',');
  for (const std::string& name : names) {
    absl::StatusOr<TrainingRecipe> recipe = ParseTrainingRecipe(name);
    if (!recipe.ok()) return OptionError("recipes", recipe.status().message());
    r.recipes.push_back(*std::move(recipe));
  }
  absl::StatusOr<TensorSet> set = Open(o.inputs);
  if (!set.ok()) return set.status();
  absl::StatusOr<std::vector<const TensorView*>> selected = Select(*set, o.tensors, o.inputs.files);
  if (!selected.ok()) return selected.status();
  r.aggregates.resize(r.recipes.size());
  for (size_t k = 0; k < r.recipes.size(); ++k) {
    r.aggregates[k].tensor = "(all)";
    r.aggregates[k].recipe = r.recipes[k].name;
    r.aggregates[k].bytes_per_parameter = r.recipes[k].BytesPerParameter();
    r.aggregates[k].steps = o.update.adamw.steps;
    r.aggregates[k].checkpoints = UpdateCheckpoints(o.update.adamw.steps);
  }
  uint64_t index = 0;
  for (const TensorView* t : *selected) {
    if (!IsFloating(t->dtype)) {
      r.skipped.push_back(t->name);
      continue;
    }
    if (o.progress) o.progress(selected->size(), t->name);
    // Each block read is handed back to the system (kept in the page cache:
    // the second pass reads it again), so resident memory stays a block's.
    const TensorSet& files = *set;
    const ValueReader read = [t, &files](int64_t first, std::span<float> out) {
      absl::Status s = ReadAsFloat32(*t, first, out);
      files.Release(ElementBytes(*t, first, static_cast<int64_t>(out.size())), /*keep_cached=*/true);
      return s;
    };
    std::vector<UpdateReport> reports(r.recipes.size());
    if (absl::Status s =
            MeasureUpdates(t->name, t->elements(), read, index++, o.update, r.recipes, reports);
        !s.ok()) {
      return s;
    }
    for (size_t k = 0; k < reports.size(); ++k) {
      r.aggregates[k].Merge(reports[k]);
      r.results.push_back(std::move(reports[k]));
    }
  }
  return r;
}

nlohmann::json ToJson(const UpdateErrorResult& r) {
  const AdamWOptions& a = r.update.adamw;
  nlohmann::json j;
  j["adamw"] = {{"lr", a.lr},
                {"beta1", a.beta1},
                {"beta2", a.beta2},
                {"eps", a.eps},
                {"weight_decay", a.weight_decay},
                {"steps", a.steps},
                {"schedule", a.schedule},
                {"warmup", a.warmup},
                {"min_lr_ratio", a.min_lr_ratio}};
  j["gradient_model"] = {
      {"grad_scale", r.update.grad_scale},
      {"grad_signal", r.update.grad_signal},
      {"seed", r.update.seed},
      {"rule",
       "g = grad_scale * rms(tensor) * (grad_signal * d + sqrt(1 - grad_signal^2) * z_t): "
       "d persistent, z_t fresh each step, unit-variance hash draws (optim/update_error.h)"}};
  nlohmann::json recipes = nlohmann::json::array(), results = nlohmann::json::array();
  for (size_t k = 0; k < r.aggregates.size(); ++k) {
    recipes.push_back(UpdateReportJson(r.aggregates[k], r.recipes[k]));
  }
  for (size_t i = 0; i < r.results.size(); ++i) {
    results.push_back(UpdateReportJson(r.results[i], r.recipes[i % r.recipes.size()]));
  }
  j["recipes"] = recipes;
  j["results"] = results;
  j["skipped"] = r.skipped;
  return j;
}

nlohmann::json TrainingRecipesJson() {
  nlohmann::json list = nlohmann::json::array();
  for (const TrainingRecipe& recipe : TrainingRecipes()) {
    list.push_back({{"recipe", recipe.name},
                    {"spelling", recipe.Spelling()},
                    {"description", recipe.description},
                    {"bytes_per_parameter", recipe.BytesPerParameter()}});
  }
  return list;
}

}  // namespace lowp::api
