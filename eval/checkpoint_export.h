// A model whose decoder matrices a rule variant makes (eval/variant.h: a
// scheme or PATTERN=SCHEME rules, calibrated by GPTQ or not) written as the
// quantized Hugging Face checkpoint vLLM and transformers load, each matrix
// as the variant's own codes and scales (the values `lowp eval` measured,
// not re-rounded), packed as io/packed_writer.h lays them out:
//
//   compressed-tensors  what llm-compressor writes: intN groups, channel or
//                       tensor ("pack-quantized", zero points when
//                       asymmetric, weight_g_idx with act-order), FP8 E4M3
//                       per tensor, channel, group or 2-D block
//                       ("float-quantized"), NVFP4 ("nvfp4-pack-quantized");
//                       a config group per distinct scheme.
//   gptq                AutoGPTQ's v1 layout (checkpoint_format "gptq", the
//                       one vLLM reads): intN-gG or intN-channel with fp16
//                       scales, symmetric or not, act-order as g_idx; one
//                       scheme for every decoder linear layer (its config
//                       holds one).
//
// The output is a new directory: model.safetensors (the embedding, norms,
// lm_head and every matrix no rule takes copied as stored), config.json
// with its quantization_config, and the model's tokenizer and generation
// files copied. Made and written a layer at a time (memory: one layer, as
// the evaluator's). Refused before any byte, naming the matrix and scheme:
// a scheme the format has no layout for (llama.cpp's types, MX, NF4,
// rotations, casts), a rule that takes the embedding or lm_head (vLLM
// loads them unquantized), and what the format cannot hold (GPTQ v1's zero
// point 0, bf16 scales in GPTQ...).
#ifndef LOWP_EVAL_CHECKPOINT_EXPORT_H_
#define LOWP_EVAL_CHECKPOINT_EXPORT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "eval/variant.h"
#include "io/output_file.h"
#include "model/checkpoint.h"

namespace lowp {

enum class CheckpointFormat : uint8_t { kCompressedTensors, kGptq };

// "compressed-tensors" or "gptq"; InvalidArgument listing both otherwise.
absl::StatusOr<CheckpointFormat> ParseCheckpointFormat(absl::string_view name);
const char* CheckpointFormatName(CheckpointFormat format);

struct CheckpointExportOptions {
  CheckpointFormat format = CheckpointFormat::kCompressedTensors;
  // The model's directory: config.json and the tokenizer files come from it.
  std::string model_dir;
  std::map<std::string, std::string> metadata;  // the safetensors header's
  int threads = 1;
  std::function<void(size_t steps, const std::string& what)> progress;
};

// Writes `model` as `variant` (made from `rules`) makes it into `out` (not
// committed). Returns notes on what the files read back differently from
// the variant's values: NVFP4's global scale, which compressed-tensors
// divides by where lowp multiplies by its inverse, leaves some blocks one
// float32 rounding away (their count is said).
absl::StatusOr<std::vector<std::string>> WriteQuantizedCheckpoint(
    const Checkpoint& model, WeightVariant& variant, std::span<const WeightRule> rules,
    bool with_importance, const CheckpointExportOptions& options, OutputDirectory& out);

}  // namespace lowp

#endif  // LOWP_EVAL_CHECKPOINT_EXPORT_H_
