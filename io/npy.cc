#include "io/npy.h"

#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace lowp {
namespace {

// One value of the header's dict literal.
struct Value {
  enum Kind { kString, kBool, kTuple } kind = kString;
  std::string text;
  bool flag = false;
  std::vector<int64_t> ints;
};

// A strict parser for the dict literal numpy writes: string keys, and string,
// True/False or tuple-of-integers values.
class HeaderParser {
 public:
  HeaderParser(absl::string_view text, absl::string_view file_name)
      : text_(text), file_name_(file_name) {}

  absl::Status Parse(std::vector<std::pair<std::string, Value>>& entries) {
    SkipSpace();
    if (!Consume('{')) return Error("the header does not start with '{'");
    SkipSpace();
    while (!Consume('}')) {
      std::string key;
      if (absl::Status s = ParseString(key); !s.ok()) return s;
      SkipSpace();
      if (!Consume(':')) return Error(absl::StrCat("expected ':' after key '", key, "'"));
      SkipSpace();
      Value value;
      if (absl::Status s = ParseValue(value); !s.ok()) return s;
      entries.emplace_back(std::move(key), std::move(value));
      SkipSpace();
      if (Consume(',')) {
        SkipSpace();
      } else if (Peek() != '}') {
        return Error("expected ',' or '}' in the header dict");
      }
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected characters after the header dict");
    return absl::OkStatus();
  }

 private:
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void SkipSpace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\n' ||
                                   text_[pos_] == '\t' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  absl::Status Error(absl::string_view message) const {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name_, ": npy header: ", message, " (at character ", pos_, ")"));
  }
  absl::Status ParseString(std::string& out) {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Error("expected a quoted string");
    ++pos_;
    const size_t end = text_.find(quote, pos_);
    if (end == absl::string_view::npos) return Error("unterminated string");
    out = std::string(text_.substr(pos_, end - pos_));
    if (out.find('\\') != std::string::npos) return Error("escapes in strings are not supported");
    pos_ = end + 1;
    return absl::OkStatus();
  }
  absl::Status ParseInt(int64_t& out) {
    if (Peek() < '0' || Peek() > '9') return Error("expected a non-negative integer");
    uint64_t v = 0;
    constexpr uint64_t kMax = std::numeric_limits<int64_t>::max();
    while (Peek() >= '0' && Peek() <= '9') {
      const uint64_t digit = static_cast<uint64_t>(text_[pos_] - '0');
      if (v > (kMax - digit) / 10) return Error("integer overflows int64");
      v = v * 10 + digit;
      ++pos_;
    }
    out = static_cast<int64_t>(v);
    return absl::OkStatus();
  }
  absl::Status ParseValue(Value& value) {
    const char c = Peek();
    if (c == '\'' || c == '"') {
      value.kind = Value::kString;
      return ParseString(value.text);
    }
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      value.kind = Value::kBool;
      value.flag = true;
      return absl::OkStatus();
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      value.kind = Value::kBool;
      value.flag = false;
      return absl::OkStatus();
    }
    if (c == '(') {
      ++pos_;
      value.kind = Value::kTuple;
      SkipSpace();
      bool comma = false;  // a 1-tuple needs its trailing comma
      while (!Consume(')')) {
        if (!value.ints.empty() && !comma) return Error("expected ',' or ')' in a tuple");
        int64_t v = 0;
        if (absl::Status s = ParseInt(v); !s.ok()) return s;
        value.ints.push_back(v);
        SkipSpace();
        comma = Consume(',');
        SkipSpace();
      }
      if (value.ints.size() == 1 && !comma) return Error("(n) is not a tuple: write (n,)");
      return absl::OkStatus();
    }
    if (c == '[') return Error("structured dtypes (a list as value) are not supported");
    return Error("expected a string, True, False or a tuple of integers");
  }

  absl::string_view text_;
  absl::string_view file_name_;
  size_t pos_ = 0;
};

struct Descr {
  const char* text;
  DType dtype;
};
constexpr Descr kDescrs[] = {
    {"<f2", DType::kF16}, {"<f4", DType::kF32}, {"<f8", DType::kF64}, {"|i1", DType::kI8},
    {"|u1", DType::kU8},  {"<i2", DType::kI16}, {"<u2", DType::kU16}, {"<i4", DType::kI32},
    {"<u4", DType::kU32}, {"<i8", DType::kI64}, {"<u8", DType::kU64}, {"|b1", DType::kBool},
};

std::string Stem(absl::string_view file_name) {
  const size_t slash = file_name.rfind('/');
  if (slash != absl::string_view::npos) file_name.remove_prefix(slash + 1);
  if (absl::EndsWith(file_name, ".npy")) file_name.remove_suffix(4);
  return std::string(file_name);
}

}  // namespace

absl::StatusOr<TensorView> ParseNpy(std::span<const uint8_t> file, absl::string_view file_name) {
  auto error = [&](absl::string_view message) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": ", message));
  };
  static constexpr uint8_t kMagic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
  if (file.size() < 10 || std::memcmp(file.data(), kMagic, 6) != 0) {
    return error("not a NumPy .npy file (no \\x93NUMPY magic)");
  }
  const int major = file[6], minor = file[7];
  size_t header_start = 0;
  uint64_t header_bytes = 0;
  if (major == 1 && minor == 0) {
    header_start = 10;
    header_bytes = file[8] | uint64_t{file[9]} << 8;
  } else if ((major == 2 || major == 3) && minor == 0) {
    if (file.size() < 12) return error("truncated npy header length");
    header_start = 12;
    header_bytes =
        file[8] | uint64_t{file[9]} << 8 | uint64_t{file[10]} << 16 | uint64_t{file[11]} << 24;
  } else {
    return error(
        absl::StrCat("unsupported npy version ", major, ".", minor, " (1.0, 2.0 and 3.0 are)"));
  }
  if (header_bytes > file.size() - header_start) {
    return error(absl::StrCat("npy header length ", header_bytes,
                              " is beyond the end of the file (", file.size(), " bytes)"));
  }
  const absl::string_view text(reinterpret_cast<const char*>(file.data() + header_start),
                               header_bytes);
  std::vector<std::pair<std::string, Value>> entries;
  if (absl::Status s = HeaderParser(text, file_name).Parse(entries); !s.ok()) return s;

  const Value* descr = nullptr;
  const Value* fortran = nullptr;
  const Value* shape = nullptr;
  for (const auto& [key, value] : entries) {
    const Value** slot = key == "descr"           ? &descr
                         : key == "fortran_order" ? &fortran
                         : key == "shape"         ? &shape
                                                  : nullptr;
    if (slot == nullptr) return error(absl::StrCat("npy header: unexpected key '", key, "'"));
    if (*slot != nullptr) return error(absl::StrCat("npy header: duplicate key '", key, "'"));
    *slot = &value;
  }
  if (descr == nullptr || fortran == nullptr || shape == nullptr) {
    return error("npy header: needs the keys 'descr', 'fortran_order' and 'shape'");
  }
  if (descr->kind != Value::kString) return error("npy header: 'descr' is not a string");
  if (fortran->kind != Value::kBool) return error("npy header: 'fortran_order' is not a bool");
  if (shape->kind != Value::kTuple) return error("npy header: 'shape' is not a tuple");
  if (fortran->flag) return error("Fortran-order arrays are not supported (C order only)");

  TensorView view;
  bool found = false;
  for (const Descr& d : kDescrs) {
    if (descr->text == d.text) {
      view.dtype = d.dtype;
      found = true;
    }
  }
  if (!found) {
    if (!descr->text.empty() && descr->text[0] == '>') {
      return error(absl::StrCat("big-endian dtype '", descr->text,
                                "' is not supported (little-endian only)"));
    }
    std::vector<std::string> valid;
    for (const Descr& d : kDescrs) valid.push_back(d.text);
    return error(absl::StrCat("unsupported dtype '", descr->text,
                              "' (supported: ", absl::StrJoin(valid, " "), ")"));
  }
  view.shape = shape->ints;
  absl::StatusOr<int64_t> elements = ShapeElements(view.shape, file_name);
  if (!elements.ok()) return elements.status();
  const std::span<const uint8_t> data = file.subspan(header_start + header_bytes);
  const uint64_t width = DTypeBytes(view.dtype);
  const uint64_t count = static_cast<uint64_t>(*elements);
  if (count > data.size() / width) {
    return error(absl::StrCat("truncated: shape (", absl::StrJoin(view.shape, ", "), ") of '",
                              descr->text, "' needs ", count, " elements, the file holds ",
                              data.size(), " data bytes"));
  }
  if (count * width != data.size()) {
    return error(absl::StrCat(data.size() - count * width, " bytes after the array's data (shape (",
                              absl::StrJoin(view.shape, ", "), ") of '", descr->text, "')"));
  }
  view.name = Stem(file_name);
  view.file = std::string(file_name);
  view.bytes = data;
  return view;
}

}  // namespace lowp
