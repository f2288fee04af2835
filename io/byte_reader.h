// Reading a little-endian file image front to back, for the parsers of
// binary files (io/gguf.cc, io/imatrix.cc's legacy .dat): every read is
// bounds-checked, and every error is InvalidArgument naming the file and
// where the reader is. Internal to io/.
#ifndef LOWP_IO_BYTE_READER_H_
#define LOWP_IO_BYTE_READER_H_

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace lowp {

template <typename T>
T LoadLE(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

class ByteReader {
 public:
  ByteReader(std::span<const uint8_t> data, absl::string_view file) : data_(data), file_(file) {}

  size_t pos() const { return pos_; }
  size_t left() const { return data_.size() - pos_; }
  // What errors say after the file's name, as given ("metadata entry 3: ";
  // "" for nothing).
  void set_where(std::string where) { where_ = std::move(where); }

  // "FILE: WHERE" + what.
  absl::Status Error(absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ": ", where_, what));
  }
  absl::Status Truncated(absl::string_view what) const {
    return Error(absl::StrCat("the file ends (at byte ", data_.size(), ") inside ", what));
  }

  // A little-endian T; `what` names it in the error.
  template <typename T>
  absl::StatusOr<T> Read(absl::string_view what) {
    if (left() < sizeof(T)) return Truncated(what);
    const T v = LoadLE<T>(data_.data() + pos_);
    pos_ += sizeof(T);
    return v;
  }

  // The next `n` bytes; an error when the file has fewer.
  absl::StatusOr<std::span<const uint8_t>> Bytes(uint64_t n, absl::string_view what) {
    if (n > left()) {
      return Error(absl::StrCat(what, " of ", n, " bytes runs past the end of the file (",
                                left(), " bytes left)"));
    }
    return Take(static_cast<size_t>(n));
  }

  // The next `n` bytes, n already checked against left().
  std::span<const uint8_t> Take(size_t n) {
    std::span<const uint8_t> b = data_.subspan(pos_, n);
    pos_ += n;
    return b;
  }

 protected:
  std::span<const uint8_t> data_;
  std::string file_;
  std::string where_;
  size_t pos_ = 0;
};

}  // namespace lowp

#endif  // LOWP_IO_BYTE_READER_H_
