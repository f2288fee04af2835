// libFuzzer target: packed quantized weights (io/packed_tensors.h) composed
// from an arbitrary config.json and safetensors image, as TensorSet does
// with a checkpoint (ParseCheckpointQuantization, ParseSafetensors,
// AttachQuantizedParts), in memory. The input is a 4-byte little-endian
// length, that many bytes of config.json, then the safetensors file. Every
// error must name the config or the file; whatever composes must read every
// element (the same values whole and in two pieces), refuse reads past its
// end and release only its own bytes.
#include <cstddef>
#include <cstdint>
#include <algorithm>
#include <cstring>
#include <span>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "io/packed_tensors.h"
#include "io/safetensors.h"
#include "io/scaled_tensors.h"
#include "tests/fuzz/fuzz_check.h"

namespace lowp::fuzz {
namespace {

constexpr int64_t kMaxReadElements = int64_t{1} << 18;

void CheckPacked(const TensorView& t, std::span<const uint8_t> file) {
  Check(t.dtype == DType::kPacked && IsFloating(t.dtype), "a packed weight is not kPacked");
  Check(t.shape.size() == 2, "a packed weight is not [N, K]");
  Check(!t.type_name().empty(), "a packed weight has no type name");
  Check(t.stored_bytes() >= t.bytes.size(), "stored bytes less than the codes");
  Check(t.bytes.empty() || (t.bytes.data() >= file.data() &&
                            t.bytes.data() + t.bytes.size() <= file.data() + file.size()),
        "packed codes outside the file");
  const int64_t total = t.elements();
  std::vector<float> whole(static_cast<size_t>(std::min(total, kMaxReadElements)));
  const int64_t first = total - static_cast<int64_t>(whole.size());  // the last elements
  Check(ReadAsFloat32(t, first, whole).ok(), "ReadAsFloat32 of a packed weight failed");
  const size_t half = whole.size() / 2;
  std::vector<float> piece(whole.size() - half);
  Check(ReadAsFloat32(t, first + static_cast<int64_t>(half), piece).ok(), "a piece failed");
  Check(piece.empty() || std::memcmp(piece.data(), whole.data() + half,
                                     piece.size() * sizeof(float)) == 0,
        "a piece reads other values than the whole");
  std::vector<float> past(1);
  Check(!ReadAsFloat32(t, total, past).ok(), "ReadAsFloat32 past the end succeeded");
  for (int64_t at : {int64_t{0}, total / 3, total - 1}) {
    const std::span<const uint8_t> b = ElementBytes(t, at, 5);
    Check(b.empty() || (b.data() >= t.bytes.data() &&
                        b.data() + b.size() <= t.bytes.data() + t.bytes.size()),
          "ElementBytes outside the packed codes");
  }
}

}  // namespace

int FuzzPacked(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const uint32_t config_size = static_cast<uint32_t>(data[0]) | data[1] << 8 | data[2] << 16 |
                               static_cast<uint32_t>(data[3]) << 24;
  if (config_size > size - 4) return 0;
  const absl::string_view json(reinterpret_cast<const char*>(data + 4), config_size);
  absl::StatusOr<CheckpointQuantization> quantization =
      ParseCheckpointQuantization(json, "fuzz/config.json");
  if (!quantization.ok()) {
    CheckError(quantization.status(), "fuzz/config.json");
    return 0;
  }
  const std::span<const uint8_t> file(data + 4 + config_size, size - 4 - config_size);
  absl::StatusOr<ParsedSafetensors> parsed = ParseSafetensors(file, "fuzz.safetensors");
  if (!parsed.ok()) return 0;  // safetensors_fuzzer covers it
  std::vector<TensorView> tensors = std::move(parsed->tensors);
  if (absl::Status s = AttachQuantizedParts(tensors, *quantization); !s.ok()) {
    const absl::string_view m = s.message();
    Check(m.find("fuzz/config.json") != absl::string_view::npos ||
              m.find("fuzz.safetensors") != absl::string_view::npos,
          "an error names neither the config nor the file");
    return 0;
  }
  for (const TensorView& t : tensors) {
    if (t.packed != nullptr) {
      CheckPacked(t, file);
    } else if (t.scales == nullptr) {
      CheckTensor(t, file);
    }
  }
  return 0;
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzPacked(data, size);
}
#endif
