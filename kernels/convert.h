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
#include <memory>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "formats/format.h"
#include "formats/reference.h"
#include "kernels/error_stats.h"

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

// One-pass rounding: each float32 of `in` rounded to `to`'s grid under
// `options` and read back as float32, written to `out` (same size; may be
// `in` itself): DecodeArray(EncodeArray(in)) bit for bit, NaNs included,
// without the codes. What fake quantization, casts and the evaluator's
// activation sites need. InvalidArgument for options the format cannot
// honour or a size mismatch; nothing is written then.
absl::Status RoundArray(const Format& to, std::span<const float> in, std::span<float> out,
                        const ConvertOptions& options = {}, const RunOptions& run = {});

// RoundArray with its plan made once (a scheme rounds chunk after chunk).
class Rounder {
 public:
  static absl::StatusOr<Rounder> Make(const Format& to, const ConvertOptions& options = {});
  // out.size() == in.size(); out may be in.
  void Round(std::span<const float> in, std::span<float> out, const RunOptions& run = {}) const;

 private:
  struct State;
  explicit Rounder(std::shared_ptr<const State> state) : state_(std::move(state)) {}
  std::shared_ptr<const State> state_;
};

// Convert-and-measure in one pass, without writing the converted array: what
// rounding `in` to `to` (and reading it back) does to the values.
struct ConversionError {
  // Filled by the fused kernel: count, nan_inputs, inf_inputs,
  // nonfinite_outputs (a finite input whose result is inf or NaN: the error
  // is infinite, see QuantReport's rule), measured (input and result both
  // finite) and over those sum_squared_error,
  // sum_squared_input, max_abs_error; the sums in double, their last bits
  // depending on how the array was split across threads (the counts and the
  // maximum do not). The other fields stay 0: ComparePairs on the decoded
  // values gives them all.
  ErrorStats error;
  // What the cast did, by event (formats/reference.h):
  uint64_t inexact = 0;       // results that differ from the input value
  uint64_t overflow = 0;      // rounded magnitude above the largest finite
  uint64_t saturated = 0;     // ... stored as the largest finite value
  uint64_t flushed = 0;       // made zero by daz/ftz
  uint64_t underflow = 0;     // nonzero input rounded to zero
  uint64_t nan_replaced = 0;  // NaN into a format without NaN

  void Merge(const ConversionError& other);
};
absl::StatusOr<ConversionError> MeasureArray(const Format& to, std::span<const float> in,
                                             const ConvertOptions& options = {},
                                             const RunOptions& run = {});

// The Highway target the kernels run on ("AVX2", "SSE4", "EMU128", ...).
std::string KernelTarget();

}  // namespace lowp

#endif  // LOWP_KERNELS_CONVERT_H_
