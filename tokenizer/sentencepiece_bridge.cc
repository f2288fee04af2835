#include "tokenizer/sentencepiece_bridge.h"

#include <sentencepiece_processor.h>

namespace lowp {

struct SentencePieceModel::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

SentencePieceModel::SentencePieceModel() : impl_(std::make_unique<Impl>()) {}
SentencePieceModel::~SentencePieceModel() = default;

std::string SentencePieceModel::Load(std::string_view serialized_proto) {
  const auto s = impl_->sp.LoadFromSerializedProto(serialized_proto);
  return s.ok() ? std::string() : s.ToString();
}

std::string SentencePieceModel::Encode(std::string_view text, std::vector<int>* ids) const {
  const auto s = impl_->sp.Encode(text, ids);
  return s.ok() ? std::string() : s.ToString();
}

int SentencePieceModel::size() const { return impl_->sp.GetPieceSize(); }
int SentencePieceModel::bos() const { return impl_->sp.bos_id(); }
int SentencePieceModel::eos() const { return impl_->sp.eos_id(); }

std::string SentencePieceModel::Piece(int id) const {
  return id >= 0 && id < size() ? impl_->sp.IdToPiece(id) : std::string();
}

}  // namespace lowp
