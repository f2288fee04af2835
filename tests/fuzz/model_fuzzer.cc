// libFuzzer target: a checkpoint opened for the forward pass
// (Checkpoint::Open) and run (ReferenceLogits, Evaluate) from an arbitrary
// config.json and safetensors image. The input is a 4-byte little-endian
// length, that many bytes of config.json, then the safetensors file.
// Whatever opens must run three tokens to finite or non-finite logits of the
// right count without a crash, and every error must name the config or the
// file.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/strings/string_view.h"
#include "eval/evaluate.h"
#include "io/safetensors.h"
#include "io/tensor_set.h"
#include "model/checkpoint.h"
#include "model/config.h"
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
  absl::StatusOr<Checkpoint> model = Checkpoint::Open(*config, *std::move(set));
  if (!model.ok()) {
    const absl::string_view m = model.status().message();
    Check(m.find("fuzz/config.json") != absl::string_view::npos ||
              m.find("fuzz.safetensors") != absl::string_view::npos,
          "a load error names neither the config nor the file");
    return 0;
  }
  const ModelConfig& c = model->config();
  std::vector<int32_t> tokens = {0, static_cast<int32_t>(c.vocab_size - 1), 0};
  EvalRun run;
  run.threads = 1;
  absl::StatusOr<std::vector<float>> logits = ReferenceLogits(*model, tokens, 3, run);
  if (c.max_position_embeddings > 0 && c.max_position_embeddings < 3) {
    Check(!logits.ok(), "a sequence longer than max_position_embeddings was run");
    return 0;
  }
  Check(logits.ok(), "forward failed");
  Check(logits->size() == tokens.size() * static_cast<size_t>(c.vocab_size),
        "the logits are not [tokens, vocab]");
  // The same tokens through the evaluator with one emulated site, float32 and
  // a cast of every matrix: whatever the values, a report or a clear error.
  EvalCandidate candidate;
  candidate.label = "bf16";
  candidate.weights = "*=bf16";
  candidate.weight_rules.push_back({"*", std::shared_ptr<const Scheme>(*ParseScheme("bf16")), {}});
  absl::StatusOr<EvalReport> report = Evaluate(*model, tokens, 3, {candidate}, run);
  Check(report.ok() || report.status().message().find("non-finite") != absl::string_view::npos,
        "the evaluator failed on a loaded model");
  // A token past the vocabulary is an error, not a read out of bounds.
  tokens[1] = static_cast<int32_t>(c.vocab_size);
  Check(!ReferenceLogits(*model, tokens, 3, run).ok(), "a bad token was accepted");
  return 0;
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzModel(data, size);
}
#endif
