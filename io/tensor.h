// Tensors as tensor files hold them: a name, an element type, a shape and the
// bytes (little-endian, C order), viewed in place where the file is mapped.
#ifndef LOWP_IO_TENSOR_H_
#define LOWP_IO_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codecs/ggml.h"

namespace lowp {

// Element types, as safetensors names them ("F32", "BF16", "F8_E4M3", ...).
enum class DType : uint8_t {
  kBool,
  kU8,
  kI8,
  kU16,
  kI16,
  kU32,
  kI32,
  kU64,
  kI64,
  kF16,
  kBF16,
  kF32,
  kF64,
  kF8E4M3,  // OCP e4m3fn: no infinities, NaN = S.1111.111
  kF8E5M2,  // IEEE-like e5m2 with infinities
  kF8E8M0,  // OCP e8m0: an exponent only, 2^(code - 127); 0xFF is NaN
  kF4,      // OCP e2m1 (fp4_e2m1fn), two per byte, the first in the low nibble
  kF6E2M3,  // OCP fp6 e2m3 / e3m2, four per three bytes: element i in bits
  kF6E3M2,  //   [6i, 6i + 6) of the little-endian bit stream
  kGgml,    // blocks of a ggml type (GGUF files): TensorView::ggml says which
  kPacked,  // a weight composed of packed integer or FP4 codes, scales and zero
            // points (GPTQ, AWQ, compressed-tensors): TensorView::packed says how
};

absl::string_view DTypeName(DType dtype);  // "F32"; "GGML" for kGgml, "PACKED" for kPacked
// "F32" -> kF32 (never kGgml or kPacked, which no file names).
absl::StatusOr<DType> ParseDType(absl::string_view name);
size_t DTypeBytes(DType dtype);  // 1, 2, 4 or 8; 0 for the sub-byte dtypes, kGgml and kPacked
size_t DTypeBits(DType dtype);   // 4, 6, 8, 16, 32 or 64; 0 for kGgml and kPacked
bool IsFloating(DType dtype);    // F8.., F16, BF16, F32, F64, kGgml, kPacked
// All element dtypes (every one but kGgml and kPacked), for tests and listings.
std::vector<DType> AllDTypes();

// A weight stored as codes and scales (an FP8 checkpoint's weight with its
// scale tensor beside it, io/scaled_tensors.h): element (r, c) of the
// weight's matrix view is its code's value times the scale of its block,
// one float32 product. A tensor of more than two dimensions is a stack of
// matrices of `matrix_rows` rows each ([experts, out, in]); the scales
// restart with each matrix.
struct TensorScales {
  std::string name;            // the scale tensor ("...weight_scale_inv")
  DType dtype = DType::kF32;   // F32, BF16 or F16
  std::vector<int64_t> shape;  // as stored
  std::span<const uint8_t> bytes;
  int64_t block_rows = 1;   // rows of a matrix one scale covers
  int64_t block_cols = 1;   // columns one scale covers
  int64_t matrix_rows = 1;  // rows of one matrix
  std::string layout;       // "b128x128", "g128", "channel" or "tensor"

  // The scale of element (row, col) of the weight's [rows, cols] view.
  float At(int64_t row, int64_t col, int64_t cols) const;
};

struct PackedWeight;  // io/packed_tensors.h

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;      // empty for a scalar
  std::span<const uint8_t> bytes;  // element data; size = elements() * DTypeBytes(dtype),
                                   // or whole blocks of `ggml` for kGgml
  std::string file;                // where it came from, for messages
  const ggml::TypeInfo* ggml = nullptr;  // for kGgml: the block type
  // Set when the codes are multiplied by scales (ReadAsFloat32 applies
  // them); null for a tensor stored as its values.
  std::shared_ptr<const TensorScales> scales;
  // For kPacked: the parts and their layout (ReadAsFloat32 decodes them);
  // `bytes` are then the packed codes.
  std::shared_ptr<const PackedWeight> packed;

  // "F32", the ggml type's name ("q4_K") for blocks, "F8_E4M3*F32[b128x128]"
  // for codes with scales, the layout for a packed weight ("gptq-int4-g128",
  // "awq-int4-g128", "ct-int4-g128-asym", "ct-nvfp4": io/packed_tensors.h).
  std::string type_name() const;
  // Bytes stored: the element data, and the scales' when there are some;
  // every part of a packed weight.
  uint64_t stored_bytes() const;

  int64_t elements() const;  // product of shape (1 for a scalar)
  // The tensor as a matrix [rows, cols]: cols is the last dimension (the
  // input axis of a [out, in] weight), rows the product of the others. A
  // scalar or a 1-D tensor is one row.
  int64_t cols() const;
  int64_t rows() const;
};

// A float32 [rows, cols] view of values in memory (file "(memory)"), for the
// quantizers.
TensorView F32View(const std::string& name, int64_t rows, int64_t cols,
                   std::span<const float> values);

// Element count of a shape, or InvalidArgument if a dimension is negative or
// the product overflows int64 (the message names `what`).
absl::StatusOr<int64_t> ShapeElements(std::span<const int64_t> shape, absl::string_view what);

// Reads elements [first, first + out.size()) of `tensor` as float32: exact for
// F8/F16/BF16/F32 and integers up to 2^24 in magnitude, nearest-even for F64
// and larger integers; BOOL is 0 or 1; ggml blocks as ggml's to_float
// decodes them (whole blocks are decoded, the range need not be aligned);
// codes with scales as code value * scale, rounded once to float32; packed
// weights as their layout dequantizes them (io/packed_tensors.h).
// InvalidArgument if the range is outside the tensor or a ggml type lowp
// cannot decode.
absl::Status ReadAsFloat32(const TensorView& tensor, int64_t first, std::span<float> out);

// The bytes that hold elements [first, first + count) (whole blocks for
// ggml types; for packed weights, PackedElementBytes), for releasing pages.
// Clipped to the tensor.
std::span<const uint8_t> ElementBytes(const TensorView& tensor, int64_t first, int64_t count);

// Bytes of `elements` elements of the tensor's type (whole blocks for ggml;
// sub-byte dtypes rounded up to a whole byte; a packed weight's codes at its
// bits per element, rounded up).
uint64_t TypeBytes(const TensorView& tensor, int64_t elements);

// Bytes of `count` elements of `dtype` (not kGgml), or InvalidArgument naming
// `what` when they overflow uint64 or a sub-byte dtype's bits are not whole
// bytes (safetensors' rule: F4 needs an even count, F6 a multiple of 4).
absl::StatusOr<uint64_t> DTypeStorageBytes(DType dtype, uint64_t count, absl::string_view what);

// The llama.cpp type a tensor is stored in: its ggml type for GGUF blocks,
// F32/F16/BF16 for those dtypes; null for any other (FP8, integers...).
const ggml::TypeInfo* StoredGgmlType(const TensorView& tensor);

}  // namespace lowp

#endif  // LOWP_IO_TENSOR_H_
