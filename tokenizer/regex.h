// The pre-tokenizers' regular expressions, as tokenizer.json writes them
// (Unicode classes, look-ahead, (?i:...)), through Debian's PCRE2 in UTF and
// Unicode-property mode, JIT-compiled where the CPU allows. A pattern is
// untrusted input: a match that backtracks past PCRE2's limits is an error,
// never a hang. Internal to the tokenizer layer.
#ifndef LOWP_TOKENIZER_REGEX_H_
#define LOWP_TOKENIZER_REGEX_H_

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lowp {

class Regex {
 public:
  // A PCRE2 pattern, or with `literal` a string matched as it is.
  // InvalidArgument with PCRE2's message and offset, starting with `context`.
  static absl::StatusOr<Regex> Compile(absl::string_view pattern, bool literal,
                                       absl::string_view context);
  // Every non-overlapping match in `text` (valid UTF-8), left to right, as
  // [begin, end) byte offsets; empty matches are skipped.
  absl::StatusOr<std::vector<std::pair<size_t, size_t>>> FindAll(absl::string_view text) const;

 private:
  struct Compiled;
  std::shared_ptr<const Compiled> compiled_;
};

// The byte offset of the first byte that is not part of valid UTF-8 (the
// length when all is valid).
size_t FirstInvalidUtf8(absl::string_view text);

}  // namespace lowp

#endif  // LOWP_TOKENIZER_REGEX_H_
