#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "absl/strings/str_cat.h"

namespace lowp {

namespace {

// The match limits a start position is tried with, in turn.
constexpr uint32_t kLimits[] = {10, 100, 1'000, 10'000, 100'000, 1'000'000, 10'000'000};
constexpr int kTiers = sizeof(kLimits) / sizeof(kLimits[0]);
constexpr size_t kMaxPatternBytes = size_t{1} << 16;

}  // namespace

struct Regex::Compiled {
  pcre2_code* code = nullptr;  // anchored: matches only at the start offset
  pcre2_match_context* contexts[kTiers] = {};
  std::string source;
  bool literal = false;  // matched by find(): linear, no budget spent
  ~Compiled() {
    for (pcre2_match_context* c : contexts) pcre2_match_context_free(c);
    pcre2_code_free(code);
  }
};

absl::StatusOr<Regex> Regex::Compile(absl::string_view pattern, bool literal,
                                     absl::string_view context) {
  auto c = std::make_shared<Compiled>();
  c->source = std::string(pattern);
  c->literal = literal;
  int error = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2_LITERAL takes UTF but not UCP. Anchored at compile time, where
  // JIT keeps it (an anchored match call would fall back to the interpreter).
  const uint32_t options = PCRE2_UTF | PCRE2_ANCHORED | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  // A pattern's length bounded (real ones are under 1 KB), its nesting by
  // PCRE2's default (250 parentheses).
  pcre2_compile_context* compile = pcre2_compile_context_create(nullptr);
  if (compile == nullptr) return absl::ResourceExhaustedError("PCRE2: out of memory");
  pcre2_set_max_pattern_length(compile, kMaxPatternBytes);
  c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                          &error, &offset, compile);
  pcre2_compile_context_free(compile);
  if (c->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    return absl::InvalidArgumentError(absl::StrCat(context,
                                                   ": the pattern does not compile at offset ",
                                                   offset, ": ", reinterpret_cast<char*>(message)));
  }
  pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // the interpreter when JIT is not there
  for (int t = 0; t < kTiers; ++t) {
    c->contexts[t] = pcre2_match_context_create(nullptr);
    if (c->contexts[t] == nullptr) return absl::ResourceExhaustedError("PCRE2: out of memory");
    pcre2_set_match_limit(c->contexts[t], kLimits[t]);
    pcre2_set_depth_limit(c->contexts[t], 100'000);
  }
  Regex r;
  r.compiled_ = std::move(c);
  return r;
}

absl::StatusOr<std::vector<std::pair<size_t, size_t>>> Regex::FindAll(
    absl::string_view text, MatchBudget& budget) const {
  std::vector<std::pair<size_t, size_t>> out;
  if (compiled_->literal) {
    const std::string& needle = compiled_->source;
    if (needle.empty()) return out;  // only empty matches
    for (size_t at = text.find(needle); at != absl::string_view::npos;
         at = text.find(needle, at + needle.size())) {
      out.emplace_back(at, at + needle.size());
    }
    return out;
  }
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(compiled_->code, nullptr);
  if (data == nullptr) return absl::ResourceExhaustedError("PCRE2: out of memory");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  // One UTF-8 character on from `at`.
  auto next_char = [&](size_t at) {
    ++at;
    while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
    return at;
  };
  size_t at = 0;
  absl::Status status;
  while (at <= text.size()) {
    int rc = PCRE2_ERROR_MATCHLIMIT;
    for (int t = 0; t < kTiers && rc == PCRE2_ERROR_MATCHLIMIT; ++t) {
      if (budget.left_ < kLimits[t]) {
        status = absl::ResourceExhaustedError(absl::StrCat(
            "the pattern ", compiled_->source, " needs more matching work than a text of ",
            text.size(), " bytes is allowed (", MatchBudget::kPerByte, " steps a byte and ",
            MatchBudget::kBase, "), at byte ", at, ": it backtracks too much"));
        break;
      }
      budget.left_ -= kLimits[t];
      rc = pcre2_match(compiled_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK, data,
                       compiled_->contexts[t]);
    }
    if (!status.ok()) break;
    if (rc == PCRE2_ERROR_NOMATCH) {
      at = next_char(at);
      continue;
    }
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof message);
      status = absl::InvalidArgumentError(absl::StrCat("the pattern ", compiled_->source,
                                                       " failed at byte ", at, ": ",
                                                       reinterpret_cast<char*>(message)));
      break;
    }
    const PCRE2_SIZE* v = pcre2_get_ovector_pointer(data);
    const size_t begin = v[0], end = v[1];
    if (end > begin) {
      out.emplace_back(begin, end);
      at = end;
    } else {
      at = next_char(begin);  // an empty match: step over one character
    }
  }
  pcre2_match_data_free(data);
  if (!status.ok()) return status;
  return out;
}

size_t FirstInvalidUtf8(absl::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t min, cp;
    if ((c & 0xE0) == 0xC0) {
      len = 2, min = 0x80, cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      len = 3, min = 0x800, cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      len = 4, min = 0x10000, cp = c & 0x07;
    } else {
      return i;
    }
    if (n - i < len) return i;
    for (size_t k = 1; k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) return i;
      cp = cp << 6 | (s[i + k] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return n;
}

}  // namespace lowp
