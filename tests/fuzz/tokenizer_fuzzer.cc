// libFuzzer target: the tokenizer files (tokenizer.json, llama2.c's
// tok*.bin, SentencePiece's tokenizer.model) and the text they encode, with
// tokenizer_file.h's checks. Input: one byte choosing the kind, four bytes
// (little-endian) giving the file's length, the file, then the text.
// (tokenizer_json_fuzzer.cc and sentencepiece_fuzzer.cc drive one kind each,
// with seeds of their own.)
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "tests/fuzz/tokenizer_file.h"

namespace lowp::fuzz {

int FuzzTokenizer(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  static const char* const kNames[] = {"tokenizer.json", "tok.bin", "tokenizer.model"};
  const FileAndText in = SplitFileAndText(data, size, 1);
  return FuzzTokenizerFile(kNames[data[0] % 3], in.file, in.text);
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzTokenizer(data, size);
}
#endif
