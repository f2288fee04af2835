// libFuzzer target: a checkpoint read for the forward pass (LoadWeights) and
// run (Forward) from an arbitrary config.json and safetensors image. The
// input is a 4-byte little-endian length, that many bytes of config.json,
// then the safetensors file. Whatever loads must run three tokens to finite
// or non-finite logits of the right count without a crash, and every error
// must name the config or the file.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/strings/string_view.h"
#include "io/safetensors.h"
#include "io/tensor_set.h"
#include "model/config.h"
#include "model/forward.h"
#include "model/weights.h"
#include "tests/fuzz/fuzz_check.h"

namespace lowp::fuzz {

int FuzzModel(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint32_t config_size = static_cast<uint32_t>(data[0]) | data[1] << 8 | data[2] << 16 |
                               static_cast<uint32_t>(data[3]) << 24;
  if (config_size > size - 4) return 0;
  const absl::string_view json(reinterpret_cast<const char*>(data + 4), config_size);
  absl::StatusOr<ModelConfig> config = ParseModelConfig(json, "fuzz/config.json");
  if (!config.ok()) return 0;  // config_fuzzer covers the parser
  const std::span<const uint8_t> file(data + 4 + config_size, size - 4 - config_size);
  absl::StatusOr<ParsedSafetensors> parsed = ParseSafetensors(file, "fuzz.safetensors");
  if (!parsed.ok()) return 0;  // safetensors_fuzzer covers it
  absl::StatusOr<TensorSet> set = TensorSet::FromViews(parsed->tensors);
  if (!set.ok()) return 0;
  absl::StatusOr<ModelWeights> weights = LoadWeights(*config, *set);
  if (!weights.ok()) {
    const absl::string_view m = weights.status().message();
    Check(m.find("fuzz/config.json") != absl::string_view::npos ||
              m.find("fuzz.safetensors") != absl::string_view::npos,
          "a load error names neither the config nor the file");
    return 0;
  }
  const ModelConfig& c = weights->config;
  std::vector<int32_t> tokens = {0, static_cast<int32_t>(c.vocab_size - 1), 0};
  KvCache cache;
  std::vector<float> logits(tokens.size() * static_cast<size_t>(c.vocab_size));
  Census census;
  LayerTrace trace;
  Check(Forward(*weights, {}, tokens, cache, logits, &census, &trace).ok(), "forward failed");
  Check(cache.positions == 3, "the cache does not hold the three positions");
  Check(trace.hidden.size() == static_cast<size_t>(c.num_layers), "a layer is missing");
  // A token past the vocabulary is an error, not a read out of bounds.
  tokens[1] = static_cast<int32_t>(c.vocab_size);
  Check(!Forward(*weights, {}, tokens, cache, logits).ok(), "a bad token was accepted");
  return 0;
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzModel(data, size);
}
#endif
