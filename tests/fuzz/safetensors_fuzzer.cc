// libFuzzer target: ParseSafetensors over arbitrary file images.
#include <cstddef>
#include <cstdint>
#include <span>

#include "io/safetensors.h"
#include "tests/fuzz/fuzz_check.h"

namespace lowp::fuzz {

int FuzzSafetensors(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> file(data, size);
  absl::StatusOr<ParsedSafetensors> parsed = ParseSafetensors(file, "fuzz.safetensors");
  if (!parsed.ok()) {
    CheckError(parsed.status(), "fuzz.safetensors");
    return 0;
  }
  // The tensors tile the data buffer, in data order.
  uint64_t covered = 0;
  const uint8_t* next = nullptr;
  for (const TensorView& t : parsed->tensors) {
    CheckTensor(t, file);
    Check(t.file == "fuzz.safetensors", "tensor file name");
    Check(next == nullptr || t.bytes.empty() || t.bytes.data() == next, "tensors out of order");
    if (!t.bytes.empty()) next = t.bytes.data() + t.bytes.size();
    covered += t.bytes.size();
  }
  uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | data[i];
  Check(covered == size - 8 - header, "tensors do not cover the data buffer");
  return 0;
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzSafetensors(data, size);
}
#endif
