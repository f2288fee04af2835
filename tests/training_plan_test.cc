// The training plan (api/training_plan.h): each recipe's formats priced by
// the memory model give its bytes per parameter, and the figures beside them
// are update-error's on the same tensors.
#include "api/training_plan.h"

#include <string>
#include <vector>

#include "formats/option_error.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace lowp {
namespace {

TEST(TrainingPlan, EachRecipesStatesCostItsBytesPerParameter) {
  for (const TrainingRecipe& recipe : TrainingRecipes()) {
    api::SizeOptions o;
    o.model = "llama-3.1-8b";
    o.sizing.mode = Mode::kPretrain;
    api::ApplyRecipe(recipe, o.sizing);
    absl::StatusOr<SizingReport> r = api::Size(o);
    ASSERT_TRUE(r.ok()) << recipe.name << ": " << r.status();
    const double per_parameter =
        static_cast<double>(r->whole.model_states()) / static_cast<double>(r->parameters.total);
    // Within 0.5%: bitsandbytes keeps tensors under 4096 elements in fp32, and
    // fp8's scale per 256 rounds up per tensor.
    EXPECT_NEAR(per_parameter, recipe.BytesPerParameter(), 0.005 * recipe.BytesPerParameter())
        << recipe.name;
  }
}

TEST(TrainingPlan, FiguresAreUpdateErrorsAndBadJobsAreNamed) {
  api::TrainingPlanOptions o;
  o.size.model = "llama-3.1-8b";
  o.size.sizing.mode = Mode::kPretrain;
  o.measure.recipes = {"fp32-master", "bf16-rne", "bf16-sr-8bit"};
  o.measure.update.adamw.steps = 4;
  o.measure.tensors = "*layers.0.self_attn*";
  absl::StatusOr<api::TrainingPlanResult> plan = api::TrainingPlan(o);
  ASSERT_TRUE(plan.ok()) << plan.status();
  ASSERT_EQ(plan->rows.size(), 3u);
  EXPECT_EQ(plan->measured_on.size(), 1u);  // the bundled checkpoint
  api::UpdateErrorApiOptions alone = o.measure;
  alone.inputs.files = plan->measured_on;
  absl::StatusOr<api::UpdateErrorResult> direct = api::UpdateError(alone);
  ASSERT_TRUE(direct.ok()) << direct.status();
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(plan->rows[k].figures.lost, direct->aggregates[k].lost);
    EXPECT_EQ(plan->rows[k].figures.error_squared, direct->aggregates[k].error_squared);
  }
  EXPECT_GT(plan->rows[0].memory.whole.model_states(), plan->rows[2].memory.whole.model_states());
  const nlohmann::json j = api::ToJson(*plan);
  EXPECT_EQ(j["rows"][1]["recipe"], "bf16-rne");
  EXPECT_EQ(j["rows"][1]["bytes_per_parameter"], 12);
  EXPECT_TRUE(j["rows"][1]["memory"].contains("per_device"));

  o.size.sizing.mode = Mode::kInference;
  EXPECT_EQ(OptionOf(api::TrainingPlan(o).status()).value_or(""), "mode");
  o.size.sizing.mode = Mode::kPretrain;
  o.size.sizing.master = "fp32";
  EXPECT_EQ(OptionOf(api::TrainingPlan(o).status()).value_or(""), "master and recipes");
}

}  // namespace
}  // namespace lowp
