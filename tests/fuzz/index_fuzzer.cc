// libFuzzer target: ParseSafetensorsIndex (a sharded checkpoint's
// *.safetensors.index.json) over arbitrary text. Shard names are untrusted:
// whatever is accepted must be a plain file name.
#include <cstddef>
#include <cstdint>
#include <set>
#include <span>
#include <string>

#include "io/safetensors.h"
#include "tests/fuzz/fuzz_check.h"

namespace lowp::fuzz {

int FuzzIndex(const uint8_t* data, size_t size) {
  absl::StatusOr<ParsedSafetensorsIndex> parsed =
      ParseSafetensorsIndex(std::span<const uint8_t>(data, size), "fuzz.safetensors.index.json");
  if (!parsed.ok()) {
    CheckError(parsed.status(), "fuzz.safetensors.index.json");
    return 0;
  }
  std::set<std::string> shards(parsed->shards.begin(), parsed->shards.end());
  Check(shards.size() == parsed->shards.size(), "a shard listed twice");
  std::set<std::string> tensors;
  for (const auto& [tensor, shard] : parsed->weight_map) {
    Check(tensors.insert(tensor).second, "a tensor mapped twice");
    Check(shards.count(shard) == 1, "a mapped shard missing from the shard list");
    // ".." inside a name ("m..safetensors") stays in the directory; only a
    // path separator or the names "." and ".." leave it.
    Check(!shard.empty() && shard.find('/') == std::string::npos &&
              shard.find('\\') == std::string::npos && shard.find('\0') == std::string::npos &&
              shard != "." && shard != "..",
          "a shard name that is not a plain file name");
  }
  return 0;
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzIndex(data, size);
}
#endif
