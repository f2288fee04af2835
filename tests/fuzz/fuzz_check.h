// Shared by the fuzz targets: invariant checks that abort (a crash the fuzzer
// reports and the corpus replay test fails on) when a parser's answer is
// inconsistent.
#ifndef LOWP_TESTS_FUZZ_FUZZ_CHECK_H_
#define LOWP_TESTS_FUZZ_FUZZ_CHECK_H_

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "io/tensor.h"

namespace lowp::fuzz {

inline void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz invariant violated: %s\n", what);
    std::abort();
  }
}

// An error must name the file it is about.
inline void CheckError(const absl::Status& status, absl::string_view file_name) {
  Check(!status.ok(), "error status expected");
  Check(status.message().find(file_name) != absl::string_view::npos,
        "error message does not name the file");
}

// A parsed tensor: its bytes inside the file image and of the size its shape
// and dtype give; its first and last elements readable as float32.
inline void CheckTensor(const TensorView& t, std::span<const uint8_t> file) {
  const absl::StatusOr<int64_t> elements = ShapeElements(t.shape, t.name);
  Check(elements.ok(), "shape of a parsed tensor is invalid");
  Check(*elements == t.elements(), "elements() disagrees with ShapeElements");
  Check(t.cols() == 0 || t.rows() * t.cols() == *elements, "rows() * cols() != elements()");
  Check(TypeBytes(t, *elements) == t.bytes.size(), "tensor bytes do not match its shape");
  if (!t.bytes.empty()) {
    Check(t.bytes.data() >= file.data() &&
              t.bytes.data() + t.bytes.size() <= file.data() + file.size(),
          "tensor bytes outside the file");
  }
  const int64_t n = std::min<int64_t>(*elements, 16);
  std::vector<float> out(static_cast<size_t>(n) + 1);
  const std::span<float> first_n(out.data(), static_cast<size_t>(n));
  Check(ReadAsFloat32(t, 0, first_n).ok(), "ReadAsFloat32 of the first elements failed");
  Check(ReadAsFloat32(t, *elements - n, first_n).ok(), "ReadAsFloat32 of the last elements failed");
  Check(!ReadAsFloat32(t, *elements - n, out).ok(), "ReadAsFloat32 past the end succeeded");
}

}  // namespace lowp::fuzz

#endif  // LOWP_TESTS_FUZZ_FUZZ_CHECK_H_
