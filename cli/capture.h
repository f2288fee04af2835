// Running a command for the JSON it prints, as a value: the Python bindings
// call the commands this way, so their results carry the command line's
// fields and every check of its options, by construction.
//
// While a capture runs on a thread, the commands' EmitJson hands their JSON
// to it instead of printing, Fail records the error instead of printing it,
// and OpenInputs gives the tensors the caller passed (in memory) instead of
// opening the files named on the command line.
#ifndef LOWP_CLI_CAPTURE_H_
#define LOWP_CLI_CAPTURE_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cli/commands.h"
#include "nlohmann/json.hpp"
#include "io/tensor.h"
#include "io/tensor_set.h"

namespace lowp::cli {

using Command = int (*)(const std::vector<std::string>& argv);

// Runs `command` with "--json" and `argv`; returns its JSON, or the error it
// failed with. With `tensors`, the command measures those instead of files
// (argv then names none).
absl::StatusOr<nlohmann::json> RunForJson(Command command, std::vector<std::string> argv,
                                          std::optional<std::vector<TensorView>> tensors = {});

// Prints `j` (two-space indented) on stdout, or hands it to the capture.
void EmitJson(const nlohmann::json& j);

// Whether a capture runs on this thread (progress lines are then not shown).
bool Capturing();

// Whether a capture passed tensors in memory (the command then needs no
// input files).
bool HasCapturedTensors();

// The command's input tensors: the captured ones, or the files given.
absl::StatusOr<TensorSet> OpenInputs(const std::vector<std::string>& paths);

}  // namespace lowp::cli

#endif  // LOWP_CLI_CAPTURE_H_
