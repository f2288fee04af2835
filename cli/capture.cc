#include "cli/capture.h"

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "cli/table.h"

namespace lowp::cli {
namespace {

struct Capture {
  std::optional<nlohmann::json> json;
  absl::Status status;
  std::optional<std::vector<TensorView>> tensors;
};

thread_local Capture* current = nullptr;

}  // namespace

absl::StatusOr<nlohmann::json> RunForJson(Command command, std::vector<std::string> argv,
                                          std::optional<std::vector<TensorView>> tensors) {
  Capture capture;
  capture.tensors = std::move(tensors);
  argv.insert(argv.begin(), "--json");
  // The capture is this call's, whatever happens in the command.
  struct Scope {
    Capture* const outer = current;
    explicit Scope(Capture* c) { current = c; }
    ~Scope() { current = outer; }
  } scope(&capture);
  const int code = command(argv);
  if (!capture.status.ok()) return capture.status;
  if (code != 0 || !capture.json) {
    return absl::InternalError("the command ended without a result");
  }
  return *std::move(capture.json);
}

void EmitJson(const nlohmann::json& j) {
  if (current != nullptr) {
    current->json = j;
    return;
  }
  // A string that is not UTF-8 (a tensor named after a file, an option value
  // echoed back) cannot be JSON as it is: dump() would throw and abort the
  // command; it is printed with U+FFFD in place of each bad byte instead.
  std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
}

bool Capturing() { return current != nullptr; }

bool HasCapturedTensors() { return current != nullptr && current->tensors.has_value(); }

absl::StatusOr<TensorSet> OpenInputs(const std::vector<std::string>& paths) {
  if (HasCapturedTensors()) return TensorSet::FromViews(*current->tensors);
  return TensorSet::OpenAll(paths);
}

int Fail(const absl::Status& status) {
  if (current != nullptr) {
    current->status = status;
    return 1;
  }
  std::fprintf(stderr, "lowp: %s\n", Printable(status.message()).c_str());
  return 1;
}

}  // namespace lowp::cli
