// A tokenizer.model (SentencePiece's ModelProto) read and checked by lowp,
// and written again with only what was checked, before libsentencepiece
// sees a byte of it. Internal to the tokenizer layer.
//
// libsentencepiece 0.1.97 trusts much of the file: LoadFromSerializedProto
// itself encodes the file's self-test samples, so a bad charsmap crashes the
// load; a piece starting with NUL throws an exception nothing catches; more
// than 64 user-defined pieces that prefix one another overrun a stack
// array; very long pieces make encoding quadratic. So lowp parses the
// protobuf itself (varints, lengths and wire types checked), refuses what
// the library would trust wrongly, and hands it a canonical ModelProto of
// the fields encoding and the special-token lookups read:
//   pieces (piece, score, type);
//   trainer_spec: model_type, byte_fallback, treat_whitespace_as_suffix,
//                 unk_piece, bos_piece, eos_piece, pad_piece;
//   normalizer_spec: name, precompiled_charsmap (tokenizer/charsmap.h),
//                    add_dummy_prefix, remove_extra_whitespaces,
//                    escape_whitespaces.
// Left out: self_test_data, the denormalizer (decoding only) and every field
// only the trainer reads. A singular field given twice keeps the last value
// and a message given twice is merged, as protobuf does; an enum outside its
// values is refused (protobuf would keep the default silently).
#ifndef LOWP_TOKENIZER_SENTENCEPIECE_MODEL_H_
#define LOWP_TOKENIZER_SENTENCEPIECE_MODEL_H_

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lowp {

struct SentencePieceLimits {
  static constexpr size_t kMaxFileBytes = size_t{64} << 20;  // Gemma's: 4 MB
  static constexpr size_t kMaxPieces = size_t{1} << 20;      // Gemma's: 262,144
  static constexpr size_t kMaxPieceBytes = 512;
  static constexpr size_t kMaxUserDefinedPrefixes = 64;  // libsentencepiece's PrefixMatcher
};

// The canonical ModelProto for libsentencepiece; InvalidArgument naming
// `file` and what is wrong.
absl::StatusOr<std::string> CheckedSentencePieceModel(absl::string_view bytes,
                                                      const std::string& file);

}  // namespace lowp

#endif  // LOWP_TOKENIZER_SENTENCEPIECE_MODEL_H_
