// A model's tokenizer: text to the token ids the model was trained on.
//
// Three kinds, each read from the file a model ships:
// - `tokenizer.model`: a SentencePiece model, encoded by Debian's
//   libsentencepiece itself (tokenizer/sentencepiece.cc);
// - `tokenizer.json` whose model is BPE: Hugging Face's byte-level BPE
//   (GPT-2, Llama 3, Qwen2) and SentencePiece-style BPE with byte fallback
//   (Llama 2, Mistral, TinyLlama), with the normalizers and pre-tokenizers
//   those use (tokenizer/hf_tokenizer.cc says which, and refuses the others
//   by name);
// - llama2.c's `tok*.bin` with llama2.c's encode rule (tokenizer/llama2c.cc).
//
// Every file is untrusted input: a malformed one is InvalidArgument naming
// the file and what is wrong, never a crash.
#ifndef LOWP_TOKENIZER_TOKENIZER_H_
#define LOWP_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "tokenizer/llama_cpp_vocab.h"

namespace lowp {

// What a tokenizer is and which special tokens it uses.
struct TokenizerInfo {
  std::string path;  // the file read
  std::string kind;  // "sentencepiece", "tokenizer.json byte-level BPE", ...
  int64_t vocab_size = 0;
  int32_t bos = -1, eos = -1;  // -1: none
  bool add_bos = false;        // whether the model's text starts with BOS
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  const TokenizerInfo& info() const { return info_; }

  // The ids of `text`, no BOS or EOS added. With `parse_special`, special
  // tokens written in the text ("<s>", "<|begin_of_text|>") become their
  // ids; without (llama.cpp's perplexity), they are text like any other.
  // Errors name the tokenizer's file.
  virtual absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                                      bool parse_special = false) const = 0;
  // `text` with BOS first when info().add_bos (llama.cpp's
  // common_tokenize(ctx, text, add_special = true, parse_special)).
  absl::StatusOr<std::vector<int32_t>> Tokenize(absl::string_view text,
                                                bool parse_special = false) const;
  // The vocabulary's string for `id` (as the file writes it: "▁the",
  // "Ġthe", "<0x0A>"); empty outside the vocabulary.
  virtual std::string Piece(int32_t id) const = 0;
  // The vocabulary as llama.cpp's converter for this kind writes it
  // (tokenizer/llama_cpp_vocab.h); InvalidArgument naming the file when
  // llama.cpp cannot hold it.
  virtual absl::StatusOr<LlamaCppVocab> LlamaCppVocabulary() const = 0;

 protected:
  // BOS, EOS, add_bos (info_), add_eos and the chat template into `v`: the
  // special-token keys every kind's llama.cpp vocabulary takes alike.
  void SpecialTokensInto(LlamaCppVocab& v) const;

  TokenizerInfo info_;
  std::optional<bool> add_eos_;  // tokenizer_config.json's, where the kind reads it
  std::string chat_template_;
};

// Where the special tokens come from when the tokenizer's file does not say:
// a model's config.json (bos_token_id, eos_token_id), -1 when absent.
struct TokenizerDefaults {
  int32_t bos = -1, eos = -1;
};

// The tokenizer a model directory ships, in llama.cpp's converter's order:
// tokenizer.model, else tokenizer.json, else the one llama2.c tok*.bin; or
// the file `path` names. A directory's tokenizer_config.json (add_bos_token,
// bos_token, eos_token) and config.json (bos_token_id, eos_token_id) are
// read beside it. NotFound naming the directory when it has none.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path);

// The kinds, opened directly; `directory` ("" for none) holds
// tokenizer_config.json / config.json.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePiece(const std::string& file,
                                                             const std::string& directory);
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(const std::string& file,
                                                           const std::string& directory);
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadLlama2cTokenizer(const std::string& file,
                                                                const std::string& directory);

// The largest tokenizer file read (tokenizer.json of a 256K vocabulary is
// about 35 MB) and the largest text tokenized at once.
constexpr uint64_t kMaxTokenizerBytes = uint64_t{1} << 30;
constexpr uint64_t kMaxTextBytes = uint64_t{1} << 30;

}  // namespace lowp

#endif  // LOWP_TOKENIZER_TOKENIZER_H_
