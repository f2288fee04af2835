// llama.cpp's tensor names (convert_hf_to_gguf.py, gguf-py's tensor_mapping)
// against Hugging Face's, for comparing a GGUF file with the checkpoint it was
// converted from, and the row order llama.cpp's converter gives q and k.
#ifndef LOWP_IO_GGUF_NAMES_H_
#define LOWP_IO_GGUF_NAMES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace lowp {

// The Hugging Face name of a llama.cpp tensor of the llama family (llama,
// mistral, qwen2/3, gemma's shared names): "blk.3.attn_q.weight" ->
// "model.layers.3.self_attn.q_proj.weight", "token_embd.weight" ->
// "model.embed_tokens.weight", "output.weight" -> "lm_head.weight". None for
// names with no one-to-one counterpart (merged experts "ffn_*_exps",
// "rope_freqs") or not llama.cpp's.
std::optional<std::string> HuggingFaceName(absl::string_view gguf_name);

// The inverse: llama.cpp's name of a Hugging Face tensor of the llama family
// ("model.layers.3.self_attn.q_proj.weight" -> "blk.3.attn_q.weight"), for
// messages; none where HuggingFaceName has no counterpart.
std::optional<std::string> LlamaCppName(absl::string_view hf_name);

// llama.cpp's converter (LlamaModel.permute) reorders the rows of attn_q
// (with the head count) and attn_k (with the kv-head count) for its rope: in
// each head of d rows, stored row 2 b + a holds original row a d / 2 + b.
// The original row of each stored row, or empty when `rows` is not `heads`
// heads of an even row count.
std::vector<int64_t> LlamaRopeRowOrder(int64_t rows, int64_t heads);

}  // namespace lowp

#endif  // LOWP_IO_GGUF_NAMES_H_
