#include "io/tensor.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <span>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "formats/format.h"
#include "kernels/convert.h"

namespace lowp {
namespace {

struct DTypeInfo {
  DType dtype;
  absl::string_view name;
  size_t bytes;
  bool floating;
};

constexpr std::array<DTypeInfo, 17> kDTypes = {{
    {DType::kBool, "BOOL", 1, false},
    {DType::kU8, "U8", 1, false},
    {DType::kI8, "I8", 1, false},
    {DType::kU16, "U16", 2, false},
    {DType::kI16, "I16", 2, false},
    {DType::kU32, "U32", 4, false},
    {DType::kI32, "I32", 4, false},
    {DType::kU64, "U64", 8, false},
    {DType::kI64, "I64", 8, false},
    {DType::kF16, "F16", 2, true},
    {DType::kBF16, "BF16", 2, true},
    {DType::kF32, "F32", 4, true},
    {DType::kF64, "F64", 8, true},
    {DType::kF8E4M3, "F8_E4M3", 1, true},
    {DType::kF8E5M2, "F8_E5M2", 1, true},
    {DType::kF8E8M0, "F8_E8M0", 1, true},
    {DType::kGgml, "GGML", 0, true},
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
    static Format f[5];
    f[0] = *FindFormat("fp16");
    f[1] = *FindFormat("bf16");
    f[2] = *FindFormat("fp8_e4m3fn");
    f[3] = *FindFormat("fp8_e5m2");
    f[4] = *FindFormat("e8m0");
    return f;
  }();
  switch (dtype) {
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
    return fail(absl::StrCat("ggml type ", info->name, " is not one lowp decodes (it decodes ",
                             "f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K..q6_K, iq4_nl, ",
                             "iq4_xs, mxfp4 and nvfp4)"));
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
    if (info.name == name && info.dtype != DType::kGgml) return info.dtype;
  }
  std::string valid;
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype != DType::kGgml) absl::StrAppend(&valid, valid.empty() ? "" : " ", info.name);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown dtype \"", name, "\" (valid: ", valid, ")"));
}

size_t DTypeBytes(DType dtype) { return Info(dtype).bytes; }

bool IsFloating(DType dtype) { return Info(dtype).floating; }

std::vector<DType> AllDTypes() {
  std::vector<DType> all;
  for (const DTypeInfo& info : kDTypes) {
    if (info.dtype != DType::kGgml) all.push_back(info.dtype);
  }
  return all;
}

std::string TensorView::type_name() const {
  if (dtype == DType::kGgml && ggml != nullptr) return std::string(ggml->name);
  return std::string(DTypeName(dtype));
}

uint64_t TypeBytes(const TensorView& tensor, int64_t elements) {
  if (tensor.dtype == DType::kGgml) {
    if (tensor.ggml == nullptr) return 0;
    return static_cast<uint64_t>(elements) / static_cast<uint64_t>(tensor.ggml->block) *
           static_cast<uint64_t>(tensor.ggml->bytes);
  }
  return static_cast<uint64_t>(elements) * DTypeBytes(tensor.dtype);
}

std::span<const uint8_t> ElementBytes(const TensorView& tensor, int64_t first, int64_t count) {
  uint64_t begin, end;
  if (tensor.dtype == DType::kGgml) {
    if (tensor.ggml == nullptr) return {};
    const uint64_t block = static_cast<uint64_t>(tensor.ggml->block);
    const uint64_t bytes = static_cast<uint64_t>(tensor.ggml->bytes);
    begin = static_cast<uint64_t>(first) / block * bytes;
    end = (static_cast<uint64_t>(first + count) + block - 1) / block * bytes;
  } else {
    begin = static_cast<uint64_t>(first) * DTypeBytes(tensor.dtype);
    end = static_cast<uint64_t>(first + count) * DTypeBytes(tensor.dtype);
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

absl::Status ReadAsFloat32(const TensorView& tensor, int64_t first, std::span<float> out) {
  const int64_t total = tensor.elements();
  const size_t width = DTypeBytes(tensor.dtype);
  if (first < 0 || first > total || static_cast<uint64_t>(total - first) < out.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        tensor.file, ": tensor \"", tensor.name, "\": elements [", first, ", ",
        static_cast<uint64_t>(first) + out.size(), ") are outside its ", total, " elements"));
  }
  if (tensor.dtype == DType::kGgml) return ReadGgml(tensor, first, out);
  if (tensor.bytes.size() != static_cast<uint64_t>(total) * width) {
    return absl::InvalidArgumentError(absl::StrCat(tensor.file, ": tensor \"", tensor.name,
                                                   "\": holds ", tensor.bytes.size(),
                                                   " bytes, its shape needs ", total * width));
  }
  if (out.empty()) return absl::OkStatus();
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
    case DType::kGgml:
      break;  // handled above
  }
  return absl::InternalError("unknown dtype");
}

}  // namespace lowp
