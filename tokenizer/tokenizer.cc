#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace lowp {

absl::StatusOr<std::vector<int32_t>> Tokenizer::Tokenize(absl::string_view text,
                                                         bool parse_special) const {
  absl::StatusOr<std::vector<int32_t>> ids = Encode(text, parse_special);
  if (!ids.ok() || !info_.add_bos) return ids;
  ids->insert(ids->begin(), info_.bos);
  return ids;
}

namespace {

bool IsLlama2cName(const std::string& name) {
  return name.size() > 7 && name.starts_with("tok") && name.ends_with(".bin");
}

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFile(const std::filesystem::path& file,
                                                    const std::string& directory) {
  const std::string name = file.filename().string();
  if (name.ends_with(".model")) return LoadSentencePiece(file.string(), directory);
  if (name.ends_with(".json")) return LoadHfTokenizer(file.string(), directory);
  if (name.ends_with(".bin")) return LoadLlama2cTokenizer(file.string(), directory);
  return absl::InvalidArgumentError(
      absl::StrCat(file.string(),
                   ": not a tokenizer lowp reads (tokenizer.model, "
                   "tokenizer.json or llama2.c's tok*.bin, by the name's ending)"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(path, ec)) {
    if (!fs::exists(path, ec)) {
      return absl::NotFoundError(absl::StrCat(path, ": no such tokenizer file or directory"));
    }
    // Beside a file in a snapshot: the directory's configs apply.
    return LoadFile(path, fs::path(path).parent_path().string());
  }
  for (const char* name : {"tokenizer.model", "tokenizer.json"}) {
    const fs::path file = fs::path(path) / name;
    if (fs::exists(file, ec)) return LoadFile(file, path);
  }
  std::vector<std::string> bins;
  for (const fs::directory_entry& e : fs::directory_iterator(path, ec)) {
    const std::string name = e.path().filename().string();
    if (IsLlama2cName(name)) bins.push_back(name);
  }
  std::sort(bins.begin(), bins.end());
  if (bins.size() == 1) return LoadFile(fs::path(path) / bins[0], path);
  if (bins.size() > 1) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": holds several llama2.c tokenizers (",
                                                   absl::StrJoin(bins, ", "),
                                                   "); name one with --tokenizer"));
  }
  return absl::NotFoundError(absl::StrCat(
      path,
      ": no tokenizer (tokenizer.model, tokenizer.json or llama2.c's tok*.bin); name one "
      "with --tokenizer"));
}

void Tokenizer::SpecialTokensInto(LlamaCppVocab& v) const {
  v.bos = info_.bos;
  v.eos = info_.eos;
  v.add_bos = info_.add_bos;
  v.add_eos = add_eos_;
  v.chat_template = chat_template_;
}

}  // namespace lowp
