// tokenizer.model: a SentencePiece model, encoded by libsentencepiece (the
// library the model was trained with, Debian's build), so the ids are
// exactly SentencePiece's: its normalizer, dummy prefix, whitespace rules,
// <unk> runs and byte fallback included. BOS is the model's bos_id, added
// unless tokenizer_config.json says add_bos_token false (llama.cpp adds it
// to SentencePiece models by default).
#include "absl/strings/str_cat.h"
#include "io/mapped_file.h"
#include "tokenizer/sentencepiece_bridge.h"
#include "tokenizer/sentencepiece_model.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"

namespace lowp {
namespace {

class SentencePieceTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& file,
                                                         const std::string& directory) {
    absl::StatusOr<std::string> bytes =
        ReadRegularFile(file, SentencePieceLimits::kMaxFileBytes);
    if (!bytes.ok()) return bytes.status();
    // libsentencepiece reads only what lowp checked (sentencepiece_model.h).
    absl::StatusOr<std::string> checked = CheckedSentencePieceModel(*bytes, file);
    if (!checked.ok()) return checked.status();
    auto t = std::make_unique<SentencePieceTokenizer>();
    if (const std::string error = t->sp_.Load(*checked); !error.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": not a SentencePiece model: ", error));
    }
    absl::StatusOr<SpecialTokenConfig> special = ReadSpecialTokenConfig(directory);
    if (!special.ok()) return special.status();
    const int n = t->sp_.size();
    t->info_ = {.path = file,
                .kind = "sentencepiece",
                .vocab_size = n,
                .bos = t->sp_.bos(),
                .eos = t->sp_.eos()};
    if (t->info_.bos < 0 || t->info_.bos >= n) {
      t->info_.bos = special->bos_id >= 0 && special->bos_id < n ? special->bos_id : -1;
    }
    if (t->info_.eos < 0 || t->info_.eos >= n) {
      t->info_.eos = special->eos_id >= 0 && special->eos_id < n ? special->eos_id : -1;
    }
    absl::StatusOr<bool> add_bos = AddBos(*special, t->info_.bos, true, file);
    if (!add_bos.ok()) return add_bos.status();
    t->info_.add_bos = *add_bos;
    t->add_eos_ = special->add_eos;
    t->chat_template_ = special->chat_template;
    return std::unique_ptr<Tokenizer>(std::move(t));
  }

  // SentencePiece never reads control tokens out of text: parse_special
  // changes nothing.
  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                              bool /*parse_special*/) const override {
    std::vector<int> ids;
    if (const std::string error = sp_.Encode(std::string_view(text.data(), text.size()), &ids);
        !error.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(info_.path, ": SentencePiece could not encode the text: ", error));
    }
    return std::vector<int32_t>(ids.begin(), ids.end());
  }

  std::string Piece(int32_t id) const override { return sp_.Piece(id); }

  // As convert_hf_to_gguf.py's _create_vocab_sentencepiece: each piece, its
  // score and its type by libsentencepiece's IsUnknown, IsControl, IsUnused,
  // IsByte (in that order; NORMAL otherwise), "default" pre-tokenizer;
  // BOS and EOS, add_bos/add_eos and chat_template as the model and
  // tokenizer_config.json give them.
  absl::StatusOr<LlamaCppVocab> LlamaCppVocabulary() const override {
    LlamaCppVocab v;
    v.model = "llama";
    v.pre = "default";
    const int n = sp_.size();
    for (int id = 0; id < n; ++id) {
      v.tokens.push_back(sp_.Piece(id));
      v.scores.push_back(sp_.Score(id));
      v.types.push_back(sp_.Type(id));
    }
    // The converter's SpecialVocab finds unk and pad ids only through a
    // tokenizer.json; llama.cpp takes SentencePiece's unk from the types.
    SpecialTokensInto(v);
    return v;
  }

 private:
  SentencePieceModel sp_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadSentencePiece(const std::string& file,
                                                             const std::string& directory) {
  return SentencePieceTokenizer::Load(file, directory);
}

}  // namespace lowp
