// Tensors as tensor files hold them: a name, an element type, a shape and the
// bytes (little-endian, C order), viewed in place where the file is mapped.
#ifndef LOWP_IO_TENSOR_H_
#define LOWP_IO_TENSOR_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

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
};

absl::string_view DTypeName(DType dtype);                  // "F32"
absl::StatusOr<DType> ParseDType(absl::string_view name);  // "F32" -> kF32
size_t DTypeBytes(DType dtype);                            // 1, 2, 4 or 8
bool IsFloating(DType dtype);                              // F8.., F16, BF16, F32, F64
// All dtypes, for tests and listings.
std::vector<DType> AllDTypes();

struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;      // empty for a scalar
  std::span<const uint8_t> bytes;  // element data; size = elements() * DTypeBytes(dtype)
  std::string file;                // where it came from, for messages

  int64_t elements() const;  // product of shape (1 for a scalar)
  // The tensor as a matrix [rows, cols]: cols is the last dimension (the
  // input axis of a [out, in] weight), rows the product of the others. A
  // scalar or a 1-D tensor is one row.
  int64_t cols() const;
  int64_t rows() const;
};

// Element count of a shape, or InvalidArgument if a dimension is negative or
// the product overflows int64 (the message names `what`).
absl::StatusOr<int64_t> ShapeElements(std::span<const int64_t> shape, absl::string_view what);

// Reads elements [first, first + out.size()) of `tensor` as float32: exact for
// F8/F16/BF16/F32 and integers up to 2^24 in magnitude, nearest-even for F64
// and larger integers; BOOL is 0 or 1. InvalidArgument if the range is outside
// the tensor.
absl::Status ReadAsFloat32(const TensorView& tensor, int64_t first, std::span<float> out);

}  // namespace lowp

#endif  // LOWP_IO_TENSOR_H_
