// libFuzzer target: the tokenizer files (tokenizer.json, llama2.c's
// tok*.bin, SentencePiece's tokenizer.model) and the text they encode.
// Input: one byte choosing the kind, four bytes (little-endian) giving the
// file's length, the file, then the text. Whatever loads must encode the
// text (or refuse it with an error naming the file) into ids inside its
// vocabulary, BOS first when it adds one; whatever fails must name the file.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/string_view.h"
#include "tests/fuzz/fuzz_check.h"
#include "tokenizer/tokenizer.h"

namespace lowp::fuzz {
namespace {

// One directory per process for the file the loaders read.
const std::string& ScratchDir() {
  static const std::string dir = [] {
    char name[] = "/tmp/lowp-tokenizer-fuzz-XXXXXX";
    const char* made = mkdtemp(name);
    return std::string(made != nullptr ? made : "/tmp");
  }();
  return dir;
}

}  // namespace

int FuzzTokenizer(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  static const char* const kNames[] = {"tokenizer.json", "tok.bin", "tokenizer.model"};
  const char* name = kNames[data[0] % 3];
  const uint32_t n = data[1] | data[2] << 8 | data[3] << 16 | uint32_t{data[4]} << 24;
  const size_t file_size = std::min<size_t>(n, size - 5);
  const std::string path = ScratchDir() + "/" + name;
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data + 5), static_cast<std::streamsize>(file_size));
  }
  const absl::string_view text(reinterpret_cast<const char*>(data + 5 + file_size),
                               size - 5 - file_size);
  absl::StatusOr<std::unique_ptr<Tokenizer>> t = LoadTokenizer(path);
  if (!t.ok()) {
    CheckError(t.status(), name);
    return 0;
  }
  const TokenizerInfo& info = (*t)->info();
  Check(info.vocab_size > 0, "a tokenizer with no vocabulary");
  Check(info.bos < info.vocab_size && info.eos < info.vocab_size,
        "BOS or EOS outside the vocabulary");
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
  return 0;
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzTokenizer(data, size);
}
#endif
