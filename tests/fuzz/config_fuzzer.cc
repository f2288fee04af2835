// libFuzzer target: ParseModelConfig (a Hugging Face config.json, for the
// memory model) over arbitrary text. Whatever is accepted must pass the same
// rules a model built in code does, and its parameter counts must add up.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "model/config.h"
#include "tests/fuzz/fuzz_check.h"

namespace lowp::fuzz {

int FuzzConfig(const uint8_t* data, size_t size) {
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<ModelConfig> parsed = ParseModelConfig(json, "dir/fuzz.config.json");
  if (!parsed.ok()) {
    CheckError(parsed.status(), "dir/fuzz.config.json");
    return 0;
  }
  const ModelConfig& m = *parsed;
  Check(m.name == "dir/fuzz.config.json", "model named after the source");
  Check(ValidateModel(m).ok(), "a parsed config fails ValidateModel");
  Check(m.head_dim > 0, "head_dim not positive");
  Check(m.num_kv_heads > 0 && m.num_heads % m.num_kv_heads == 0,
        "num_key_value_heads does not divide num_attention_heads");
  std::vector<std::vector<TensorSpec>> lists = {InputTensors(m), OutputTensors(m)};
  for (const LayerKind& kind : LayerKinds(m)) lists.push_back(kind.tensors);
  for (const std::vector<TensorSpec>& tensors : lists) {
    for (const TensorSpec& t : tensors) {
      Check(t.rows > 0 && t.cols > 0 && t.count > 0, "a tensor with an empty dimension");
    }
  }
  const ParameterCounts counts = CountParameters(m);
  Check(counts.total > 0, "no parameters");
  Check(counts.embedding + counts.attention + counts.mlp + counts.router + counts.norms +
                counts.lm_head ==
            counts.total,
        "parameter counts by component do not add up to the total");
  Check(counts.active > 0 && counts.active <= counts.total, "active parameters not in (0, total]");
  return 0;
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzConfig(data, size);
}
#endif
