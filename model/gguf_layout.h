// A model as llama.cpp's converter (convert_hf_to_gguf.py) lays it out in a
// GGUF file: the architecture it names, the hyperparameter keys it writes
// for it, in its order and value types (llama.cpp's loader checks the
// types), and llama-quantize's general.file_type.
#ifndef LOWP_MODEL_GGUF_LAYOUT_H_
#define LOWP_MODEL_GGUF_LAYOUT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codecs/ggml.h"
#include "io/gguf_writer.h"
#include "model/config.h"

namespace lowp {

// general.architecture for `config`: "llama" for llama, mistral and mixtral,
// the model_type for qwen2, qwen3, gemma and gemma2. InvalidArgument naming
// model_type for a model llama.cpp's converter does not map here (GPT's
// learned positions), or one whose rope_scaling llama.cpp would run
// differently.
absl::StatusOr<std::string> LlamaCppArchitecture(const ModelConfig& config);

// What llama.cpp runs differently from the model a file of `config` holds,
// for the writer to say (gpt-oss's YaRN without truncation, Phi-3's long
// factors by context size); empty for most models.
std::vector<std::string> LlamaCppNotes(const ModelConfig& config);

// Whether the converter permutes q's and k's rows for llama.cpp's rope
// (architecture "llama"; LlamaRopeRowOrder, io/gguf_names.h).
bool LlamaCppPermutesQk(const ModelConfig& config);

// The keys before the tokenizer's: general.architecture, general.type,
// general.name, the architecture's hyperparameters, general.file_type,
// the subclass's extras, general.quantization_version (2). `vocab_size` is
// the vocabulary the file's tokenizer keys hold.
absl::Status AddLlamaCppModelKeys(const ModelConfig& config, absl::string_view name,
                                  uint32_t file_type, GgufWriter& out);

// llama_ftype of a llama-quantize recipe name ("Q4_K_M" -> 15), none for
// another name.
std::optional<uint32_t> LlamaCppRecipeFileType(absl::string_view recipe);
// The "mostly" llama_ftype of a file whose matrices are mostly `type`
// (Q4_K -> MOSTLY_Q4_K_M, as llama.cpp's loader guesses it); none for a type
// no file type names.
std::optional<uint32_t> LlamaCppTypeFileType(ggml::Type type);

}  // namespace lowp

#endif  // LOWP_MODEL_GGUF_LAYOUT_H_
