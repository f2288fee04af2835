#include "io/tensor.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "formats/format.h"
#include "formats/reference.h"
#include "io/packed_tensors.h"
#include "kernels/convert.h"

namespace lowp {
namespace {

struct DTypeInfo {
  DType dtype;
  absl::string_view name;
  size_t bytes;  // 0 below a byte
  bool floating;
  size_t bits;
};

constexpr std::array<DTypeInfo, 21> kDTypes = {{
    {DType::kBool, "BOOL", 1, false, 8},
    {DType::kU8, "U8", 1, false, 8},
    {DType::kI8, "I8", 1, false, 8},
    {DType::kU16, "U16", 2, false, 16},
    {DType::kI16, "I16", 2, false, 16},
    {DType::kU32, "U32", 4, false, 32},
    {DType::kI32, "I32", 4, false, 32},
    {DType::kU64, "U64", 8, false, 64},
    {DType::kI64, "I64", 8, false, 64},
    {DType::kF16, "F16", 2, true, 16},
    {DType::kBF16, "BF16", 2, true, 16},
    {DType::kF32, "F32", 4, true, 32},
    {DType::kF64, "F64", 8, true, 64},
    {DType::kF8E4M3, "F8_E4M3", 1, true, 8},
    {DType::kF8E5M2, "F8_E5M2", 1, true, 8},
    {DType::kF8E8M0, "F8_E8M0", 1, true, 8},
    {DType::kF4, "F4", 0, true, 4},
    {DType::kF6E2M3, "F6_E2M3", 0, true, 6},
    {DType::kF6E3M2, "F6_E3M2", 0, true, 6},
    {DType::kGgml, "GGML", 0, true, 0},
    {DType::kPacked, "PACKED", 0, true, 0},
}};

const DTypeInfo& Info(DType dtype) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype == dtype) return info;
  }
  return kDTypes[0];  // unreachable for a valid enumerator
}

// The catalog format that decodes a float dtype of 8 or 16 bits.
const Format& CatalogFormat(DType dtype) {
  static const Format* const formats = [] {
    static Format f[8];
    f[0] = *FindFormat("fp16");
    f[1] = *FindFormat("bf16");
    f[2] = *FindFormat("fp8_e4m3fn");
    f[3] = *FindFormat("fp8_e5m2");
    f[4] = *FindFormat("e8m0");
    f[5] = *FindFormat("fp4_e2m1fn");
    f[6] = *FindFormat("fp6_e2m3fn");
    f[7] = *FindFormat("fp6_e3m2fn");
    return f;
  }();
  switch (dtype) {
    case DType::kF4:
      return formats[5];
    case DType::kF6E2M3:
      return formats[6];
    case DType::kF6E3M2:
      return formats[7];
    case DType::kF16:
      return formats[0];
    case DType::kBF16:
      return formats[1];
    case DType::kF8E4M3:
      return formats[2];
    case DType::kF8E8M0:
      return formats[4];
    default:
      return formats[3];
  }
}

// Converts n elements of type T (little-endian, possibly unaligned) to float.
template <typename T>
void Convert(const uint8_t* in, std::span<float> out) {
  for (size_t i = 0; i < out.size(); ++i) {
    T value;
    std::memcpy(&value, in + i * sizeof(T), sizeof(T));
    out[i] = static_cast<float>(value);
  }
}

// Products of dimensions saturate at INT64_MAX instead of overflowing: a
// valid shape (ShapeElements) never overflows in elements(), but its rows()
// can when the last dimension is 0 (e.g. [2^40, 2^40, 0]), and a view built by
// hand may hold anything. A zero dimension anywhere makes elements() 0.
int64_t SaturatingProduct(std::span<const int64_t> dims) {
  for (int64_t d : dims) {
    if (d == 0) return 0;
  }
  int64_t n = 1;
  for (int64_t d : dims) {
    if (__builtin_mul_overflow(n, d, &n)) return std::numeric_limits<int64_t>::max();
  }
  return n;
}

// F4 and F6 elements [first, first + out.size()): unpacked to one code per
// byte (the catalog formats' storage for fp6; fp4 re-packed two a byte) and
// decoded by the conversion kernels.
absl::Status ReadSubByte(const TensorView& tensor, int64_t first, std::span<float> out) {
  const size_t bits = DTypeBits(tensor.dtype);
  std::vector<uint8_t> codes(out.size());
  for (size_t i = 0; i < out.size(); ++i) {
    const uint64_t bit = (static_cast<uint64_t>(first) + i) * bits;
    const size_t byte = static_cast<size_t>(bit / 8), shift = static_cast<size_t>(bit % 8);
    uint32_t word = tensor.bytes[byte];
    if (shift + bits > 8) word |= static_cast<uint32_t>(tensor.bytes[byte + 1]) << 8;
    codes[i] = static_cast<uint8_t>((word >> shift) & ((1u << bits) - 1));
  }
  const Format& format = CatalogFormat(tensor.dtype);
  std::vector<uint8_t> storage;
  if (bits == 4) {
    storage.assign((codes.size() + 1) / 2, 0);
    for (size_t i = 0; i < codes.size(); ++i) storage[i / 2] |= codes[i] << ((i % 2) * 4);
  } else {
    storage = std::move(codes);
  }
  if (absl::Status s = DecodeArray(format, storage, out); !s.ok()) {
    return absl::Status(s.code(),
                        absl::StrCat(tensor.file, ": tensor \"", tensor.name, "\": ", s.message()));
  }
  return absl::OkStatus();
}

// Decodes the whole blocks that cover [first, first + out.size()), straight
// into `out` where the range is aligned, through a small buffer at its ends.
absl::Status ReadGgml(const TensorView& tensor, int64_t first, std::span<float> out) {
  const ggml::TypeInfo* info = tensor.ggml;
  const auto fail = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat(tensor.file, ": tensor \"", tensor.name, "\": ", why));
  };
  if (info == nullptr) return fail("ggml blocks without a type");
  if (!info->can_decode) {
    std::vector<absl::string_view> decoded = {"f32", "f16", "bf16"};
    for (const ggml::TypeInfo& t : ggml::AllTypes()) {
      if (t.can_decode) decoded.push_back(t.name);
    }
    return fail(absl::StrCat("ggml type ", info->name, " is not one lowp decodes (it decodes ",
                             absl::StrJoin(decoded, ", "), ")"));
  }
  if (TypeBytes(tensor, tensor.elements()) != tensor.bytes.size()) {
    return fail(absl::StrCat("holds ", tensor.bytes.size(), " bytes, its shape needs ",
                             TypeBytes(tensor, tensor.elements())));
  }
  const int64_t block = info->block;
  std::vector<float> buffer(static_cast<size_t>(block));
  int64_t at = first;
  const int64_t end = first + static_cast<int64_t>(out.size());
  while (at < end) {
    const int64_t b = at / block;
    const int64_t in_block = at - b * block;
    const std::span<const uint8_t> bytes =
        tensor.bytes.subspan(static_cast<size_t>(b * info->bytes));
    if (in_block == 0 && end - at >= block) {  // whole blocks straight into out
      const int64_t blocks = (end - at) / block;
      absl::Status s = ggml::Decode(
          info->type, bytes.first(static_cast<size_t>(blocks * info->bytes)),
          out.subspan(static_cast<size_t>(at - first), static_cast<size_t>(blocks * block)));
      if (!s.ok()) return fail(s.message());
      at += blocks * block;
      continue;
    }
    absl::Status s = ggml::Decode(info->type, bytes.first(static_cast<size_t>(info->bytes)), buffer);
    if (!s.ok()) return fail(s.message());
    const int64_t n = std::min(block - in_block, end - at);
    std::copy_n(buffer.begin() + in_block, n, out.begin() + (at - first));
    at += n;
  }
  return absl::OkStatus();
}

}  // namespace

absl::string_view DTypeName(DType dtype) { return Info(dtype).name; }

absl::StatusOr<DType> ParseDType(absl::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name && info.dtype != DType::kGgml && info.dtype != DType::kPacked) {
      return info.dtype;
    }
  }
  std::string valid;
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype != DType::kGgml && info.dtype != DType::kPacked) {
      absl::StrAppend(&valid, valid.empty() ? "" : " ", info.name);
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype \"", name, "\" (valid: ", valid, ")"));
}

size_t DTypeBytes(DType dtype) { return Info(dtype).bytes; }

size_t DTypeBits(DType dtype) { return Info(dtype).bits; }

absl::StatusOr<uint64_t> DTypeStorageBytes(DType dtype, uint64_t count, absl::string_view what) {
  const uint64_t bits = DTypeBits(dtype);
  if (bits == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, dtype == DType::kPacked ? ": a packed weight (GPTQ, AWQ, compressed-tensors)"
                                      : ": ggml blocks",
        " has no element size"));
  }
  if (count > std::numeric_limits<uint64_t>::max() / bits) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", count, " elements of ",
                                                   DTypeName(dtype), " overflow a byte count"));
  }
  if (count * bits % 8 != 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, ": ", count, " elements of ",
                                                   DTypeName(dtype), " are not whole bytes (",
                                                   count * bits, " bits)"));
  }
  return count * bits / 8;
}

bool IsFloating(DType dtype) { return Info(dtype).floating; }

std::vector<DType> AllDTypes() {
  std::vector<DType> all;
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype != DType::kGgml && info.dtype != DType::kPacked) all.push_back(info.dtype);
  }
  return all;
}

std::string TensorView::type_name() const {
  if (dtype == DType::kGgml && ggml != nullptr) return std::string(ggml->name);
  if (packed != nullptr) return packed->type_name;
  if (scales != nullptr) {
    return absl::StrCat(DTypeName(dtype), "*", DTypeName(scales->dtype), "[", scales->layout, "]");
  }
  return std::string(DTypeName(dtype));
}

uint64_t TensorView::stored_bytes() const {
  if (packed != nullptr) return packed->stored_bytes();
  return bytes.size() + (scales != nullptr ? scales->bytes.size() : 0);
}

float TensorScales::At(int64_t row, int64_t col, int64_t cols) const {
  const int64_t matrix = row / matrix_rows, r = row % matrix_rows;
  const int64_t per_matrix_rows = (matrix_rows + block_rows - 1) / block_rows;
  const int64_t per_row = (cols + block_cols - 1) / block_cols;
  const size_t at =
      static_cast<size_t>((matrix * per_matrix_rows + r / block_rows) * per_row + col / block_cols);
  switch (dtype) {
    case DType::kF32: {
      float v;
      std::memcpy(&v, bytes.data() + 4 * at, 4);
      return v;
    }
    case DType::kBF16:
    case DType::kF16: {
      uint16_t code;
      std::memcpy(&code, bytes.data() + 2 * at, 2);
      return DecodeToFloat32(CatalogFormat(dtype), code);
    }
    case DType::kF8E8M0:  // AttachMxfp4Blocks
      return DecodeToFloat32(CatalogFormat(dtype), bytes[at]);
    default:
      return std::numeric_limits<float>::quiet_NaN();  // the attachers admit no other
  }
}

uint64_t TypeBytes(const TensorView& tensor, int64_t elements) {
  if (tensor.packed != nullptr) {
    return (static_cast<uint64_t>(elements) * static_cast<uint64_t>(tensor.packed->bits) + 7) / 8;
  }
  if (tensor.dtype == DType::kGgml) {
    if (tensor.ggml == nullptr) return 0;
    return static_cast<uint64_t>(elements) / static_cast<uint64_t>(tensor.ggml->block) *
           static_cast<uint64_t>(tensor.ggml->bytes);
  }
  return (static_cast<uint64_t>(elements) * DTypeBits(tensor.dtype) + 7) / 8;
}

std::span<const uint8_t> ElementBytes(const TensorView& tensor, int64_t first, int64_t count) {
  if (tensor.packed != nullptr) return PackedElementBytes(*tensor.packed, first, count);
  uint64_t begin, end;
  if (tensor.dtype == DType::kGgml) {
    if (tensor.ggml == nullptr) return {};
    const uint64_t block = static_cast<uint64_t>(tensor.ggml->block);
    const uint64_t bytes = static_cast<uint64_t>(tensor.ggml->bytes);
    begin = static_cast<uint64_t>(first) / block * bytes;
    end = (static_cast<uint64_t>(first + count) + block - 1) / block * bytes;
  } else {
    const uint64_t bits = DTypeBits(tensor.dtype);
    begin = static_cast<uint64_t>(first) * bits / 8;
    end = (static_cast<uint64_t>(first + count) * bits + 7) / 8;
  }
  end = std::min<uint64_t>(end, tensor.bytes.size());
  begin = std::min(begin, end);
  return tensor.bytes.subspan(begin, end - begin);
}

int64_t TensorView::elements() const { return SaturatingProduct(shape); }

int64_t TensorView::cols() const { return shape.empty() ? 1 : shape.back(); }

int64_t TensorView::rows() const {
  return shape.empty() ? 1
                       : SaturatingProduct(std::span<const int64_t>(shape).first(shape.size() - 1));
}

TensorView F32View(const std::string& name, int64_t rows, int64_t cols,
                   std::span<const float> values) {
  TensorView v;
  v.name = name;
  v.dtype = DType::kF32;
  v.shape = {rows, cols};
  v.bytes = {reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)};
  v.file = "(memory)";
  return v;
}

absl::StatusOr<int64_t> ShapeElements(std::span<const int64_t> shape, absl::string_view what) {
  int64_t n = 1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": negative dimension ", shape[i], " at axis ", i));
    }
  }
  for (int64_t d : shape) {
    if (d == 0) return 0;
  }
  for (int64_t d : shape) {
    if (n > std::numeric_limits<int64_t>::max() / d) {
      return absl::InvalidArgumentError(
          absl::StrCat(what, ": the element count of the shape overflows int64"));
    }
    n *= d;
  }
  return n;
}

namespace {
absl::Status ReadCodes(const TensorView& tensor, int64_t first, std::span<float> out);
}  // namespace

absl::Status ReadAsFloat32(const TensorView& tensor, int64_t first, std::span<float> out) {
  if (tensor.packed != nullptr || tensor.dtype == DType::kPacked) {
    return ReadPacked(tensor, first, out);
  }
  if (absl::Status s = ReadCodes(tensor, first, out); !s.ok() || tensor.scales == nullptr) {
    return s;
  }
  // Row by row, one scale per run of block_cols columns.
  const TensorScales& scales = *tensor.scales;
  const int64_t cols = std::max<int64_t>(1, tensor.cols());
  int64_t at = first;
  const int64_t end = first + static_cast<int64_t>(out.size());
  while (at < end) {
    const int64_t row = at / cols, col = at % cols;
    const int64_t run = std::min({end - at, cols - col, scales.block_cols - col % scales.block_cols});
    const float scale = scales.At(row, col, cols);
    float* v = out.data() + (at - first);
    for (int64_t i = 0; i < run; ++i) v[i] *= scale;
    at += run;
  }
  return absl::OkStatus();
}

namespace {

// ReadAsFloat32 without the scales.
absl::Status ReadCodes(const TensorView& tensor, int64_t first, std::span<float> out) {
  const int64_t total = tensor.elements();
  const size_t width = DTypeBytes(tensor.dtype);
  if (first < 0 || first > total || static_cast<uint64_t>(total - first) < out.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        tensor.file, ": tensor \"", tensor.name, "\": elements [", first, ", ",
        static_cast<uint64_t>(first) + out.size(), ") are outside its ", total, " elements"));
  }
  if (tensor.dtype == DType::kGgml) return ReadGgml(tensor, first, out);
  if (tensor.bytes.size() != TypeBytes(tensor, total)) {
    return absl::InvalidArgumentError(absl::StrCat(tensor.file, ": tensor \"", tensor.name,
                                                   "\": holds ", tensor.bytes.size(),
                                                   " bytes, its shape needs ",
                                                   TypeBytes(tensor, total)));
  }
  if (out.empty()) return absl::OkStatus();
  if (width == 0) return ReadSubByte(tensor, first, out);
  const std::span<const uint8_t> in =
      tensor.bytes.subspan(static_cast<size_t>(first) * width, out.size() * width);
  switch (tensor.dtype) {
    case DType::kF16:
    case DType::kBF16:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
    case DType::kF8E8M0: {
      absl::Status s = DecodeArray(CatalogFormat(tensor.dtype), in, out);
      if (!s.ok()) {
        return absl::Status(
            s.code(), absl::StrCat(tensor.file, ": tensor \"", tensor.name, "\": ", s.message()));
      }
      return absl::OkStatus();
    }
    case DType::kF32:
      std::memcpy(out.data(), in.data(), in.size());
      return absl::OkStatus();
    case DType::kF64:
      Convert<double>(in.data(), out);
      return absl::OkStatus();
    case DType::kBool:
      for (size_t i = 0; i < out.size(); ++i) out[i] = in[i] != 0 ? 1.0f : 0.0f;
      return absl::OkStatus();
    case DType::kU8:
      Convert<uint8_t>(in.data(), out);
      return absl::OkStatus();
    case DType::kI8:
      Convert<int8_t>(in.data(), out);
      return absl::OkStatus();
    case DType::kU16:
      Convert<uint16_t>(in.data(), out);
      return absl::OkStatus();
    case DType::kI16:
      Convert<int16_t>(in.data(), out);
      return absl::OkStatus();
    case DType::kU32:
      Convert<uint32_t>(in.data(), out);
      return absl::OkStatus();
    case DType::kI32:
      Convert<int32_t>(in.data(), out);
      return absl::OkStatus();
    case DType::kU64:
      Convert<uint64_t>(in.data(), out);
      return absl::OkStatus();
    case DType::kI64:
      Convert<int64_t>(in.data(), out);
      return absl::OkStatus();
    case DType::kF4:
    case DType::kF6E2M3:
    case DType::kF6E3M2:
    case DType::kGgml:
    case DType::kPacked:
      break;  // handled above
  }
  return absl::InternalError("unknown dtype");
}

}  // namespace
const ggml::TypeInfo* StoredGgmlType(const TensorView& t) {
  switch (t.dtype) {
    case DType::kGgml: return t.ggml;
    case DType::kF32: return &ggml::Info(ggml::Type::kF32);
    case DType::kF16: return &ggml::Info(ggml::Type::kF16);
    case DType::kBF16: return &ggml::Info(ggml::Type::kBF16);
    default: return nullptr;
  }
}

}  // namespace lowp
