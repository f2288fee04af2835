// lowp tensors: what tensor files hold.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/tensors.h"
#include "cli/commands.h"
#include "cli/shared.h"
#include "cli/table.h"

namespace lowp::cli {

const char kTensorsHelp[] =
    "usage: lowp tensors FILES... [--tensors PATTERN] [--metadata] [--json | --csv]\n"
    "\n"
    "Lists each tensor of FILES (.safetensors, a sharded checkpoint's\n"
    ".safetensors.index.json, .gguf, .npy): name, type (safetensors' dtype or\n"
    "llama.cpp's ggml type, e.g. q4_K), shape (row-major, as safetensors writes\n"
    "it: a GGUF tensor's ne reversed), bytes and bits per weight as stored.\n"
    "--metadata: first each file's metadata: GGUF key/value pairs with their\n"
    "types (long arrays shown cut; in full with --json), or safetensors'\n"
    "__metadata__.\n"
    "--tensors: comma-separated globs ('*', '?') on tensor names.\n";

int TensorsCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {"tensors"}, {"metadata", "json", "csv"});
  if (!args.ok()) return Fail(args.status());
  if (args->positional().empty()) {
    return Fail(absl::InvalidArgumentError("tensors needs input files; see --help"));
  }
  absl::StatusOr<Output> output = ParseOutput(*args);
  if (!output.ok()) return Fail(output.status());
  api::TensorsOptions options;
  options.files = args->positional();
  options.tensors = args->Value("tensors").value_or("");
  options.metadata = args->Has("metadata");
  absl::StatusOr<api::TensorsResult> result = api::Tensors(options);
  if (!result.ok()) return Fail(result.status());
  if (*output == Output::kJson) {
    EmitJson(api::ToJson(*result));
    return 0;
  }
  const bool several = result->files.size() > 1;
  if (options.metadata && *output == Output::kTable) {
    for (const api::FileEntry& f : result->files) {
      std::printf("%s: %s", Printable(f.path).c_str(), f.format.c_str());
      if (f.format == "gguf") std::printf(" v%u, alignment %llu", f.gguf_version,
                                          static_cast<unsigned long long>(f.alignment));
      std::printf(", %zu metadata entr%s\n", f.metadata.size(), f.metadata.size() == 1 ? "y" : "ies");
      for (const api::MetadataEntry& m : f.metadata) {
        std::printf("  %s (%s) = %s\n", Printable(m.key).c_str(), m.type.c_str(),
                    Printable(m.text).c_str());
      }
      std::printf("\n");
    }
  }
  std::vector<Row> rows = {{"tensor", "type", "shape", "bytes", "bits/w"}};
  if (several) rows[0].push_back("file");
  for (const api::TensorEntry& t : result->tensors) {
    rows.push_back({Printable(t.name), t.type, absl::StrCat("[", absl::StrJoin(t.shape, ", "), "]"),
                    std::to_string(t.bytes), absl::StrFormat("%.4g", t.bits_per_weight)});
    if (several) rows.back().push_back(Printable(t.file));
  }
  if (*output == Output::kCsv) {
    PrintCsv(rows);
  } else {
    PrintTable(rows, {0, 1, 2});
    std::printf("%zu tensors, %llu elements, %llu bytes\n", result->tensors.size(),
                static_cast<unsigned long long>(result->elements),
                static_cast<unsigned long long>(result->bytes));
  }
  return 0;
}

}  // namespace lowp::cli
