#include "api/training_plan.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "api/json.h"
#include "formats/option_error.h"
#include "io/bundled.h"

namespace lowp::api {

void ApplyRecipe(const TrainingRecipe& r, SizingOptions& s) {
  s.weights = r.weights.name;
  s.grads = r.grads.name;
  s.master = r.master                                     ? "fp32"
             : r.update == TrainingRecipe::Update::kKahan ? r.weights.name
                                                          : "none";
  s.optimizer = Optimizer::kAdamW;
  switch (r.moments) {
    case TrainingRecipe::Moments::kFp32:
      s.opt_state = "fp32";
      break;
    case TrainingRecipe::Moments::kBf16:
      s.opt_state = "bf16";
      break;
    case TrainingRecipe::Moments::kFp8Blocks:
      s.opt_state = "fp8_e4m3fn-g256";
      break;
    case TrainingRecipe::Moments::kDynamic8:
      s.opt_state = "fp32";  // what bitsandbytes keeps for tensors under 4096 elements
      s.optimizer = Optimizer::kAdamW8bit;
      break;
  }
}

absl::StatusOr<TrainingPlanResult> TrainingPlan(const TrainingPlanOptions& o) {
  const SizingOptions& job = o.size.sizing;
  if (job.mode != Mode::kPretrain && job.mode != Mode::kFinetune) {
    return OptionError("mode", absl::StrCat(ModeName(job.mode),
                                            ": recipes price full training (pretrain, finetune)"));
  }
  for (const auto& [value, name] : {std::pair{&job.weights, "weights"},
                                    {&job.grads, "grads"},
                                    {&job.master, "master"},
                                    {&job.opt_state, "opt_state"}}) {
    if (!value->empty()) {
      return OptionError(absl::StrCat(name, " and recipes"),
                         "exclude each other (each recipe sets the training state's formats)", " ");
    }
  }
  UpdateErrorApiOptions measure = o.measure;
  TrainingPlanResult r;
  if (measure.inputs.files.empty() && measure.inputs.arrays.empty()) {
    absl::StatusOr<std::string> bundled = BundledCheckpoint();
    if (!bundled.ok()) return bundled.status();
    measure.inputs.files = {*bundled};
  }
  r.measured_on = measure.inputs.files;
  absl::StatusOr<UpdateErrorResult> measured = UpdateError(measure);
  if (!measured.ok()) return measured.status();
  for (size_t k = 0; k < measured->recipes.size(); ++k) {
    SizeOptions size = o.size;
    ApplyRecipe(measured->recipes[k], size.sizing);
    absl::StatusOr<SizingReport> memory = Size(size);
    if (!memory.ok()) return memory.status();
    r.rows.push_back({measured->recipes[k], *std::move(memory), measured->aggregates[k]});
  }
  r.measured = *std::move(measured);
  return r;
}

nlohmann::json ToJson(const TrainingPlanResult& r) {
  nlohmann::json j;
  j["measured_on"] = r.measured_on;
  nlohmann::json rows = nlohmann::json::array();
  for (const TrainingPlanRow& row : r.rows) {
    nlohmann::json x = UpdateReportJson(row.figures, row.recipe);
    x.erase("tensor");
    x["memory"] = ToJson(row.memory);
    rows.push_back(std::move(x));
  }
  j["rows"] = std::move(rows);
  const nlohmann::json measured = ToJson(r.measured);
  j["adamw"] = measured["adamw"];
  j["gradient_model"] = measured["gradient_model"];
  j["results"] = measured["results"];
  return j;
}

}  // namespace lowp::api
