// lowp update-error: what training-state formats do to AdamW's updates.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "api/update_error.h"
#include "cli/commands.h"
#include "cli/shared.h"
#include "cli/table.h"
#include "formats/option_error.h"

namespace lowp::cli {

const char kUpdateErrorHelp[] =
    "usage: lowp update-error FILES... [--recipes R,R...] [--tensors PATTERN]\n"
    "                         [--steps N] [--lr X] [--schedule constant|cosine]\n"
    "                         [--warmup N] [--min-lr-ratio X] [--beta1 X] [--beta2 X]\n"
    "                         [--eps X] [--weight-decay X] [--grad-scale X]\n"
    "                         [--grad-signal X] [--seed N] [--threads N]\n"
    "                         [--json | --csv] [--quiet]\n"
    "       lowp update-error --list [--json]\n"
    "\n"
    "Runs N AdamW steps on each tensor of FILES (.safetensors, sharded, .npy,\n"
    ".gguf) from its values, once in float64 and once per training-state recipe\n"
    "(weights, master copy, update rounding, gradients, moments: --list names\n"
    "them with their bytes per parameter; a recipe may also be spelled\n"
    "weights=bf16+master=none+update=sr+grads=bf16+moments=8bit), with a seeded\n"
    "gradient model: g = grad-scale * rms(tensor) * (grad-signal * d +\n"
    "sqrt(1 - grad-signal^2) * z_t), d a fixed direction, z_t fresh noise.\n"
    "Per recipe: updates lost (element-steps where the reference moved and the\n"
    "stored weight, the master copy when there is one, did not), the update\n"
    "ratio (sum applied * intended / sum intended^2: 1 when updates arrive on\n"
    "average, 0 when lost), the weights' relative error after N steps (||(w -\n"
    "w0) - (p - p0)|| / ||p - p0||: 0 exact, 1 as if never trained; --json also\n"
    "at N/4, N/2, 3N/4), the moments' relative errors and a census of\n"
    "gradients and moments flushed to zero or beyond range.\n"
    "Defaults: the recipes "
    "fp32-master,bf16-kahan,bf16-rne,bf16-sr,fp32-master-8bit,\n"
    "bf16-sr-bf16-moments,bf16-sr-8bit; --steps 100, --lr 1e-4 constant, beta1 0.9,\n"
    "beta2 0.95, eps 1e-8, weight decay 0.1, grad-scale 1e-3, grad-signal 0.5,\n"
    "seed 0. Definitions: docs/training-state.md.\n";

namespace {

absl::Status ReadDouble(const Args& args, const char* name, double* out) {
  if (std::optional<std::string> v = args.Value(name)) {
    if (!absl::SimpleAtod(*v, out))
      return OptionError(name, absl::StrCat("'", *v, "' is not a number"));
  }
  return absl::OkStatus();
}

std::string Fixed(double x) { return absl::StrFormat("%.4g", x); }

}  // namespace

int UpdateErrorCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(
      argv,
      {"recipes", "tensors", "steps", "lr", "schedule", "warmup", "min-lr-ratio", "beta1", "beta2",
       "eps", "weight-decay", "grad-scale", "grad-signal", "seed", "threads"},
      {"list", "json", "csv", "quiet"});
  if (!args.ok()) return Fail(args.status());
  absl::StatusOr<Output> output = ParseOutput(*args);
  if (!output.ok()) return Fail(output.status());
  if (args->Has("list")) {
    const nlohmann::json list = api::TrainingRecipesJson();
    if (*output == Output::kJson) {
      EmitJson(list);
      return 0;
    }
    std::vector<Row> rows = {{"recipe", "bytes/param", "spelling", "what"}};
    for (const nlohmann::json& r : list) {
      rows.push_back(
          {r["recipe"], Fixed(r["bytes_per_parameter"]), r["spelling"], r["description"]});
    }
    if (*output == Output::kCsv) {
      PrintCsv(rows);
    } else {
      PrintTable(rows, {0, 2, 3});
    }
    return 0;
  }
  if (args->positional().empty()) {
    return Fail(absl::InvalidArgumentError("update-error needs input files; see --help"));
  }
  api::UpdateErrorApiOptions o;
  o.inputs.files = args->positional();
  o.tensors = args->Value("tensors").value_or("");
  absl::StatusOr<std::vector<std::string>> recipes = SplitList(*args, "recipes");
  if (!recipes.ok()) return Fail(recipes.status());
  o.recipes = *recipes;
  AdamWOptions& a = o.update.adamw;
  for (auto [name, field] : {std::pair{"lr", &a.lr},
                             {"min-lr-ratio", &a.min_lr_ratio},
                             {"beta1", &a.beta1},
                             {"beta2", &a.beta2},
                             {"eps", &a.eps},
                             {"weight-decay", &a.weight_decay},
                             {"grad-scale", &o.update.grad_scale},
                             {"grad-signal", &o.update.grad_signal}}) {
    if (absl::Status s = ReadDouble(*args, name, field); !s.ok()) return Fail(s);
  }
  if (absl::Status s = ReadCount(*args, "steps", &a.steps); !s.ok()) return Fail(s);
  if (std::optional<std::string> v = args->Value("warmup")) {
    if (!absl::SimpleAtoi(*v, &a.warmup)) {
      return Fail(OptionError("warmup", absl::StrCat("'", *v, "' is not an integer")));
    }
  }
  if (std::optional<std::string> v = args->Value("schedule")) a.schedule = *v;
  if (std::optional<std::string> v = args->Value("seed")) {
    if (!absl::SimpleAtoi(*v, &o.update.seed)) {
      return Fail(OptionError("seed", absl::StrCat("'", *v, "' is not a non-negative integer")));
    }
  }
  absl::StatusOr<int> threads = ParseThreads(*args);
  if (!threads.ok()) return Fail(threads.status());
  o.update.threads = *threads;
  std::optional<Progress> line;
  o.progress = ProgressLine(line, args->Has("quiet"));
  absl::StatusOr<api::UpdateErrorResult> result = api::UpdateError(o);
  if (!result.ok()) return Fail(result.status());
  PrintSkipped(result->skipped);
  if (*output == Output::kJson) {
    EmitJson(api::ToJson(*result));
    return 0;
  }
  std::vector<Row> rows = {{"tensor", "recipe", "bytes/param", "lost", "update ratio",
                            "weight rel err", "m rel err", "v rel err", "grad 0", "moment 0"}};
  auto add = [&](const UpdateReport& r) {
    rows.push_back({Printable(r.tensor), r.recipe, Fixed(r.bytes_per_parameter),
                    absl::StrFormat("%.2f%%", 100 * r.updates_lost()), Fixed(r.update_ratio()),
                    Fixed(r.weight_relative_error()), Fixed(r.m_relative_error()),
                    Fixed(r.v_relative_error()), std::to_string(r.census.grad_underflow),
                    std::to_string(r.census.moment_underflow)});
  };
  for (const UpdateReport& r : result->results) add(r);
  for (const UpdateReport& r : result->aggregates) add(r);
  if (*output == Output::kCsv) {
    PrintCsv(rows);
    return 0;
  }
  const AdamWOptions& used = result->update.adamw;
  std::printf("AdamW  %lld steps, lr %g (%s%s), betas %g %g, eps %g, weight decay %g\n",
              static_cast<long long>(used.steps), used.lr, used.schedule.c_str(),
              used.warmup > 0 ? absl::StrCat(", warmup ", used.warmup).c_str() : "", used.beta1,
              used.beta2, used.eps, used.weight_decay);
  std::printf("grads  grad-scale %g x rms(tensor), signal %g, seed %llu\n",
              result->update.grad_scale, result->update.grad_signal,
              static_cast<unsigned long long>(result->update.seed));
  std::printf(
      "units  lost: element-steps the reference moved and the stored weight did not;\n"
      "       weight rel err: ||(w - w0) - (p - p0)|| / ||p - p0|| after the last step\n\n");
  PrintTable(rows, {0, 1});
  return 0;
}

}  // namespace lowp::cli
