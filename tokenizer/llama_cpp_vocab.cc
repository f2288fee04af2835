#include "tokenizer/llama_cpp_vocab.h"

#include "absl/strings/str_cat.h"

namespace lowp {

void LlamaCppVocab::PadTo(int64_t size) {
  for (int64_t id = static_cast<int64_t>(tokens.size()); id < size; ++id) {
    tokens.push_back(PadToken(id));
    if (!scores.empty()) scores.push_back(-10000.0f);
    types.push_back(static_cast<int32_t>(LlamaTokenType::kUnused));
  }
}

std::string LlamaCppVocab::PadToken(int64_t id) { return absl::StrCat("[PAD", id, "]"); }

void LlamaCppVocab::AddTo(GgufWriter& out) const {
  out.AddString("tokenizer.ggml.model", model);
  if (!pre.empty()) out.AddString("tokenizer.ggml.pre", pre);
  out.AddStringArray("tokenizer.ggml.tokens", tokens);
  if (!scores.empty()) out.AddF32Array("tokenizer.ggml.scores", scores);
  out.AddI32Array("tokenizer.ggml.token_type", types);
  if (!merges.empty()) out.AddStringArray("tokenizer.ggml.merges", merges);
  for (const auto& [key, id] : {std::pair{"tokenizer.ggml.bos_token_id", bos},
                                std::pair{"tokenizer.ggml.eos_token_id", eos},
                                std::pair{"tokenizer.ggml.unknown_token_id", unk},
                                std::pair{"tokenizer.ggml.padding_token_id", pad}}) {
    if (id >= 0) out.AddU32(key, static_cast<uint32_t>(id));
  }
  if (add_bos.has_value()) out.AddBool("tokenizer.ggml.add_bos_token", *add_bos);
  if (add_eos.has_value()) out.AddBool("tokenizer.ggml.add_eos_token", *add_eos);
  if (!chat_template.empty()) out.AddString("tokenizer.chat_template", chat_template);
}

}  // namespace lowp
