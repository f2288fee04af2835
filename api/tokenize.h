// A model's tokenizer on a text (`lowp tokenize`, lowp.tokenize): the ids
// the evaluator will read, for a user to check before trusting a
// perplexity; and the one place the api finds a model's tokenizer and reads
// a text file, which eval and plan share.
#ifndef LOWP_API_TOKENIZE_H_
#define LOWP_API_TOKENIZE_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "tokenizer/tokenizer.h"

namespace lowp::api {

struct TokenizeOptions {
  std::string text_file;            // the text, read whole (at most kMaxTextBytes)
  std::optional<std::string> text;  // or the text itself
  // A snapshot directory whose tokenizer is used (its tokenizer.model,
  // tokenizer.json or tok*.bin); empty: the bundled stories260K-hf's.
  std::string model;
  std::string tokenizer;        // a tokenizer file (or directory), over `model`'s
  bool parse_special = false;   // special tokens written in the text become theirs
  std::optional<bool> add_bos;  // default: as the tokenizer says
  bool pieces = false;          // also each id's vocabulary string
};

struct TokenizeResult {
  TokenizerInfo tokenizer;
  std::string text;  // the file, or "text"
  uint64_t bytes = 0;
  bool add_bos = false;
  std::vector<int32_t> ids;
  std::vector<std::string> pieces;  // with TokenizeOptions::pieces
  uint64_t distinct = 0;            // different ids
};

absl::StatusOr<TokenizeResult> Tokenize(const TokenizeOptions& options);
nlohmann::json ToJson(const TokenizeResult& result);
// A tokenizer as the JSON results name it (path, kind, vocab_size, bos,
// eos, add_bos).
nlohmann::json ToJson(const TokenizerInfo& info);

// The tokenizer of `model` (a directory; empty: the bundled stories260K-hf)
// or the file or directory `tokenizer` names.
absl::StatusOr<std::unique_ptr<Tokenizer>> FindTokenizer(const std::string& model,
                                                         const std::string& tokenizer);
// `text` when given, else the file `path` read whole; errors name the file.
absl::StatusOr<std::string> ReadText(const std::optional<std::string>& text,
                                     const std::string& path);

}  // namespace lowp::api

#endif  // LOWP_API_TOKENIZE_H_
