#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/regex.h"

#include <pcre2.h>

#include "absl/strings/str_cat.h"

namespace lowp {

struct Regex::Compiled {
  pcre2_code* code = nullptr;
  pcre2_match_context* context = nullptr;
  std::string source;
  ~Compiled() {
    pcre2_match_context_free(context);
    pcre2_code_free(code);
  }
};

absl::StatusOr<Regex> Regex::Compile(absl::string_view pattern, bool literal,
                                     absl::string_view context) {
  auto c = std::make_shared<Compiled>();
  c->source = std::string(pattern);
  int error = 0;
  PCRE2_SIZE offset = 0;
  // PCRE2_LITERAL takes UTF but not UCP.
  const uint32_t options = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
  c->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                          &error, &offset, nullptr);
  if (c->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof message);
    return absl::InvalidArgumentError(absl::StrCat(context,
                                                   ": the pattern does not compile at offset ",
                                                   offset, ": ", reinterpret_cast<char*>(message)));
  }
  pcre2_jit_compile(c->code, PCRE2_JIT_COMPLETE);  // the interpreter when JIT is not there
  c->context = pcre2_match_context_create(nullptr);
  if (c->context == nullptr) return absl::ResourceExhaustedError("PCRE2: out of memory");
  // Bounds a hostile pattern's backtracking (the defaults are 10^7 and 10^7).
  pcre2_set_match_limit(c->context, 10'000'000);
  pcre2_set_depth_limit(c->context, 100'000);
  Regex r;
  r.compiled_ = std::move(c);
  return r;
}

absl::StatusOr<std::vector<std::pair<size_t, size_t>>> Regex::FindAll(
    absl::string_view text) const {
  std::vector<std::pair<size_t, size_t>> out;
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(compiled_->code, nullptr);
  if (data == nullptr) return absl::ResourceExhaustedError("PCRE2: out of memory");
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t at = 0;
  absl::Status status;
  while (at <= text.size()) {
    const int rc = pcre2_match(compiled_->code, subject, text.size(), at, PCRE2_NO_UTF_CHECK, data,
                               compiled_->context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
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
      // An empty match: step over one character.
      at = begin + 1;
      while (at < text.size() && (static_cast<unsigned char>(text[at]) & 0xC0) == 0x80) ++at;
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
