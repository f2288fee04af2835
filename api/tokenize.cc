#include "api/tokenize.h"

#include <filesystem>
#include <system_error>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "formats/option_error.h"
#include "io/bundled.h"
#include "io/mapped_file.h"

namespace lowp::api {

absl::StatusOr<std::unique_ptr<Tokenizer>> FindTokenizer(const std::string& model,
                                                         const std::string& tokenizer) {
  std::string where = tokenizer;
  if (where.empty()) where = model;
  if (where.empty()) {
    absl::StatusOr<std::string> bundled = BundledModel();
    if (!bundled.ok()) return OptionError("model", bundled.status().message());
    where = *bundled;
  } else if (tokenizer.empty() && !std::filesystem::is_directory(where)) {
    std::error_code ec;
    if (!std::filesystem::exists(where, ec)) {
      return OptionError("model", absl::StrCat(where, ": no such file or directory"));
    }
    // A config.json or checkpoint file: its directory.
    where = std::filesystem::path(where).parent_path().string();
    if (where.empty()) where = ".";
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadTokenizer(where);
  if (!t.ok()) return OptionError(tokenizer.empty() ? "model" : "tokenizer", t.status().message());
  return t;
}

absl::StatusOr<std::string> ReadText(const std::optional<std::string>& text,
                                     const std::string& path) {
  if (text) return *text;
  absl::StatusOr<std::string> read = ReadRegularFile(path, kMaxTextBytes);
  if (!read.ok()) return OptionError("text", read.status().message());
  return read;
}

absl::StatusOr<TokenizeResult> Tokenize(const TokenizeOptions& options) {
  if (options.text.has_value() == !options.text_file.empty()) {
    return OptionError("text", "give either a text file or a text");
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer =
      FindTokenizer(options.model, options.tokenizer);
  if (!tokenizer.ok()) return tokenizer.status();
  absl::StatusOr<std::string> read = ReadText(options.text, options.text_file);
  if (!read.ok()) return read.status();
  const std::string& text = *read;
  TokenizeResult r;
  r.tokenizer = (*tokenizer)->info();
  r.text = options.text ? "text" : options.text_file;
  r.bytes = text.size();
  if (options.add_bos == true && r.tokenizer.bos < 0) {
    return OptionError("add_bos", absl::StrCat("the tokenizer ", r.tokenizer.path,
                                               " has no BOS token to add"));
  }
  if (options.parse_special && r.tokenizer.kind == "sentencepiece") {
    return OptionError("parse_special",
                       absl::StrCat("changes nothing: the SentencePiece tokenizer ",
                                    r.tokenizer.path, " never reads special tokens from text"));
  }
  r.add_bos = options.add_bos.value_or(r.tokenizer.add_bos) && r.tokenizer.bos >= 0;
  absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Encode(text, options.parse_special);
  if (!ids.ok()) return ids.status();
  if (r.add_bos) ids->insert(ids->begin(), r.tokenizer.bos);
  r.ids = *std::move(ids);
  absl::flat_hash_set<int32_t> distinct(r.ids.begin(), r.ids.end());
  r.distinct = distinct.size();
  if (options.pieces) {
    r.pieces.reserve(r.ids.size());
    for (int32_t id : r.ids) r.pieces.push_back((*tokenizer)->Piece(id));
  }
  return r;
}

nlohmann::json ToJson(const TokenizerInfo& t) {
  return {{"path", t.path}, {"kind", t.kind}, {"vocab_size", t.vocab_size},
          {"bos", t.bos},   {"eos", t.eos},   {"add_bos", t.add_bos}};
}

nlohmann::json ToJson(const TokenizeResult& r) {
  nlohmann::json j;
  j["tokenizer"] = ToJson(r.tokenizer);
  j["text"] = r.text;
  j["bytes"] = r.bytes;
  j["add_bos"] = r.add_bos;
  j["tokens"] = r.ids.size();
  j["distinct"] = r.distinct;
  j["ids"] = r.ids;
  // Pieces may hold bytes that are not UTF-8 (byte tokens): the writer
  // replaces them (cli/shared.cc's EmitJson).
  if (!r.pieces.empty()) j["pieces"] = r.pieces;
  return j;
}

}  // namespace lowp::api
