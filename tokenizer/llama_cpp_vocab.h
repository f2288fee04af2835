// A tokenizer's vocabulary as llama.cpp's converters write it into a GGUF
// model file (tokenizer.ggml.* keys): convert_hf_to_gguf.py for
// tokenizer.model (_create_vocab_sentencepiece) and tokenizer.json
// (_set_vocab_gpt2), convert-llama2c-to-ggml for llama2.c's tok*.bin.
#ifndef LOWP_TOKENIZER_LLAMA_CPP_VOCAB_H_
#define LOWP_TOKENIZER_LLAMA_CPP_VOCAB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "io/gguf_writer.h"

namespace lowp {

// llama.h's llama_token_type (gguf-py's TokenType).
enum class LlamaTokenType : int32_t {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct LlamaCppVocab {
  std::string model;  // tokenizer.ggml.model: "llama" (SentencePiece), "gpt2" (byte-level BPE)
  std::string pre;    // tokenizer.ggml.pre; empty: not written
  std::vector<std::string> tokens;
  std::vector<float> scores;  // empty: not written (BPE has none)
  std::vector<int32_t> types;  // LlamaTokenType per token
  std::vector<std::string> merges;  // "a b", BPE only
  // Special-token ids, -1: not written.
  int32_t bos = -1, eos = -1, unk = -1, pad = -1;
  std::optional<bool> add_bos, add_eos;
  std::string chat_template;  // empty: not written

  // Pads the vocabulary to `size` tokens as convert_hf_to_gguf.py does for
  // a model whose vocab_size exceeds its tokenizer's: "[PAD{i}]", score
  // -10000, UNUSED. Nothing when it has that many or more.
  void PadTo(int64_t size);
  // The converter's text of an id no token holds: "[PAD{id}]".
  static std::string PadToken(int64_t id);

  // The tokenizer.ggml.* keys (and tokenizer.chat_template) in the order
  // convert_hf_to_gguf.py writes them: model, pre, tokens, scores,
  // token_type, merges, bos/eos/unknown/padding ids, add_bos_token,
  // add_eos_token, chat_template; what is unset is left out.
  void AddTo(GgufWriter& out) const;
};

}  // namespace lowp

#endif  // LOWP_TOKENIZER_LLAMA_CPP_VOCAB_H_
