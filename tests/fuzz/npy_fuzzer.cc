// libFuzzer target: ParseNpy over arbitrary file images.
#include <cstddef>
#include <cstdint>
#include <span>

#include "io/npy.h"
#include "tests/fuzz/fuzz_check.h"

namespace lowp::fuzz {

int FuzzNpy(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> file(data, size);
  absl::StatusOr<TensorView> parsed = ParseNpy(file, "dir/fuzz.npy");
  if (!parsed.ok()) {
    CheckError(parsed.status(), "dir/fuzz.npy");
    return 0;
  }
  CheckTensor(*parsed, file);
  Check(parsed->name == "fuzz", "tensor named after the file's stem");
  Check(parsed->bytes.empty() || parsed->bytes.data() + parsed->bytes.size() == data + size,
        "npy data must end the file");
  return 0;
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzNpy(data, size);
}
#endif
