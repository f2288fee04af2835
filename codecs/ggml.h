// llama.cpp's tensor types (ggml_type): what each stores per block, and the
// codecs that write and read those bytes exactly as ggml does.
//
// Encode is the quantizer ggml_quantize_chunk runs: without an importance
// matrix the reference (quantize_row_*_ref; quantize_iq4_nl/iq4_xs), with
// one the *_impl searches; the grid i-quants (iq1_s..iq3_s) with their
// codebooks and neighbour tables built as ggml builds them. Every float32
// operation is in ggml's order, so the bytes equal ggml's own when ggml is
// built without floating-point contraction (its q2_K, q4_K and q5_K bytes
// differ when a compiler fuses a multiply and an add). Decode is ggml's
// to_float (dequantize_row_*). Checked against ggml on 2M elements per type
// with and without importance (tests/data/ggml holds vectors ggml made).
#ifndef LOWP_CODECS_GGML_H_
#define LOWP_CODECS_GGML_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lowp::ggml {

// ggml_type ids as GGUF files store them (ggml.h).
enum class Type : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
  kQ2_0 = 42,
};

struct TypeInfo {
  Type type;
  absl::string_view name;  // ggml_type_name: "q4_K", "iq4_xs", "f16"
  int64_t block;           // elements per block (1 for plain element types)
  int64_t bytes;           // bytes per block
  bool can_decode;         // lowp decodes it (Decode)
  bool can_encode;         // lowp writes it (Encode)
  bool needs_importance;   // ggml's quantizer asserts an importance matrix
};

// The type with id `id`, or null for an id ggml does not define or has
// removed (4, 5, 31-33, 36-38: Q4_2, Q4_3, the interleaved Q4_0_x_y and
// IQ4_NL_x_y), or beyond the last.
const TypeInfo* FindType(uint32_t id);
// By ggml's name, ASCII case ignored ("Q4_K" finds q4_K); null if none.
const TypeInfo* FindType(absl::string_view name);
const TypeInfo& Info(Type type);
// Every type ggml defines, in id order.
std::span<const TypeInfo> AllTypes();

// Bytes of a row of `elements` elements: elements / block * bytes. The caller
// checks that elements is a multiple of block.
inline int64_t RowBytes(const TypeInfo& info, int64_t elements) {
  return elements / info.block * info.bytes;
}

// Encodes in.size() elements (a multiple of the type's block) into `out`
// (exactly RowBytes bytes). Inputs must be finite: ggml's quantizers give
// undefined bytes for NaN and Inf (the schemes substitute zeros). Adds to
// `clipped`, when not null, the elements whose final code ggml clamped to
// the end of its range (the grid types: iq3_* count elements beyond their
// group's largest decoded value, iq1_*/iq2_* none, as every group takes a
// whole grid point).
//
// `importance`, when not empty, holds one weight per element of `in` (for a
// row, the imatrix entry of each column: what ggml_quantize_chunk's
// `imatrix` argument holds for one row) and the encode is ggml's
// quantize_<type> with those quant_weights: the *_impl search for the types
// that use them, the reference quantizer for q8_0, mxfp4 and nvfp4 (ggml
// ignores it there). `in` is then one row: q4_0, q4_1, q5_0 and q5_1 weigh
// every element with the mean square of the whole row (the others with their
// super-block's). Weights must be finite and non-negative.
//
// InvalidArgument for a type lowp cannot encode, sizes that do not fit, or
// no importance for a type whose ggml quantizer requires one.
absl::Status Encode(Type type, std::span<const float> in, std::span<uint8_t> out,
                    uint64_t* clipped = nullptr, std::span<const float> importance = {});

// Encode's checks alone, for `elements` inputs, `bytes` of output and
// `weights` importance weights (0 for none): what a faster encoder of the
// same bytes (kernels/ggml_encode.h) refuses.
absl::Status CheckEncode(Type type, size_t elements, size_t bytes, size_t weights);

// Decodes whole blocks: out.size() elements (a multiple of the block) from
// in.size() == RowBytes bytes. Any bytes decode (a NaN or Inf scale gives
// NaN or Inf). InvalidArgument for a type lowp cannot decode or sizes that
// do not fit.
absl::Status Decode(Type type, std::span<const uint8_t> in, std::span<float> out);

// Element codes, one element at a time (codecs/ggml_codes.cc), for a caller
// that chooses them itself once a block's scales are set (GPTQ): how many
// codes an element of `type` can take (16 for q4_0, q4_K, iq4_nl, mxfp4;
// 32 for the 5-bit types, 64 for q6_K, 256 for q8_0, whose code c is the int8
// c - 128), 0 for types that do not choose codes element by element (the
// grid, ternary and plain types).
int CodeCount(Type type);
// Writes `code` (0 .. CodeCount - 1, as the type's decoder reads it: q3_K's
// 0..7 is q - 4's q) as element `element` of one block's bytes.
// InvalidArgument for such a type or an element, code or block size out of
// range.
absl::Status SetCode(Type type, std::span<uint8_t> block, int element, int code);
// Every element's code of one block at once (codes[e] for element e, as
// SetCode writes each): InvalidArgument as SetCode's, or for a code count
// other than the block's.
absl::Status SetCodes(Type type, std::span<uint8_t> block, std::span<const uint8_t> codes);

// IEEE binary16 conversions as ggml's GGML_FP32_TO_FP16 (nearest-even,
// overflow to infinity, NaN to a quiet NaN of the same sign) and
// GGML_FP16_TO_FP32.
uint16_t Fp32ToFp16(float x);
float Fp16ToFp32(uint16_t h);

}  // namespace lowp::ggml

#endif  // LOWP_CODECS_GGML_H_
