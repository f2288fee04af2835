// The `lowp` subcommands. Each takes the arguments after its name and returns
// the process exit code; errors go to stderr as one line naming the problem.
#ifndef LOWP_CLI_COMMANDS_H_
#define LOWP_CLI_COMMANDS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lowp::cli {

// Splits "--name value", "--name=value" and bare flags from positionals.
class Args {
 public:
  // `value_options` take a value; `flags` do not. Anything else starting
  // with "--" is an error.
  static absl::StatusOr<Args> Parse(const std::vector<std::string>& argv,
                                    const std::vector<std::string>& value_options,
                                    const std::vector<std::string>& flags);
  std::optional<std::string> Value(absl::string_view name) const;
  bool Has(absl::string_view name) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::vector<std::pair<std::string, std::string>> values_;
  std::vector<std::string> flags_;
  std::vector<std::string> positional_;
};

int Fail(const absl::Status& status);

int FormatsCommand(const std::vector<std::string>& argv);
int ConvertCommand(const std::vector<std::string>& argv);
int SchemesCommand(const std::vector<std::string>& argv);
int QuantErrorCommand(const std::vector<std::string>& argv);
int QuantizeCommand(const std::vector<std::string>& argv);
int RangeCommand(const std::vector<std::string>& argv);
int SizeCommand(const std::vector<std::string>& argv);
int DevicesCommand(const std::vector<std::string>& argv);
int PlanCommand(const std::vector<std::string>& argv);
int EvalCommand(const std::vector<std::string>& argv);
int TensorsCommand(const std::vector<std::string>& argv);
int TokenizeCommand(const std::vector<std::string>& argv);
int ImatrixCommand(const std::vector<std::string>& argv);
int MixCommand(const std::vector<std::string>& argv);
int UpdateErrorCommand(const std::vector<std::string>& argv);

extern const char kFormatsHelp[];
extern const char kImatrixHelp[];
extern const char kUpdateErrorHelp[];
extern const char kConvertHelp[];
extern const char kSchemesHelp[];
extern const char kQuantErrorHelp[];
extern const char kQuantizeHelp[];
extern const char kRangeHelp[];
extern const char kSizeHelp[];
extern const char kDevicesHelp[];
extern const char kPlanHelp[];
extern const char kEvalHelp[];
extern const char kTensorsHelp[];
extern const char kTokenizeHelp[];
extern const char kMixHelp[];

}  // namespace lowp::cli

#endif  // LOWP_CLI_COMMANDS_H_
