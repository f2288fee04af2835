// libFuzzer target: a tokenizer.model (SentencePiece's ModelProto) and the
// text it encodes, through lowp's own reading and checking of the protobuf
// (tokenizer/sentencepiece_model.h, tokenizer/charsmap.h) and then
// libsentencepiece. Input: four bytes (little-endian) giving the model's
// length, the model, then the text. Seeds (make_tokenizer_seeds.py): models
// trained by SentencePiece itself with charsmaps (a rule table, identity),
// unigram and BPE, byte fallback and user-defined pieces, and hostile ones.
// Beyond the tokenizer target's checks: whatever lowp accepts, its canonical
// form is accepted again unchanged.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/tokenizer_file.h"
#include "tokenizer/sentencepiece_model.h"

namespace lowp::fuzz {

int FuzzSentencePiece(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const auto [model, text] = SplitFileAndText(data, size, 0);
  absl::StatusOr<std::string> checked = CheckedSentencePieceModel(model, "m");
  if (checked.ok()) {
    absl::StatusOr<std::string> again = CheckedSentencePieceModel(*checked, "m");
    Check(again.ok() && *again == *checked, "the canonical model is not a fixed point");
  } else {
    CheckError(checked.status(), "m");
  }
  return FuzzTokenizerFile("tokenizer.model", model, text);
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzSentencePiece(data, size);
}
#endif
