// libFuzzer target: MergeMixShards (mix/table_file.h), lowp mix --tables'
// reader, over arbitrary shard files against a fixed table of 3 groups and
// 2 types measured on fixed tuning tokens (tests/fuzz/make_seed_corpus.py
// writes shards of it). The input is up to four files separated by NUL
// bytes, merged into an exact and a predicted table. Whatever fails must be
// InvalidArgument naming "tables"; whatever merges must fill every group's
// KL, measured flag and (predicted) weight error in every type.
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "mix/table_file.h"
#include "tests/fuzz/fuzz_check.h"

namespace lowp::fuzz {

int FuzzMixTable(const uint8_t* data, size_t size) {
  MixTable table;
  for (const auto& [name, rows, cols, count] :
       {std::tuple{"g0", 8, 32, 1}, std::tuple{"g1", 16, 32, 1}, std::tuple{"g2", 8, 64, 4}}) {
    MixGroup g;
    g.name = name;
    g.rows = rows;
    g.cols = cols;
    g.count = count;
    table.groups.push_back(g);
  }
  table.types = {"q4_0", "q8_0"};
  MixTokens tune;
  tune.ids = {1, 2, 3, 4};
  tune.length = 4;
  tune.scored_from = -1;
  tune.description = "fuzz tokens";
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::pair<std::string, std::string>> files;
  for (absl::string_view part : absl::StrSplit(input, absl::MaxSplits('\0', 3))) {
    files.emplace_back(absl::StrCat("fuzz", files.size() + 1, ".json"), std::string(part));
  }
  for (MixSensitivity method : {MixSensitivity::kExact, MixSensitivity::kPredicted}) {
    table.method = method;
    const absl::Status s = MergeMixShards(files, tune, table);
    if (!s.ok()) {
      Check(absl::IsInvalidArgument(s), "error is not InvalidArgument");
      Check(s.message().find("tables") != absl::string_view::npos,
            "an error that names no option");
      continue;
    }
    const size_t G = table.groups.size(), T = table.types.size();
    Check(table.sensitivity.size() == G && table.measured.size() == G, "a group without its KLs");
    for (size_t g = 0; g < G; ++g) {
      Check(table.sensitivity[g].size() == T && table.measured[g].size() == T,
            "a type without its KL");
    }
    const bool predicted = method == MixSensitivity::kPredicted;
    Check(predicted ? table.weight_error.size() == G : table.weight_error.empty(),
          "weight errors not the method's");
  }
  return 0;
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzMixTable(data, size);
}
#endif
