// libsentencepiece behind a wall: its header declares `absl::string_view`
// itself, which collides with Abseil's, so only sentencepiece_bridge.cc
// includes it, and this interface uses the standard library alone.
// Internal to the tokenizer layer.
#ifndef LOWP_TOKENIZER_SENTENCEPIECE_BRIDGE_H_
#define LOWP_TOKENIZER_SENTENCEPIECE_BRIDGE_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace lowp {

class SentencePieceModel {
 public:
  SentencePieceModel();
  ~SentencePieceModel();
  // "" on success, else SentencePiece's message.
  std::string Load(std::string_view serialized_proto);
  std::string Encode(std::string_view text, std::vector<int>* ids) const;
  int size() const;
  int bos() const;
  int eos() const;
  std::string Piece(int id) const;
  float Score(int id) const;
  // SentencePiece's piece types: 1 normal, 2 unknown, 3 control, 4 user
  // defined, 5 unused, 6 byte (ModelProto's SentencePiece.Type).
  int Type(int id) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace lowp

#endif  // LOWP_TOKENIZER_SENTENCEPIECE_BRIDGE_H_
