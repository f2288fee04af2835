// The fuzz build's DecodeArray (kernels/convert.h): the scalar reference
// (formats/reference.h) element by element, for the 8- and 16-bit formats
// ReadAsFloat32 decodes. The SIMD kernels give the reference's bits by
// construction and test (tests/kernels_*test.cc); compiling them with the
// sanitizers takes many minutes on two cores, so the sanitized fuzzers link
// this instead and fuzz the parsers and ReadAsFloat32's own code. The g++
// corpus replay test runs the same inputs through the real kernels.
#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "formats/format.h"
#include "formats/reference.h"
#include "kernels/convert.h"

namespace lowp {

absl::Status DecodeArray(const Format& from, std::span<const uint8_t> in, std::span<float> out,
                         const RunOptions& /*run*/) {
  const int bytes = from.storage_bits() / 8;
  if (from.storage_bits() != 8 && from.storage_bits() != 16) {
    return absl::UnimplementedError(
        absl::StrCat("fuzz build: DecodeArray of ", from.name, " (8- and 16-bit formats only)"));
  }
  if (in.size() != out.size() * bytes) {
    return absl::InvalidArgumentError(absl::StrCat("DecodeArray: ", in.size(), " bytes for ",
                                                   out.size(), " ", from.name, " codes"));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    const uint32_t code = bytes == 1 ? in[i] : in[2 * i] | uint32_t{in[2 * i + 1]} << 8;
    out[i] = DecodeToFloat32(from, code);
  }
  return absl::OkStatus();
}

}  // namespace lowp
