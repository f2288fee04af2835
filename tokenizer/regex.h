// The pre-tokenizers' regular expressions, as tokenizer.json writes them
// (Unicode classes, look-ahead, (?i:...)), through Debian's PCRE2 in UTF and
// Unicode-property mode, JIT-compiled where the CPU allows. A pattern is
// untrusted input: its work on one text is bounded by a MatchBudget that
// grows with the text, and a pattern that needs more (one that backtracks
// exponentially) is an error naming it, never a hang. Internal to the
// tokenizer layer.
#ifndef LOWP_TOKENIZER_REGEX_H_
#define LOWP_TOKENIZER_REGEX_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lowp {

// The matching work allowed on one text, in PCRE2's match-limit units,
// shared by every pattern and every call that text goes through:
// kPerByte for each byte of the text, and kBase. Real tokenizers' patterns
// need 10 to 100 per position (GPT-2's, Llama 3's and Qwen2's on
// wikitext-2), so no real text meets the bound; a pattern that backtracks
// exponentially exhausts it within milliseconds.
class MatchBudget {
 public:
  static constexpr uint64_t kPerByte = 1000;
  static constexpr uint64_t kBase = 1'000'000;
  explicit MatchBudget(size_t text_bytes) : left_(kBase + kPerByte * uint64_t{text_bytes}) {}

 private:
  friend class Regex;
  uint64_t left_;
};

class Regex {
 public:
  // A PCRE2 pattern, or with `literal` a string matched as it is.
  // InvalidArgument with PCRE2's message and offset, starting with `context`.
  static absl::StatusOr<Regex> Compile(absl::string_view pattern, bool literal,
                                       absl::string_view context);
  // Every non-overlapping match in `text` (valid UTF-8), left to right, as
  // [begin, end) byte offsets; empty matches are skipped. Each start
  // position is tried in turn with a match limit that grows tenfold from 10
  // until PCRE2 settles it (PCRE2's own limit is per start position, so one
  // unanchored call could still take the text's length times the limit);
  // every limit tried is charged to `budget`. ResourceExhausted naming the
  // pattern when the budget runs out.
  absl::StatusOr<std::vector<std::pair<size_t, size_t>>> FindAll(absl::string_view text,
                                                                 MatchBudget& budget) const;

 private:
  struct Compiled;
  std::shared_ptr<const Compiled> compiled_;
};

// The byte offset of the first byte that is not part of valid UTF-8 (the
// length when all is valid).
size_t FirstInvalidUtf8(absl::string_view text);

}  // namespace lowp

#endif  // LOWP_TOKENIZER_REGEX_H_
