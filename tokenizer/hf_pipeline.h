// tokenizer.json's text steps before the model: the normalizer and the
// pre-tokenizer, parsed once into a list of steps and applied to each
// stretch of text between added tokens. Internal to the tokenizer layer.
//
// Normalizers: Sequence, Prepend, Replace (string or regex), and NFC only
// on ASCII text (where it changes nothing; other text is refused, as lowp
// has no Unicode composition tables). Pre-tokenizers: Sequence, ByteLevel
// (GPT-2's regex and byte-to-character map), Split (string or regex, every
// behavior, invert), Metaspace, Digits. Anything else is refused by name
// when the file is read: the normalizers Lowercase, NFD, NFKC, NFKD, Strip,
// StripAccents, BertNormalizer, Precompiled; the pre-tokenizers Whitespace,
// WhitespaceSplit, BertPreTokenizer, Punctuation, CharDelimiterSplit,
// UnicodeScripts.
#ifndef LOWP_TOKENIZER_HF_PIPELINE_H_
#define LOWP_TOKENIZER_HF_PIPELINE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"
#include "tokenizer/regex.h"

namespace lowp {

class HfPipeline {
 public:
  // `normalizer` and `pre_tokenizer` are tokenizer.json's objects (or null).
  // Errors start with `context` (the file).
  static absl::StatusOr<HfPipeline> Parse(const nlohmann::json& normalizer,
                                          const nlohmann::json& pre_tokenizer,
                                          const std::string& context);

  // The words of one stretch of text (valid UTF-8), in order, each for the
  // model to encode. `at_start`: the stretch begins the input (Metaspace's
  // prepend_scheme "first"). The patterns' work is charged to `budget` (the
  // whole text's). The steps may grow the text (Replace, Prepend, Metaspace,
  // ByteLevel) to at most kMaxGrowth times the stretch and kGrowthSlack
  // bytes; a pipeline that grows it further is refused before the bytes are
  // allocated (real ones grow it at most 6 times: a space becomes "▁", 3
  // bytes, and ByteLevel doubles a byte).
  absl::StatusOr<std::vector<std::string>> Words(absl::string_view text, bool at_start,
                                                 MatchBudget& budget) const;
  static constexpr uint64_t kMaxGrowth = 16;
  static constexpr uint64_t kGrowthSlack = uint64_t{1} << 20;

  // What the pipeline does, for `lowp tokenize` ("Prepend, Replace |
  // ByteLevel").
  const std::string& description() const { return description_; }
  // Whether a ByteLevel pre-tokenizer maps the words' bytes to GPT-2's
  // characters.
  // The name llama.cpp gives this pre-tokenizer (tokenizer.ggml.pre) when
  // it is one llama.cpp implements: "llama-bpe" (Llama 3's split), "qwen2"
  // (Qwen2's), "gpt-2" (ByteLevel's own regex); empty for any other.
  std::string LlamaCppPre() const;
  bool byte_level() const {
    for (const Step& s : pre_tokenizers_) {
      if (s.kind == Kind::kByteLevel) return true;
    }
    return false;
  }

 private:
  enum class Kind { kPrepend, kReplace, kNfcAscii, kSplit, kByteLevel, kMetaspace };
  enum class Behavior { kRemoved, kIsolated, kMergedWithPrevious, kMergedWithNext, kContiguous };
  struct Step {
    Kind kind = Kind::kPrepend;
    std::string text{};            // Prepend's string, Replace's content, Metaspace's replacement
    std::vector<Regex> pattern{};  // Replace's, Split's (one), ByteLevel's with use_regex
    std::string source{};          // Split's and ByteLevel's regex as written
    Behavior behavior = Behavior::kIsolated;
    bool invert = false;
    bool add_prefix_space = false;  // ByteLevel
    int prepend = 0;                // Metaspace: 0 never, 1 first, 2 always
    bool split = false;             // Metaspace
  };
  absl::Status AddNormalizer(const nlohmann::json& j);
  absl::Status AddPreTokenizer(const nlohmann::json& j);
  absl::StatusOr<std::vector<std::string>> SplitPiece(const Step& s, const std::string& piece,
                                                      MatchBudget& budget) const;

  std::string context_;
  std::vector<Step> normalizers_, pre_tokenizers_;
  std::string description_;
};

// GPT-2's byte-to-character map: the character (UTF-8) byte `b` becomes.
const std::string& ByteLevelChar(unsigned char b);

}  // namespace lowp

#endif  // LOWP_TOKENIZER_HF_PIPELINE_H_
