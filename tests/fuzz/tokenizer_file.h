// What the tokenizer fuzz targets (tokenizer, tokenizer_json, sentencepiece)
// check of one tokenizer file and text: whatever loads must encode the text
// (or refuse it with an error naming the file) into ids inside its
// vocabulary, BOS first when it adds one; whatever fails must name the file.
#ifndef LOWP_TESTS_FUZZ_TOKENIZER_FILE_H_
#define LOWP_TESTS_FUZZ_TOKENIZER_FILE_H_

#include <stdlib.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "tests/fuzz/fuzz_check.h"
#include "tokenizer/tokenizer.h"

namespace lowp::fuzz {

// An input laid out as `header` bytes, four (little-endian) giving a file's
// length, the file, then a text: the file (cut short at the input's end)
// and the text.
struct FileAndText {
  absl::string_view file, text;
};
inline FileAndText SplitFileAndText(const uint8_t* data, size_t size, size_t header) {
  if (size < header + 4) return {};
  const uint8_t* n = data + header;
  const size_t length = std::min<size_t>(n[0] | n[1] << 8 | n[2] << 16 | uint32_t{n[3]} << 24,
                                         size - header - 4);
  const auto* bytes = reinterpret_cast<const char*>(data) + header + 4;
  return {absl::string_view(bytes, length),
          absl::string_view(bytes + length, size - header - 4 - length)};
}

// One directory per process for the file the loaders read.
inline const std::string& TokenizerScratchDir() {
  static const std::string dir = [] {
    char name[] = "/tmp/lowp-tokenizer-fuzz-XXXXXX";
    const char* made = mkdtemp(name);
    return std::string(made != nullptr ? made : "/tmp");
  }();
  return dir;
}

// `file` written as `name` (tokenizer.json, tok.bin, tokenizer.model), loaded
// and run on `text` with and without parsing special tokens.
inline int FuzzTokenizerFile(const char* name, absl::string_view file, absl::string_view text) {
  const std::string path = TokenizerScratchDir() + "/" + name;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(file.data(), static_cast<std::streamsize>(file.size()));
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadTokenizer(path);
  if (!t.ok()) {
    CheckError(t.status(), name);
    return 0;
  }
  const TokenizerInfo& info = (*t)->info();
  Check(info.vocab_size > 0, "a tokenizer with no vocabulary");
  Check(info.bos < info.vocab_size && info.eos < info.vocab_size,
        "BOS or EOS outside the vocabulary");
  Check(!info.add_bos || info.bos >= 0, "BOS added but there is none");
  for (bool special : {false, true}) {
    absl::StatusOr<std::vector<int32_t>> ids = (*t)->Tokenize(text, special);
    if (!ids.ok()) {
      CheckError(ids.status(), name);
      continue;
    }
    for (int32_t id : *ids) Check(id >= 0 && id < info.vocab_size, "an id outside the vocabulary");
    if (info.add_bos) Check(!ids->empty() && (*ids)[0] == info.bos, "BOS not first");
    if (!ids->empty()) (*t)->Piece((*ids)[0]);
  }
  // The vocabulary a GGUF file would hold: one entry per id, each
  // special id inside it, or an error naming the file.
  absl::StatusOr<LlamaCppVocab> v = (*t)->LlamaCppVocabulary();
  if (!v.ok()) {
    CheckError(v.status(), name);
    return 0;
  }
  const size_t n = v->tokens.size();
  Check(n == static_cast<size_t>(info.vocab_size), "a llama.cpp vocabulary of another size");
  Check(v->types.size() == n && (v->scores.empty() || v->scores.size() == n),
        "llama.cpp's arrays of different sizes");
  for (int32_t id : {v->bos, v->eos, v->unk, v->pad}) {
    Check(id < static_cast<int64_t>(n), "a special id outside the llama.cpp vocabulary");
  }
  return 0;
}

}  // namespace lowp::fuzz

#endif  // LOWP_TESTS_FUZZ_TOKENIZER_FILE_H_
