// tokenizer.json (Hugging Face tokenizers' file) whose model is BPE.
//
// Encode, as tokenizers' encode(text, add_special_tokens = false) does:
// 1. the added tokens are found in the text, leftmost and then longest
//    first (with lstrip / rstrip taking the whitespace beside them and
//    single_word only between non-word characters); special ones only with
//    parse_special. Where tokenizers matches a token marked "normalized" in
//    the normalized text, here every token is matched in the text as given:
//    the same unless a normalizer writes a token's text.
// 2. each stretch between them goes through the normalizer and the
//    pre-tokenizer (tokenizer/hf_pipeline.h) into words;
// 3. each word through the BPE model (tokenizers' BPE::merge_word): the
//    whole word's id when ignore_merges and the vocabulary has it; else a
//    symbol per character, a character the vocabulary lacks becoming its
//    bytes' <0xXX> tokens (byte_fallback) or unk_token (runs fused with
//    fuse_unk), then the merges by rank (tokenizer/bpe_merge.h). A character
//    with neither is an error here, where tokenizers drops it silently.
// Refused by name: the models Unigram, WordPiece and WordLevel, BPE with
// dropout, continuing_subword_prefix or end_of_word_suffix.
//
// BOS: tokenizer_config.json's bos_token, else the first special token of
// the post-processor's template, else config.json's bos_token_id; added
// when tokenizer_config.json's add_bos_token says so, else when the
// template begins with it (llama.cpp's converter reads both the same way).
#include <algorithm>
#include <filesystem>
#include <functional>
#include <optional>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "io/mapped_file.h"
#include "io/strict_json.h"
#include "tokenizer/bpe_merge.h"
#include "tokenizer/hf_json.h"
#include "tokenizer/hf_pipeline.h"
#include "tokenizer/regex.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/tokenizer.h"

namespace lowp {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxId = int64_t{1} << 24;

struct AddedToken {
  std::string content;
  int32_t id = 0;
  bool special = false, lstrip = false, rstrip = false, single_word = false;
};

bool IsSpace(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }
bool IsWordByte(unsigned char c) { return std::isalnum(c) || c == '_' || c >= 0x80; }

class HfTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& file,
                                                         const std::string& directory) {
    absl::StatusOr<std::string> text = ReadRegularFile(file, kMaxTokenizerBytes);
    if (!text.ok()) return text.status();
    absl::StatusOr<Json> parsed = ParseStrictJsonUnordered(*text, file);
    if (!parsed.ok()) return parsed.status();
    const Json& j = *parsed;
    auto bad = [&](const std::string& why) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": ", why));
    };
    if (!j.is_object()) return bad("not a tokenizer.json (not an object)");
    auto model = j.find("model");
    if (model == j.end() || !model->is_object()) return bad("has no model");
    absl::StatusOr<std::string> model_type =
        StringField(*model, "type", absl::StrCat(file, ": model"));
    if (!model_type.ok()) return model_type.status();
    std::string type = *model_type;
    if (type.empty() && model->contains("merges")) type = "BPE";
    if (type != "BPE") {
      return bad(absl::StrCat("the model ", type.empty() ? "(no type)" : type,
                              " is not supported (lowp reads BPE; not Unigram, WordPiece or "
                              "WordLevel)"));
    }
    for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
      auto it = model->find(key);
      if (it != model->end() && !it->is_null() &&
          !(it->is_string() && it->get<std::string>().empty())) {
        return bad(absl::StrCat("BPE with ", key, " is not supported"));
      }
    }
    if (auto it = model->find("dropout");
        it != model->end() && !it->is_null() && !(it->is_number() && it->get<double>() == 0)) {
      return bad("BPE with dropout is not supported (it samples a tokenization)");
    }
    auto t = std::make_unique<HfTokenizer>();
    t->path_ = file;
    // The vocabulary.
    auto vocab = model->find("vocab");
    if (vocab == model->end() || !vocab->is_object()) return bad("model.vocab is not an object");
    for (auto it = vocab->begin(); it != vocab->end(); ++it) {
      if (!it.value().is_number_integer() || it.value().get<int64_t>() < 0 ||
          it.value().get<int64_t>() >= kMaxId) {
        return bad(absl::StrCat("model.vocab[\"", absl::CHexEscape(it.key()),
                                "\"] is not an id in 0..", kMaxId - 1));
      }
      if (absl::Status s =
              t->AddPiece(it.key(), static_cast<int32_t>(it.value().get<int64_t>()), file);
          !s.ok()) {
        return s;
      }
    }
    // The added tokens (ids may also be in the vocabulary).
    if (auto added = j.find("added_tokens"); added != j.end() && !added->is_null()) {
      if (!added->is_array()) return bad("added_tokens is not a list");
      for (const Json& a : *added) {
        if (!a.is_object() || !a.contains("id") || !a["id"].is_number_integer() ||
            !a.contains("content") || !a["content"].is_string()) {
          return bad("an added token has no integer id or string content");
        }
        const int64_t id = a["id"].get<int64_t>();
        if (id < 0 || id >= kMaxId)
          return bad(absl::StrCat("added token id ", id, " is out of range"));
        AddedToken token{.content = a["content"].get<std::string>(),
                         .id = static_cast<int32_t>(id)};
        const std::string where = absl::StrCat(file, ": added token ", id);
        for (auto [key, flag] : {std::pair<const char*, bool*>{"special", &token.special},
                                 {"lstrip", &token.lstrip},
                                 {"rstrip", &token.rstrip},
                                 {"single_word", &token.single_word}}) {
          absl::StatusOr<bool> value = BoolField(a, key, where, false);
          if (!value.ok()) return value.status();
          *flag = *value;
        }
        if (token.content.empty()) return bad(absl::StrCat("added token ", id, " is empty"));
        if (FirstInvalidUtf8(token.content) != token.content.size()) {
          return bad(absl::StrCat("added token ", id, " is not valid UTF-8"));
        }
        auto known = t->ids_.find(token.content);
        if (known == t->ids_.end()) {
          if (absl::Status s = t->AddPiece(token.content, token.id, file); !s.ok()) return s;
        } else if (known->second != token.id) {
          return bad(absl::StrCat("added token \"", absl::CHexEscape(token.content), "\" is id ",
                                  token.id, " but the vocabulary's ", known->second));
        }
        t->added_.push_back(std::move(token));
      }
    }
    // The merges: "a b" or ["a", "b"], rank by order.
    auto merges = model->find("merges");
    if (merges == model->end() || !merges->is_array()) return bad("model.merges is not a list");
    t->merges_.reserve(merges->size());
    int32_t rank = 0;
    for (const Json& m : *merges) {
      std::string a, b;
      if (m.is_string()) {
        const std::string s = m.get<std::string>();
        const size_t space = s.find(' ');
        if (space == std::string::npos || s.find(' ', space + 1) != std::string::npos) {
          return bad(absl::StrCat("merge ", rank, " (\"", absl::CHexEscape(s),
                                  "\") is not two tokens separated by one space"));
        }
        a = s.substr(0, space);
        b = s.substr(space + 1);
      } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
        a = m[0].get<std::string>();
        b = m[1].get<std::string>();
      } else {
        return bad(absl::StrCat("merge ", rank, " is neither \"a b\" nor [\"a\", \"b\"]"));
      }
      auto ia = t->ids_.find(a), ib = t->ids_.find(b), iab = t->ids_.find(a + b);
      if (ia == t->ids_.end() || ib == t->ids_.end() || iab == t->ids_.end()) {
        const std::string& missing = ia == t->ids_.end() ? a : ib == t->ids_.end() ? b : a + b;
        return bad(absl::StrCat("merge ", rank, " (\"", absl::CHexEscape(a), "\" + \"",
                                absl::CHexEscape(b), "\") refers to \"", absl::CHexEscape(missing),
                                "\", which is not in the vocabulary"));
      }
      t->merge_texts_.push_back(absl::StrCat(a, " ", b));
      // The first of two equal merges keeps its rank, as in tokenizers.
      t->merges_.try_emplace(Key(ia->second, ib->second), PairMerge{double(rank), iab->second});
      ++rank;
    }
    const std::string where = absl::StrCat(file, ": model");
    absl::StatusOr<std::string> unk = StringField(*model, "unk_token", where);
    if (!unk.ok()) return unk.status();
    if (!unk->empty()) {
      auto it = t->ids_.find(*unk);
      if (it == t->ids_.end())
        return bad(absl::StrCat("unk_token \"", *unk, "\" is not in the vocabulary"));
      t->unk_ = it->second;
    }
    for (auto [key, flag] : {std::pair<const char*, bool*>{"byte_fallback", &t->byte_fallback_},
                             {"fuse_unk", &t->fuse_unk_},
                             {"ignore_merges", &t->ignore_merges_}}) {
      absl::StatusOr<bool> value = BoolField(*model, key, where, false);
      if (!value.ok()) return value.status();
      *flag = *value;
    }
    if (t->byte_fallback_) {
      for (int b = 0; b < 256; ++b) {
        auto it = t->ids_.find(absl::StrFormat("<0x%02X>", b));
        t->byte_ids_[b] = it == t->ids_.end() ? -1 : it->second;
      }
    }
    static const Json kNull;
    absl::StatusOr<HfPipeline> pipeline =
        HfPipeline::Parse(j.contains("normalizer") ? j["normalizer"] : kNull,
                          j.contains("pre_tokenizer") ? j["pre_tokenizer"] : kNull, file);
    if (!pipeline.ok()) return pipeline.status();
    t->pipeline_ = *std::move(pipeline);
    if (absl::Status s = t->SetSpecialTokens(j, directory); !s.ok()) return s;
    return std::unique_ptr<Tokenizer>(std::move(t));
  }

  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                              bool parse_special) const override {
    if (size_t bad = FirstInvalidUtf8(text); bad != text.size()) {
      return absl::InvalidArgumentError(absl::StrCat("the text is not valid UTF-8 at byte ", bad,
                                                     " (", path_, " encodes Unicode text)"));
    }
    std::vector<int32_t> ids;
    size_t at = 0;
    MatchBudget budget(text.size());  // the whole text's, across its stretches
    std::vector<size_t> found(added_.size(), kNotSearched);
    auto stretch = [&](size_t begin, size_t end) -> absl::Status {
      if (end <= begin) return absl::OkStatus();
      absl::StatusOr<std::vector<std::string>> words =
          pipeline_.Words(text.substr(begin, end - begin), begin == 0, budget);
      if (!words.ok()) return words.status();
      for (const std::string& w : *words) {
        if (absl::Status s = EncodeWord(w, ids); !s.ok()) return s;
      }
      return absl::OkStatus();
    };
    while (at < text.size()) {
      std::optional<Match> m = NextAdded(text, at, parse_special, found);
      const size_t stop = m ? m->begin : text.size();
      if (absl::Status s = stretch(at, stop); !s.ok()) return s;
      if (!m) break;
      ids.push_back(m->id);
      at = m->end;
    }
    return ids;
  }

  std::string Piece(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < pieces_.size() ? pieces_[id] : std::string();
  }

  // As convert_hf_to_gguf.py's _set_vocab_gpt2: model "gpt2", the
  // pre-tokenizer's llama.cpp name, every id's string (an id the file does
  // not use "[PAD{id}]", UNUSED), added tokens CONTROL when special else
  // USER_DEFINED, the merges in rank order as "a b", no scores. Only
  // byte-level BPE with a pre-tokenizer llama.cpp implements: another is
  // InvalidArgument naming it (llama.cpp would tokenize differently).
  absl::StatusOr<LlamaCppVocab> LlamaCppVocabulary() const override {
    if (!pipeline_.byte_level()) {
      return absl::InvalidArgumentError(absl::StrCat(
          path_, ": a BPE tokenizer.json without ByteLevel (", pipeline_.description(),
          "); llama.cpp's converter writes such a model's vocabulary from its tokenizer.model"));
    }
    LlamaCppVocab v;
    v.model = "gpt2";
    v.pre = pipeline_.LlamaCppPre();
    if (v.pre.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path_, ": its pre-tokenizer (", pipeline_.description(),
                       ") is none llama.cpp implements that lowp recognizes (Llama 3's, Qwen2's, "
                       "GPT-2's)"));
    }
    for (size_t id = 0; id < pieces_.size(); ++id) {
      const bool used = has_[id];
      v.tokens.push_back(used ? pieces_[id] : LlamaCppVocab::PadToken(static_cast<int64_t>(id)));
      v.types.push_back(static_cast<int32_t>(used ? LlamaTokenType::kNormal : LlamaTokenType::kUnused));
    }
    for (const AddedToken& a : added_) {
      v.types[static_cast<size_t>(a.id)] = static_cast<int32_t>(
          a.special ? LlamaTokenType::kControl : LlamaTokenType::kUserDefined);
    }
    v.merges = merge_texts_;
    SpecialTokensInto(v);
    return v;
  }

 private:
  struct Match {
    size_t begin, end;
    int32_t id;
  };

  static uint64_t Key(int32_t a, int32_t b) {
    return uint64_t{static_cast<uint32_t>(a)} << 32 | static_cast<uint32_t>(b);
  }

  absl::Status AddPiece(const std::string& piece, int32_t id, const std::string& file) {
    if (static_cast<size_t>(id) >= pieces_.size()) {
      pieces_.resize(static_cast<size_t>(id) + 1);
      has_.resize(static_cast<size_t>(id) + 1, false);
    }
    if (has_[id]) {
      return absl::InvalidArgumentError(absl::StrCat(file, ": id ", id, " is given to both \"",
                                                     absl::CHexEscape(pieces_[id]), "\" and \"",
                                                     absl::CHexEscape(piece), "\""));
    }
    if (!ids_.try_emplace(piece, id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(file, ": \"", absl::CHexEscape(piece), "\" has two ids"));
    }
    pieces_[id] = piece;
    has_[id] = true;
    return absl::OkStatus();
  }

  // The first added token at or after `at` (leftmost, then longest).
  // `found[k]` keeps where added token k was last found (npos: nowhere
  // after), still its first occurrence while it is not before the position
  // asked: each token's text is scanned once over the whole text, not once
  // per added token met (which took hours on a text of many).
  std::optional<Match> NextAdded(absl::string_view text, size_t at, bool parse_special,
                                 std::vector<size_t>& found) const {
    std::optional<Match> best;
    for (size_t k = 0; k < added_.size(); ++k) {
      const AddedToken& t = added_[k];
      if (t.special && !parse_special) continue;
      auto find = [&](size_t from) {
        if (found[k] == kNotSearched || (found[k] != absl::string_view::npos && found[k] < from)) {
          found[k] = text.find(t.content, from);
        }
        return found[k];
      };
      size_t from = at;
      while (true) {
        const size_t p = find(from);
        if (p == absl::string_view::npos || (best && p > best->begin)) break;
        const size_t e = p + t.content.size();
        if (t.single_word &&
            ((p > 0 && IsWordByte(text[p - 1])) || (e < text.size() && IsWordByte(text[e])))) {
          from = p + 1;
          continue;
        }
        size_t b = p, end = e;
        if (t.lstrip) {
          while (b > at && IsSpace(text[b - 1])) --b;
        }
        if (t.rstrip) {
          while (end < text.size() && IsSpace(text[end])) ++end;
        }
        if (!best || p < best->begin || (p == best->begin && end - b > best->end - best->begin)) {
          best = Match{b, end, t.id};
        }
        break;
      }
    }
    return best;
  }

  absl::Status EncodeWord(const std::string& word, std::vector<int32_t>& out) const {
    if (ignore_merges_) {
      if (auto it = ids_.find(word); it != ids_.end()) {
        out.push_back(it->second);
        return absl::OkStatus();
      }
    }
    std::vector<int32_t> symbols;
    symbols.reserve(word.size());
    bool last_unk = false;
    for (size_t i = 0; i < word.size();) {
      size_t end = i + 1;
      while (end < word.size() && (static_cast<unsigned char>(word[end]) & 0xC0) == 0x80) ++end;
      const absl::string_view c(word.data() + i, end - i);
      if (auto it = ids_.find(c); it != ids_.end()) {
        symbols.push_back(it->second);
        last_unk = false;
      } else {
        bool bytes = byte_fallback_;
        for (size_t k = i; k < end && bytes; ++k)
          bytes = byte_ids_[static_cast<unsigned char>(word[k])] >= 0;
        if (bytes) {
          for (size_t k = i; k < end; ++k)
            symbols.push_back(byte_ids_[static_cast<unsigned char>(word[k])]);
          last_unk = false;
        } else if (unk_ >= 0) {
          if (!(fuse_unk_ && last_unk)) symbols.push_back(unk_);
          last_unk = true;
        } else {
          return absl::InvalidArgumentError(absl::StrCat(
              path_, ": the character \"", absl::CHexEscape(c),
              "\" is not in the vocabulary, and the tokenizer has no byte fallback or unk_token"));
        }
      }
      i = end;
    }
    MergePairs(symbols, [this](int32_t a, int32_t b) -> std::optional<PairMerge> {
      auto it = merges_.find(Key(a, b));
      if (it == merges_.end()) return std::nullopt;
      return it->second;
    });
    out.insert(out.end(), symbols.begin(), symbols.end());
    return absl::OkStatus();
  }

  absl::Status SetSpecialTokens(const Json& j, const std::string& directory) {
    absl::StatusOr<SpecialTokenConfig> special = ReadSpecialTokenConfig(directory);
    if (!special.ok()) return special.status();
    add_eos_ = special->add_eos;
    chat_template_ = special->chat_template;
    // The template's first special token, if the post-processor has one.
    std::optional<std::string> template_bos;
    std::function<void(const Json&)> visit = [&](const Json& p) {
      if (!p.is_object()) return;
      const std::string type = TypeOf(p);
      if (type == "Sequence" && p.contains("processors") && p["processors"].is_array()) {
        for (const Json& q : p["processors"]) visit(q);
      } else if (type == "TemplateProcessing" && p.contains("single") && p["single"].is_array() &&
                 !p["single"].empty()) {
        const Json& first = p["single"][0];
        if (first.is_object() && first.contains("SpecialToken") &&
            first["SpecialToken"].is_object() && first["SpecialToken"].contains("id") &&
            first["SpecialToken"]["id"].is_string()) {
          template_bos = first["SpecialToken"]["id"].get<std::string>();
        }
      }
    };
    if (j.contains("post_processor")) visit(j["post_processor"]);
    auto id_of = [&](const std::optional<std::string>& text) -> int32_t {
      if (!text) return -1;
      auto it = ids_.find(*text);
      return it == ids_.end() ? -1 : it->second;
    };
    const int32_t n = static_cast<int32_t>(pieces_.size());
    int32_t bos = id_of(special->bos_text);
    if (bos < 0) bos = id_of(template_bos);
    if (bos < 0 && special->bos_id < n) bos = special->bos_id;
    int32_t eos = id_of(special->eos_text);
    if (eos < 0 && special->eos_id < n) eos = special->eos_id;
    absl::StatusOr<bool> add_bos =
        AddBos(*special, bos, template_bos.has_value() && id_of(template_bos) == bos, path_);
    if (!add_bos.ok()) return add_bos.status();
    info_ = {.path = path_,
             .kind = absl::StrCat("tokenizer.json ", pipeline_.byte_level() ? "byte-level " : "",
                                  "BPE (", pipeline_.description(), ")"),
             .vocab_size = n,
             .bos = bos,
             .eos = eos,
             .add_bos = *add_bos};
    return absl::OkStatus();
  }

  std::string path_;
  std::vector<std::string> pieces_;
  std::vector<bool> has_;
  absl::flat_hash_map<std::string, int32_t> ids_;
  absl::flat_hash_map<uint64_t, PairMerge> merges_;
  std::vector<std::string> merge_texts_;  // "a b", in rank order
  std::vector<AddedToken> added_;
  static constexpr size_t kNotSearched = absl::string_view::npos - 1;
  HfPipeline pipeline_;
  int32_t unk_ = -1;
  std::array<int32_t, 256> byte_ids_{};
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadHfTokenizer(const std::string& file,
                                                           const std::string& directory) {
  return HfTokenizer::Load(file, directory);
}

}  // namespace lowp
