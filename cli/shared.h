// What the commands share: errors named by flag, JSON on stdout, the output
// kind, the sizing options and the lists and thread count read from the
// command line.
#ifndef LOWP_CLI_SHARED_H_
#define LOWP_CLI_SHARED_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "api/eval.h"
#include "api/quant.h"
#include "api/text.h"
#include "api/training_plan.h"
#include "cli/commands.h"
#include "cli/table.h"
#include "nlohmann/json.hpp"
#include "sizing/memory.h"

namespace lowp::cli {

using api::Gb;
using api::Gib;
using api::Grouped;
using api::PercentText;
using api::SqnrText;
using api::TbPerS;

// The message of a library error with the options it names written as
// flags: an option error's leading field (formats/option_error.h) and any
// `field` in its text (seq -> --seq, lora_rank -> --lora-rank).
// `path` relative to the current directory when it lies under it (the
// bundled data's absolute path, shown short); else as it is.
std::string ShortPath(const std::string& path);

std::string FlagMessage(const absl::Status& status);

// Prints `j` (two-space indented) on stdout.
void EmitJson(const nlohmann::json& j);

// "lowp: skipped N tensor(s) that are not floating: a, b" on stderr, when
// there are any.
void PrintSkipped(const std::vector<std::string>& skipped);

enum class Output { kTable, kJson, kCsv };
// --json or --csv (not both) or the table.
absl::StatusOr<Output> ParseOutput(const Args& args);

// The value options of the memory model (--model, --mode, --weights, ...,
// --headroom); the flags are --sequence-parallel and --no-flash-attention.
const std::vector<std::string>& SizingValueOptions();
// Reads them into `o` (--mode required); InvalidArgument naming the option.
absl::Status ReadSizingOptions(const Args& args, SizingOptions* o);
// Of those, the serving job's beside the weights: --kv, --seq, --batch,
// --prefill-tokens, --buffers, --headroom (what `lowp mix --device` takes).
const std::vector<std::string>& JobValueOptions();
absl::Status ReadJobOptions(const Args& args, SizingOptions* o);

// --NAME as a count (an integer >= 1) into `out`, left alone when absent;
// InvalidArgument naming the option otherwise.
absl::Status ReadCount(const Args& args, const char* name, int64_t* out);

// The training plan's table (lowp size --compare-recipes, lowp plan
// --recipes): a header naming the job and the measurement, then one row per
// recipe, or the rows as CSV.
void PrintTrainingPlan(const api::TrainingPlanResult& result, bool csv);

// The measurement options a training plan shares with update-error
// (--recipes, --recipe-tensors, --steps, --lr, --seed) into `o`; their names
// for Args::Parse.
absl::Status ReadRecipeOptions(const Args& args, api::UpdateErrorApiOptions& o);
std::vector<std::string> RecipeOptionNames();

// A progress line per tensor, made on the first one (it learns the count).
api::ProgressFn ProgressLine(std::optional<Progress>& line, bool quiet);

// --threads: 0 (every core, the default) to 1024.
absl::StatusOr<int> ParseThreads(const Args& args);

// The token options of eval (and mix's, under `prefix`: "tune-"; the
// calibration's, "calib-"): --text [--ctx --chunks --tokenizer] | --tokens |
// --sample, and --seed, into `o`'s token fields; InvalidArgument naming the
// flag. With `text_by_default` (the calibration's bundled text), --ctx,
// --chunks and --tokenizer need no --text. TokenOptionNames lists those
// flags for Args::Parse.
absl::Status ReadTokenOptions(const Args& args, const std::string& prefix, api::TokenOptions& o,
                              bool text_by_default = false);
std::vector<std::string> TokenOptionNames(const std::string& prefix);

// "A,B,C" split at the commas outside parentheses, so that user-defined
// formats keep theirs ("float(e=4,m=3,bias=7,inf=fn),bf16" is two names).
std::vector<std::string> SplitNames(absl::string_view text);

// --NAME A,B,C as a list (empty when absent); an empty or repeated item is an
// error naming the option.
absl::StatusOr<std::vector<std::string>> SplitList(const Args& args, absl::string_view name);

}  // namespace lowp::cli

#endif  // LOWP_CLI_SHARED_H_
