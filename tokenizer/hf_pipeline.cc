#include "tokenizer/hf_pipeline.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "tokenizer/hf_json.h"

namespace lowp {
namespace {

using Json = nlohmann::json;

// GPT-2's regex, which ByteLevel applies when use_regex is true.
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A pattern member: {"String": "..."} or {"Regex": "..."}.
absl::StatusOr<Regex> PatternField(const Json& j, const std::string& where) {
  auto it = j.find("pattern");
  if (it == j.end() || !it->is_object() || it->size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": pattern is not {\"String\": ...} or {\"Regex\": ...}"));
  }
  const bool literal = it->contains("String");
  const Json& p = literal ? (*it)["String"] : it->contains("Regex") ? (*it)["Regex"] : Json();
  if (!p.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": pattern is not {\"String\": ...} or {\"Regex\": ...}"));
  }
  return Regex::Compile(p.get<std::string>(), literal, where);
}

bool IsAscii(absl::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

}  // namespace

const std::string& ByteLevelChar(unsigned char b) {
  // bytes_to_unicode(): the printable Latin-1 bytes stand for themselves,
  // the other 68 for U+0100 onwards in byte order.
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    uint32_t extra = 0;
    for (int i = 0; i < 256; ++i) {
      const bool printable = (i >= '!' && i <= '~') || (i >= 0xA1 && i <= 0xAC) || i >= 0xAE;
      const uint32_t cp = printable ? static_cast<uint32_t>(i) : 256 + extra++;
      std::string& s = t[i];
      if (cp < 0x80) {
        s.push_back(static_cast<char>(cp));
      } else {
        s.push_back(static_cast<char>(0xC0 | cp >> 6));
        s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
      }
    }
    return t;
  }();
  return table[b];
}

absl::Status HfPipeline::AddNormalizer(const Json& j) {
  if (j.is_null()) return absl::OkStatus();
  const std::string type = TypeOf(j);
  const std::string where = absl::StrCat(context_, ": normalizer ", type);
  if (type == "Sequence") {
    auto it = j.find("normalizers");
    if (it == j.end() || !it->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": normalizers is not a list"));
    }
    for (const Json& n : *it) {
      if (absl::Status s = AddNormalizer(n); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  Step step{};
  if (type == "Prepend") {
    absl::StatusOr<std::string> p = StringField(j, "prepend", where);
    if (!p.ok()) return p.status();
    step = {.kind = Kind::kPrepend, .text = *p};
  } else if (type == "Replace") {
    absl::StatusOr<Regex> pattern = PatternField(j, where);
    if (!pattern.ok()) return pattern.status();
    absl::StatusOr<std::string> content = StringField(j, "content", where);
    if (!content.ok()) return content.status();
    step = {.kind = Kind::kReplace, .text = *content, .pattern = {*pattern}};
  } else if (type == "NFC") {
    step = {.kind = Kind::kNfcAscii};
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        context_, ": the normalizer ", type.empty() ? "(no type)" : type,
        " is not supported (lowp reads Sequence, Prepend, Replace, and NFC on ASCII text)"));
  }
  normalizers_.push_back(std::move(step));
  description_ += (description_.empty() ? "" : ", ") + type;
  return absl::OkStatus();
}

absl::Status HfPipeline::AddPreTokenizer(const Json& j) {
  if (j.is_null()) return absl::OkStatus();
  const std::string type = TypeOf(j);
  const std::string where = absl::StrCat(context_, ": pre_tokenizer ", type);
  if (type == "Sequence") {
    auto it = j.find("pretokenizers");
    if (it == j.end() || !it->is_array()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": pretokenizers is not a list"));
    }
    for (const Json& p : *it) {
      if (absl::Status s = AddPreTokenizer(p); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  Step step{};
  if (type == "ByteLevel") {
    absl::StatusOr<bool> prefix = BoolField(j, "add_prefix_space", where, true);
    absl::StatusOr<bool> use_regex = BoolField(j, "use_regex", where, true);
    if (!prefix.ok()) return prefix.status();
    if (!use_regex.ok()) return use_regex.status();
    step = {.kind = Kind::kByteLevel, .add_prefix_space = *prefix};
    if (*use_regex) {
      absl::StatusOr<Regex> r = Regex::Compile(kGpt2Pattern, false, where);
      if (!r.ok()) return r.status();
      step.pattern.push_back(*r);
      step.source = kGpt2Pattern;
    }
  } else if (type == "Split" || type == "Digits") {
    step.kind = Kind::kSplit;
    if (type == "Digits") {
      absl::StatusOr<bool> individual = BoolField(j, "individual_digits", where, false);
      if (!individual.ok()) return individual.status();
      absl::StatusOr<Regex> r = Regex::Compile(R"(\p{N})", false, where);
      if (!r.ok()) return r.status();
      step.pattern.push_back(*r);
      step.behavior = *individual ? Behavior::kIsolated : Behavior::kContiguous;
    } else {
      absl::StatusOr<Regex> r = PatternField(j, where);
      if (!r.ok()) return r.status();
      step.pattern.push_back(*r);
      if (const Json& p = j["pattern"]; p.contains("Regex")) step.source = p["Regex"].get<std::string>();
      absl::StatusOr<std::string> behavior = StringField(j, "behavior", where, "Isolated");
      if (!behavior.ok()) return behavior.status();
      static const std::pair<const char*, Behavior> kBehaviors[] = {
          {"Removed", Behavior::kRemoved},
          {"Isolated", Behavior::kIsolated},
          {"MergedWithPrevious", Behavior::kMergedWithPrevious},
          {"MergedWithNext", Behavior::kMergedWithNext},
          {"Contiguous", Behavior::kContiguous}};
      bool found = false;
      for (const auto& [name, b] : kBehaviors) {
        if (*behavior == name) step.behavior = b, found = true;
      }
      if (!found) {
        return absl::InvalidArgumentError(absl::StrCat(where, ": unknown behavior ", *behavior));
      }
      absl::StatusOr<bool> invert = BoolField(j, "invert", where, false);
      if (!invert.ok()) return invert.status();
      step.invert = *invert;
    }
  } else if (type == "Metaspace") {
    absl::StatusOr<std::string> replacement = StringField(j, "replacement", where, "\xE2\x96\x81");
    if (!replacement.ok()) return replacement.status();
    if (replacement->empty()) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": replacement is empty"));
    }
    absl::StatusOr<bool> split = BoolField(j, "split", where, true);
    if (!split.ok()) return split.status();
    // prepend_scheme (tokenizers >= 0.14), else the older add_prefix_space.
    absl::StatusOr<bool> add_prefix = BoolField(j, "add_prefix_space", where, true);
    if (!add_prefix.ok()) return add_prefix.status();
    absl::StatusOr<std::string> scheme =
        StringField(j, "prepend_scheme", where, *add_prefix ? "always" : "never");
    if (!scheme.ok()) return scheme.status();
    int prepend = *scheme == "never" ? 0 : *scheme == "first" ? 1 : *scheme == "always" ? 2 : -1;
    if (prepend < 0) {
      return absl::InvalidArgumentError(absl::StrCat(where, ": unknown prepend_scheme ", *scheme));
    }
    step = {.kind = Kind::kMetaspace, .text = *replacement, .prepend = prepend, .split = *split};
    if (*split) {
      absl::StatusOr<Regex> r = Regex::Compile(*replacement, true, where);
      if (!r.ok()) return r.status();
      step.pattern.push_back(*r);
      step.behavior = Behavior::kMergedWithNext;
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        context_, ": the pre-tokenizer ", type.empty() ? "(no type)" : type,
        " is not supported (lowp reads Sequence, ByteLevel, Split, Metaspace and Digits)"));
  }
  pre_tokenizers_.push_back(std::move(step));
  description_ += (description_.empty() ? "" : " | ") + type;
  return absl::OkStatus();
}

absl::StatusOr<HfPipeline> HfPipeline::Parse(const Json& normalizer, const Json& pre_tokenizer,
                                             const std::string& context) {
  HfPipeline p;
  p.context_ = context;
  if (absl::Status s = p.AddNormalizer(normalizer); !s.ok()) return s;
  std::string normalizers = std::move(p.description_);
  p.description_.clear();
  if (absl::Status s = p.AddPreTokenizer(pre_tokenizer); !s.ok()) return s;
  p.description_ =
      absl::StrCat("normalizer ", normalizers.empty() ? "none" : normalizers, "; pre-tokenizer ",
                   p.description_.empty() ? "none" : p.description_);
  return p;
}

// Splits `piece` at the step's pattern as tokenizers' split() with the
// step's behavior does: the piece as intervals, matched or not (inverted
// with `invert`), joined by the behavior's rule, empty pieces dropped.
absl::StatusOr<std::vector<std::string>> HfPipeline::SplitPiece(const Step& s,
                                                                const std::string& piece,
                                                                MatchBudget& budget) const {
  absl::StatusOr<std::vector<std::pair<size_t, size_t>>> matches =
      s.pattern[0].FindAll(piece, budget);
  if (!matches.ok()) {
    return absl::Status(matches.status().code(),
                        absl::StrCat(context_, ": ", matches.status().message()));
  }
  struct Interval {
    size_t begin, end;
    bool match;
  };
  std::vector<Interval> in;
  size_t at = 0;
  for (auto [b, e] : *matches) {
    if (b > at) in.push_back({at, b, false});
    in.push_back({b, e, true});
    at = e;
  }
  if (at < piece.size()) in.push_back({at, piece.size(), false});
  if (s.invert) {
    for (Interval& i : in) i.match = !i.match;
  }
  std::vector<Interval> out;
  switch (s.behavior) {
    case Behavior::kRemoved:
      for (const Interval& i : in) {
        if (!i.match) out.push_back(i);
      }
      break;
    case Behavior::kIsolated:
      out = in;
      break;
    case Behavior::kMergedWithPrevious: {
      bool previous_match = false;
      for (const Interval& i : in) {
        if (i.match && !previous_match && !out.empty()) {
          out.back().end = i.end;
        } else {
          out.push_back(i);
        }
        previous_match = i.match;
      }
      break;
    }
    case Behavior::kMergedWithNext: {
      bool previous_match = false;  // of the interval to the right
      for (auto it = in.rbegin(); it != in.rend(); ++it) {
        if (it->match && !previous_match && !out.empty()) {
          out.back().begin = it->begin;
        } else {
          out.push_back(*it);
        }
        previous_match = it->match;
      }
      std::reverse(out.begin(), out.end());
      break;
    }
    case Behavior::kContiguous: {
      bool previous_match = false;
      for (const Interval& i : in) {
        if (i.match == previous_match && !out.empty()) {
          out.back().end = i.end;
        } else {
          out.push_back(i);
        }
        previous_match = i.match;
      }
      break;
    }
  }
  std::vector<std::string> pieces;
  for (const Interval& i : out) {
    if (i.end > i.begin) pieces.push_back(piece.substr(i.begin, i.end - i.begin));
  }
  return pieces;
}

absl::StatusOr<std::vector<std::string>> HfPipeline::Words(absl::string_view text, bool at_start,
                                                           MatchBudget& budget) const {
  const uint64_t limit = kMaxGrowth * text.size() + kGrowthSlack;
  // OK while `bytes` (what a step is about to make) is within the limit.
  auto check_growth = [&](uint64_t bytes, absl::string_view step) -> absl::Status {
    if (bytes <= limit) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(
        context_, ": the ", step, " step would grow the text from ", text.size(), " to ", bytes,
        " bytes, more than a tokenizer may make of it (", kMaxGrowth, " times its bytes and ",
        kGrowthSlack, ")"));
  };
  std::string normalized(text);
  for (const Step& s : normalizers_) {
    switch (s.kind) {
      case Kind::kPrepend:
        if (normalized.empty()) break;
        if (absl::Status g = check_growth(uint64_t{normalized.size()} + s.text.size(), "Prepend");
            !g.ok()) {
          return g;
        }
        normalized.insert(0, s.text);
        break;
      case Kind::kReplace: {
        absl::StatusOr<std::vector<std::pair<size_t, size_t>>> m =
            s.pattern[0].FindAll(normalized, budget);
        if (!m.ok()) {
          return absl::Status(m.status().code(), absl::StrCat(context_, ": ", m.status().message()));
        }
        uint64_t bytes = normalized.size();
        for (auto [b, e] : *m) bytes += s.text.size() - (e - b);
        if (absl::Status g = check_growth(bytes, "Replace"); !g.ok()) return g;
        std::string out;
        out.reserve(static_cast<size_t>(bytes));
        size_t at = 0;
        for (auto [b, e] : *m) {
          out.append(normalized, at, b - at);
          out += s.text;
          at = e;
        }
        out.append(normalized, at);
        normalized = std::move(out);
        break;
      }
      case Kind::kNfcAscii:
        if (!IsAscii(normalized)) {
          return absl::InvalidArgumentError(absl::StrCat(
              context_,
              ": the normalizer NFC is applied to ASCII text only (lowp has no Unicode "
              "composition tables), and the text has other characters"));
        }
        break;
      default:
        break;
    }
  }
  // Pieces, and whether the first begins the input.
  std::vector<std::string> pieces;
  if (!normalized.empty()) pieces.push_back(std::move(normalized));
  bool first_at_start = at_start;
  for (const Step& s : pre_tokenizers_) {
    // The bytes this step makes, against the limit before they are made:
    // ByteLevel at most doubles a byte and adds a space; Metaspace turns a
    // space into its replacement and may prepend it.
    uint64_t bytes = 0;
    for (const std::string& piece : pieces) {
      if (s.kind == Kind::kByteLevel) {
        bytes += 2 * (uint64_t{piece.size()} + 1);
      } else if (s.kind == Kind::kMetaspace) {
        const uint64_t spaces = static_cast<uint64_t>(std::count(piece.begin(), piece.end(), ' '));
        bytes += piece.size() + spaces * (s.text.size() - 1) + s.text.size();
      } else {
        bytes += piece.size();
      }
    }
    if (absl::Status g = check_growth(bytes, s.kind == Kind::kByteLevel ? "ByteLevel" : "Metaspace");
        !g.ok()) {
      return g;
    }
    std::vector<std::string> next;
    for (size_t k = 0; k < pieces.size(); ++k) {
      std::string piece = std::move(pieces[k]);
      const bool starts_input = k == 0 && first_at_start;
      if (s.kind == Kind::kByteLevel) {
        if (s.add_prefix_space && !piece.starts_with(' ')) piece = " " + piece;
        std::vector<std::string> parts;
        if (s.pattern.empty()) {
          parts.push_back(std::move(piece));
        } else {
          absl::StatusOr<std::vector<std::string>> split = SplitPiece(s, piece, budget);
          if (!split.ok()) return split.status();
          parts = *std::move(split);
        }
        for (const std::string& part : parts) {
          std::string mapped;
          mapped.reserve(part.size() * 2);
          for (unsigned char c : part) mapped += ByteLevelChar(c);
          next.push_back(std::move(mapped));
        }
        continue;
      }
      if (s.kind == Kind::kMetaspace) {
        piece = absl::StrReplaceAll(piece, {{" ", s.text}});
        if ((s.prepend == 2 || (s.prepend == 1 && starts_input)) && !piece.starts_with(s.text)) {
          piece.insert(0, s.text);
        }
        if (!s.split) {
          next.push_back(std::move(piece));
          continue;
        }
      }
      absl::StatusOr<std::vector<std::string>> split = SplitPiece(s, piece, budget);
      if (!split.ok()) return split.status();
      for (std::string& p : *split) next.push_back(std::move(p));
    }
    // Only the first piece of the first step's output can begin the input.
    first_at_start = first_at_start && !next.empty();
    pieces = std::move(next);
  }
  return pieces;
}

std::string HfPipeline::LlamaCppPre() const {
  // The Hugging Face patterns of the pre-tokenizers llama.cpp's
  // llama-vocab.cpp implements (its own spellings of them differ only in
  // how the case-insensitive contractions are written).
  static constexpr std::pair<const char*, const char*> kSplits[] = {
      {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
       "llama-bpe"},
      {R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
       "qwen2"},
  };
  if (!normalizers_.empty()) return "";
  const std::vector<Step>& p = pre_tokenizers_;
  if (p.size() == 1 && p[0].kind == Kind::kByteLevel && p[0].source == kGpt2Pattern) return "gpt-2";
  if (p.size() == 2 && p[0].kind == Kind::kSplit && p[0].behavior == Behavior::kIsolated &&
      !p[0].invert && p[1].kind == Kind::kByteLevel && p[1].source.empty()) {
    for (const auto& [pattern, name] : kSplits) {
      if (p[0].source == pattern) return name;
    }
  }
  return "";
}

}  // namespace lowp
