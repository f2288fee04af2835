// A llama.cpp GGUF file's tensors under the Hugging Face names of the
// model it was converted from (convert_hf_to_gguf.py's mapping undone), for
// reading the file as a checkpoint or a --weights-file candidate: merged
// experts as each expert's matrix, Phi-3's fused attn_qkv and ffn_up as
// their parts, q and k rows in llama.cpp's rope order for architecture
// "llama", Qwen2-MoE's shared-expert gate as its [1, hidden] matrix.
#ifndef LOWP_MODEL_GGUF_INDEX_H_
#define LOWP_MODEL_GGUF_INDEX_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "io/tensor.h"
#include "io/tensor_set.h"
#include "model/config.h"

namespace lowp {

// The architecture llama.cpp's converter writes for a Hugging Face
// model_type: "llama" for mistral and mixtral, "qwen2moe", "qwen3moe",
// "gpt-oss", "deepseek2"; the model_type itself for the others.
absl::string_view LlamaCppArchitectureName(absl::string_view model_type);

// The file checked against the model before its layout is trusted: its
// general.architecture must be there, a string, and the model's (llama.cpp
// refuses a file without one; a file of another architecture stores q and k
// in another row order), and the hyperparameters it states must be the
// config's. InvalidArgument naming the file and the key otherwise.
absl::Status CheckGgufModel(const TensorSet& set, const ModelConfig& config);

// One Hugging Face name a GGUF tensor serves.
struct GgufTensorName {
  std::string name;
  // A view of part of the tensor (one expert's rows, a fused tensor's part,
  // a vector as a one-row matrix); none: the tensor itself.
  std::optional<TensorView> view;
  // The original row of each stored row (q and k of architecture "llama");
  // empty: the same order.
  std::vector<int64_t> row_of;
};

// The names tensor `t` of a GGUF file of `config`'s model serves: none for
// a tensor with no Hugging Face counterpart (rope_freqs); InvalidArgument
// naming the tensor for one lowp does not read back (DeepSeek's attn_k_b and
// attn_v_b, the split of kv_b).
absl::StatusOr<std::vector<GgufTensorName>> GgufTensorNames(const TensorView& t,
                                                            const ModelConfig& config);

}  // namespace lowp

#endif  // LOWP_MODEL_GGUF_INDEX_H_
