// libFuzzer target: a tokenizer.json and the text it encodes: the JSON, the
// vocabulary and merges, added tokens, and the normalizers and
// pre-tokenizers with their PCRE2 patterns (whose work on one text is
// bounded, tokenizer/regex.h) and their growth of the text (bounded,
// tokenizer/hf_pipeline.h). Input: four bytes (little-endian) giving the
// file's length, the file, then the text. Seeds (make_tokenizer_seeds.py):
// byte-level and SentencePiece-style BPE, every normalizer and pre-tokenizer
// lowp reads, a Replace chain that doubles the text and a pattern that
// backtracks exponentially.
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "tests/fuzz/tokenizer_file.h"

namespace lowp::fuzz {

int FuzzTokenizerJson(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const FileAndText in = SplitFileAndText(data, size, 0);
  return FuzzTokenizerFile("tokenizer.json", in.file, in.text);
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzTokenizerJson(data, size);
}
#endif
