// Array conversion between float32 (or fp16/bf16) and every format of the
// catalog: the scalar reference's rules (formats/reference.h), written once
// with Highway and dispatched at run time to the best SIMD target of the CPU.
// Every function gives the reference's bits, on every target, for any
// thread count: stochastic rounding draws RandomBits(seed, first_index + i)
// for element i, as the reference does.
//
// Codes are read and written in the storage layout of formats/packing.h
// (4-bit formats two codes per byte, low nibble first).
#ifndef LOWP_KERNELS_CONVERT_H_
#define LOWP_KERNELS_CONVERT_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "formats/format.h"
#include "formats/reference.h"

namespace lowp {

struct RunOptions {
  // Index of the first element, for stochastic rounding of an array that is
  // converted in pieces: the pieces then give the bytes of the whole.
  uint64_t first_index = 0;
  // Threads to split a large array across; 0 takes every CPU the process may
  // run on (AvailableCpus, kernels/thread_pool.h).
  // Each thread gets at least 2^18 elements; smaller arrays run on the
  // calling thread. The bytes written never depend on this.
  int threads = 0;
};

// float32 -> codes of `to`. `out` must hold exactly StorageBytes(to, in.size())
// bytes. InvalidArgument for options the format cannot honour
// (ValidateOptions) or a wrong output size; nothing is written then.
absl::Status EncodeArray(const Format& to, std::span<const float> in, std::span<uint8_t> out,
                         const ConvertOptions& options = {}, const RunOptions& run = {});

// fp16 or bf16 codes -> codes of `to`: each input's exact value rounded once.
// `from` must be the catalog's fp16 or bf16.
absl::Status EncodeArray16(const Format& from, std::span<const uint16_t> in, const Format& to,
                           std::span<uint8_t> out, const ConvertOptions& options = {},
                           const RunOptions& run = {});

// Codes of `from` (StorageBytes(from, out.size()) bytes) -> float32, exactly,
// NaN payloads kept as DecodeToFloat32 keeps them. A code with bits set above
// the format's width (an fp6 byte above 0x3F) is InvalidArgument naming its
// index; nothing is written then.
absl::Status DecodeArray(const Format& from, std::span<const uint8_t> in, std::span<float> out,
                         const RunOptions& run = {});

// Convert-and-measure in one pass, without writing the converted array: what
// rounding `in` to `to` (and reading it back) does to the values.
struct ConversionError {
  uint64_t count = 0;         // elements
  uint64_t nan_inputs = 0;    // NaN in the input
  uint64_t inf_inputs = 0;    // +-infinity in the input
  uint64_t inexact = 0;       // results that differ from the input value
  uint64_t overflow = 0;      // rounded magnitude above the largest finite
  uint64_t saturated = 0;     // ... stored as the largest finite value
  uint64_t flushed = 0;       // made zero by daz/ftz
  uint64_t underflow = 0;     // nonzero input rounded to zero
  uint64_t nan_replaced = 0;  // NaN into a format without NaN
  // Over the elements whose input and result are both finite (`measured`):
  uint64_t measured = 0;
  // Sums in double; their last bits depend on how the array was split
  // across threads (counts and the maximum do not).
  double sum_squared_error = 0;  // sum (result - input)^2
  double sum_squared_input = 0;  // sum input^2
  double max_abs_error = 0;      // max |result - input|

  void Add(const ConversionError& other);
};
absl::StatusOr<ConversionError> MeasureArray(const Format& to, std::span<const float> in,
                                             const ConvertOptions& options = {},
                                             const RunOptions& run = {});

// The Highway target the kernels run on ("AVX2", "SSE4", "EMU128", ...).
std::string KernelTarget();

}  // namespace lowp

#endif  // LOWP_KERNELS_CONVERT_H_
