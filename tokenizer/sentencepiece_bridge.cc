#include "tokenizer/sentencepiece_bridge.h"

#include <sentencepiece_processor.h>

namespace lowp {

struct SentencePieceModel::Impl {
  sentencepiece::SentencePieceProcessor sp;
};

SentencePieceModel::SentencePieceModel() : impl_(std::make_unique<Impl>()) {}
SentencePieceModel::~SentencePieceModel() = default;

namespace {

// SentencePiece's message, its backquotes made plain quotes (lowp's
// messages write option names in backquotes).
std::string Message(const sentencepiece::util::Status& s) {
  if (s.ok()) return std::string();
  std::string text = s.ToString();
  for (char& c : text) {
    if (c == '`') c = '\'';
  }
  return text;
}

}  // namespace

std::string SentencePieceModel::Load(std::string_view serialized_proto) {
  return Message(impl_->sp.LoadFromSerializedProto(serialized_proto));
}

std::string SentencePieceModel::Encode(std::string_view text, std::vector<int>* ids) const {
  return Message(impl_->sp.Encode(text, ids));
}

int SentencePieceModel::size() const { return impl_->sp.GetPieceSize(); }
int SentencePieceModel::bos() const { return impl_->sp.bos_id(); }
int SentencePieceModel::eos() const { return impl_->sp.eos_id(); }

std::string SentencePieceModel::Piece(int id) const {
  return id >= 0 && id < size() ? impl_->sp.IdToPiece(id) : std::string();
}

float SentencePieceModel::Score(int id) const {
  return id >= 0 && id < size() ? impl_->sp.GetScore(id) : 0.0f;
}

int SentencePieceModel::Type(int id) const {
  if (id < 0 || id >= size()) return 0;
  const sentencepiece::SentencePieceProcessor& sp = impl_->sp;
  if (sp.IsUnknown(id)) return 2;
  if (sp.IsControl(id)) return 3;
  if (sp.IsUnused(id)) return 5;
  if (sp.IsByte(id)) return 6;
  return 1;  // normal, or user defined (libsentencepiece does not tell them apart)
}

}  // namespace lowp
