// llama2.c's tokenizer (run.c's read of tokenizer.bin and its encode()).
//
// File layout (little-endian), what llama2.c's tokenizer.py export writes:
//   int32 max_token_length
//   then per token, to the end of the file:
//     float32 score   (the SentencePiece piece's score: merges prefer higher)
//     int32   length
//     uint8   bytes[length]   (the piece, "▁" written as " ")
// llama2.c reads vocab_size records, a number the model's checkpoint gives;
// here the records run to the end of the file, so the file says its own
// size. Token 1 is BOS, 2 EOS, 3..258 the bytes 0x00..0xFF.
//
// encode(): a " " token first (the dummy prefix) when the text is not
// empty; each UTF-8 character its own token if the vocabulary has it, else
// its bytes as tokens byte + 3; then, while any adjacent pair's
// concatenation is a token, the pair whose token has the highest score (the
// leftmost among equals) merges. Where llama2.c differs, here: a NUL byte is
// a byte like any other (llama2.c's C string stops there), and of two
// tokens with the same string the lower id is the one found (llama2.c's
// bsearch finds either).
#include <cmath>
#include <cstring>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "io/mapped_file.h"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"

namespace lowp {
namespace {

constexpr int64_t kMaxVocabulary = int64_t{1} << 24;
constexpr int32_t kMaxPieceBytes = 1 << 16;
// llama2.c's best_score starts here: a merge must score above it.
constexpr float kNoMerge = -1e10f;

class Llama2cTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& file,
                                                         const std::string& directory) {
    absl::StatusOr<std::string> bytes = ReadRegularFile(file, kMaxTokenizerBytes);
    if (!bytes.ok()) return bytes.status();
    auto t = std::make_unique<Llama2cTokenizer>();
    const std::string& b = *bytes;
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": not a llama2.c tokenizer: ", why));
    };
    if (b.size() < 4) return bad("shorter than its 4-byte header");
    int32_t max_length;
    std::memcpy(&max_length, b.data(), 4);
    if (max_length <= 0 || max_length > kMaxPieceBytes) {
      return bad(absl::StrCat("max_token_length ", max_length, " is not in 1..", kMaxPieceBytes));
    }
    size_t at = 4;
    while (at < b.size()) {
      const int64_t id = static_cast<int64_t>(t->pieces_.size());
      if (id >= kMaxVocabulary) return bad(absl::StrCat("more than ", kMaxVocabulary, " tokens"));
      if (b.size() - at < 8) return bad(absl::StrCat("token ", id, "'s record is cut short"));
      float score;
      int32_t length;
      std::memcpy(&score, b.data() + at, 4);
      std::memcpy(&length, b.data() + at + 4, 4);
      at += 8;
      if (std::isnan(score)) return bad(absl::StrCat("token ", id, "'s score is NaN"));
      if (length < 0 || length > max_length) {
        return bad(absl::StrCat("token ", id, "'s length ", length, " is not in 0..", max_length,
                                " (max_token_length)"));
      }
      if (b.size() - at < static_cast<size_t>(length)) {
        return bad(absl::StrCat("token ", id, "'s ", length, " bytes run past the end"));
      }
      t->pieces_.emplace_back(b.data() + at, static_cast<size_t>(length));
      t->scores_.push_back(score);
      t->ids_.try_emplace(t->pieces_.back(), static_cast<int32_t>(id));
      at += static_cast<size_t>(length);
    }
    if (t->pieces_.empty()) return bad("no tokens");
    absl::StatusOr<SpecialTokenConfig> special = ReadSpecialTokenConfig(directory);
    if (!special.ok()) return special.status();
    const int64_t n = static_cast<int64_t>(t->pieces_.size());
    // config.json's ids when it gives them (an id outside the vocabulary is
    // an error, not a fallback), else llama2.c's 1 and 2.
    for (const auto& [id, key] : {std::pair{special->bos_id, "bos_token_id"},
                                  std::pair{special->eos_id, "eos_token_id"}}) {
      if (id >= n) {
        return bad(absl::StrCat("config.json's ", key, " ", id, " is not one of its ", n,
                                " token ids"));
      }
    }
    const int32_t bos = special->bos_id >= 0 ? special->bos_id : n > 1 ? 1 : -1;
    const int32_t eos = special->eos_id >= 0 ? special->eos_id : n > 2 ? 2 : -1;
    absl::StatusOr<bool> add_bos = AddBos(*special, bos, true, file);
    if (!add_bos.ok()) return add_bos.status();
    t->info_ = {.path = file,
                .kind = "llama2.c tokenizer",
                .vocab_size = n,
                .bos = bos,
                .eos = eos,
                .add_bos = *add_bos};
    return std::unique_ptr<Tokenizer>(std::move(t));
  }

  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                              bool /*parse_special*/) const override {
    std::vector<int32_t> ids;
    if (text.empty()) return ids;
    const std::optional<int32_t> space = Find(" ");
    if (!space) {
      return absl::InvalidArgumentError(
          absl::StrCat(info_.path, ": has no \" \" token for llama2.c's dummy prefix"));
    }
    ids.reserve(text.size() + 1);
    ids.push_back(*space);
    const auto* c = reinterpret_cast<const unsigned char*>(text.data());
    const size_t n = text.size();
    for (size_t i = 0; i < n;) {
      // A character: a byte and the continuation bytes after it, 4 at most.
      size_t end = i + 1;
      while (end < n && (c[end] & 0xC0) == 0x80 && end - i < 4) ++end;
      if (std::optional<int32_t> id = Find(text.substr(i, end - i))) {
        ids.push_back(*id);
      } else {
        for (size_t k = i; k < end; ++k) {
          const int64_t byte_id = int64_t{c[k]} + 3;
          if (byte_id >= info_.vocab_size) {
            return absl::InvalidArgumentError(
                absl::StrCat(info_.path, ": byte 0x", absl::Hex(c[k]), " at offset ", k,
                             " has no token (byte fallback needs ids 3..258)"));
          }
          ids.push_back(static_cast<int32_t>(byte_id));
        }
      }
      i = end;
    }
    std::string joined;
    MergePairs(ids, [&](int32_t a, int32_t b) -> std::optional<PairMerge> {
      joined.assign(pieces_[a]);
      joined.append(pieces_[b]);
      std::optional<int32_t> id = Find(joined);
      if (!id || !(scores_[*id] > kNoMerge)) return std::nullopt;
      return PairMerge{-static_cast<double>(scores_[*id]), *id};
    });
    return ids;
  }

  // As convert-llama2c-to-ggml: ids 0, 1, 2 are <unk> (UNKNOWN), <s> and
  // </s> (CONTROL) whatever the file spells them; an empty piece CONTROL,
  // "<0xXX>" BYTE, the rest NORMAL with ' ' written as U+2581; the scores as
  // stored; unk 0, BOS and EOS as this tokenizer takes them.
  absl::StatusOr<LlamaCppVocab> LlamaCppVocabulary() const override {
    LlamaCppVocab v;
    v.model = "llama";
    v.scores = scores_;
    for (size_t id = 0; id < pieces_.size(); ++id) {
      const std::string& p = pieces_[id];
      static constexpr const char* kFixed[] = {"<unk>", "<s>", "</s>"};
      LlamaTokenType type = LlamaTokenType::kNormal;
      std::string text;
      if (id < 3) {
        text = kFixed[id];
        type = id == 0 ? LlamaTokenType::kUnknown : LlamaTokenType::kControl;
      } else if (p.empty()) {
        type = LlamaTokenType::kControl;
      } else {
        // The converter's test, sscanf(text, "<0x%02hhX>") == 1: "<0x" and
        // a hex digit.
        if (p.size() > 3 && p.starts_with("<0x") &&
            absl::ascii_isxdigit(static_cast<unsigned char>(p[3]))) {
          type = LlamaTokenType::kByte;
        }
        text = absl::StrReplaceAll(p, {{" ", "\xe2\x96\x81"}});
      }
      v.tokens.push_back(std::move(text));
      v.types.push_back(static_cast<int32_t>(type));
    }
    v.unk = 0;
    SpecialTokensInto(v);  // llama2.c reads no add_eos or chat template
    return v;
  }

  std::string Piece(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < pieces_.size() ? pieces_[id] : std::string();
  }

 private:
  std::optional<int32_t> Find(absl::string_view piece) const {
    auto it = ids_.find(piece);
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  absl::flat_hash_map<std::string, int32_t> ids_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadLlama2cTokenizer(const std::string& file,
                                                                const std::string& directory) {
  return Llama2cTokenizer::Load(file, directory);
}

}  // namespace lowp
