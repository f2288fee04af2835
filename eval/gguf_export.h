// A model whose matrices a rule variant makes (eval/variant.h: a scheme, a
// recipe or PATTERN=SCHEME rules, calibrated by GPTQ or not) written as the
// GGUF file llama.cpp runs: each matrix in its llama.cpp type as the
// variant's own bytes (the values `lowp eval` measured, not re-rounded),
// laid out as convert_hf_to_gguf.py lays the model out (model/gguf_layout.h:
// names, q/k rows permuted for architecture "llama", Gemma's norms plus 1,
// Mixtral's experts merged into ffn_*_exps, norms and biases F32), with the
// tokenizer's vocabulary. Made and written a layer at a time (memory: one
// layer, as the evaluator's).
#ifndef LOWP_EVAL_GGUF_EXPORT_H_
#define LOWP_EVAL_GGUF_EXPORT_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "eval/variant.h"
#include "io/output_file.h"
#include "model/checkpoint.h"
#include "tokenizer/llama_cpp_vocab.h"

namespace lowp {

struct GgufExportOptions {
  std::string name;  // general.name
  // general.file_type: a recipe's (llama-quantize's value for it); none:
  // the "mostly" type of the most elements among the matrices.
  std::optional<uint32_t> file_type;
  int threads = 1;
  std::function<void(size_t steps, const std::string& what)> progress;
};

// Writes `model` as `variant` (made from `rules`) makes it to `out` (not
// committed). Before any byte: InvalidArgument naming the matrix and scheme
// for a scheme with no llama.cpp type (lowp's int4-g128, OCP mxfp4, rotated
// schemes...), an architecture with no GGUF layout, or a vocabulary larger
// than the model's; the vocabulary is padded to vocab_size as the converter
// pads it.
absl::Status WriteGgufModel(const Checkpoint& model, WeightVariant& variant,
                            std::span<const WeightRule> rules, bool with_importance,
                            LlamaCppVocab vocab, const GgufExportOptions& options,
                            OutputFile& out);

}  // namespace lowp

#endif  // LOWP_EVAL_GGUF_EXPORT_H_
