// Conversions: a raw file of codes from one format to another (`lowp
// convert`), and arrays of values to codes and back (lowp.convert,
// lowp.decode), each through the SIMD kernels.
#ifndef LOWP_API_CONVERT_H_
#define LOWP_API_CONVERT_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/statusor.h"
#include "formats/format.h"
#include "formats/reference.h"
#include "nlohmann/json.hpp"

namespace lowp::api {

struct ConvertFileOptions {
  std::string from, to;  // format names (lowp formats)
  ConvertOptions conversion;
  std::string input, output;  // raw little-endian codes in the storage layout (formats/packing.h)
};

struct ConvertFileResult {
  Format from, to;
  uint64_t elements = 0;
  uint64_t input_bytes = 0, output_bytes = 0;
};

// Reads `input` in chunks and writes `output` whole or not at all
// (io/output_file.h). Errors name the field (from, to, overflow ...) or the
// file.
absl::StatusOr<ConvertFileResult> ConvertFile(const ConvertFileOptions& options);
nlohmann::json ToJson(const ConvertFileResult& result);

// Values (float32, or fp16 bit patterns with EncodeHalfValues) to codes of
// `to`: one per element in unsigned integers of CodeBytes(to) bytes, or with
// `packed` in the storage layout (4-bit codes two per byte). `out` holds
// exactly that many bytes. `threads`: 0 takes every CPU the process may run
// on (here and below); the bytes never depend on it.
absl::Status EncodeValues(const Format& to, std::span<const float> values,
                          const ConvertOptions& options, bool packed, std::span<uint8_t> out,
                          int threads = 0);
absl::Status EncodeHalfValues(std::span<const uint16_t> fp16, const Format& to,
                              const ConvertOptions& options, bool packed, std::span<uint8_t> out,
                              int threads = 0);

// float32 values rounded to `to` and read back, in one pass (RoundArray):
// fake quantization, equal to DecodeCodes(EncodeValues(values)).
absl::Status RoundValues(const Format& to, std::span<const float> values,
                         const ConvertOptions& options, std::span<float> out, int threads = 0);

// `count` codes of `from` to float32, exactly: codes one per element in
// unsigned integers of `itemsize` bytes, or with `packed` the storage layout
// (`codes` then holds StorageBytes(from, count) bytes). InvalidArgument for a
// code wider than the format.
absl::Status DecodeCodes(const Format& from, const void* codes, size_t itemsize, size_t count,
                         bool packed, std::span<float> out, int threads = 0);

}  // namespace lowp::api

#endif  // LOWP_API_CONVERT_H_
