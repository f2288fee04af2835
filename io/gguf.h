// The GGUF format (llama.cpp's model files; ggml/include/gguf.h and
// docs/gguf.md), versions 2 and 3, little-endian:
//   "GGUF", u32 version, u64 tensor count, u64 metadata count,
//   metadata: string key, u32 value type, value (arrays: u32 element type,
//             u64 count, the elements; arrays may nest),
//   tensor infos: string name, u32 n_dims, n_dims x u64 ne (ne[0] is the
//             row length), u32 ggml type, u64 offset in the data section,
//   padding to `general.alignment` (u32, default 32), the data section.
// Strings are a u64 length and that many bytes (no terminator).
//
// ParseGguf checks the whole header before anything is allocated in
// proportion to a count read from it: every count and length is bounded by
// the bytes left in the file, element counts by int64 (ggml accepts a file
// whose element count wraps to 0), offsets by the data section and the
// alignment, names and keys must be unique, type ids known and not removed.
#ifndef LOWP_IO_GGUF_H_
#define LOWP_IO_GGUF_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "codecs/ggml.h"
#include "io/tensor.h"

namespace lowp {

enum class GgufType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
absl::string_view GgufTypeName(GgufType type);  // "u8", "string", "array", ...

// One metadata value. Scalars are held decoded; an array keeps its encoded
// elements in place in the file (a tokenizer's 128K strings cost nothing
// until asked for).
struct GgufValue {
  GgufType type = GgufType::kU8;
  uint64_t u = 0;  // kU8, kU16, kU32, kU64, kBool
  int64_t i = 0;   // kI8, kI16, kI32, kI64
  double f = 0;    // kF32, kF64
  std::string s;   // kString (bytes as stored; not checked to be UTF-8)
  // kArray:
  GgufType element_type = GgufType::kU8;
  uint64_t count = 0;
  std::span<const uint8_t> elements;  // the encoded elements

  // The array's elements decoded (empty for a scalar). They were checked
  // when the file was parsed, so this cannot fail.
  std::vector<GgufValue> Elements() const;
};

struct GgufKeyValue {
  std::string key;
  GgufValue value;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<int64_t> ne;  // ggml order: ne[0] is the row length
  const ggml::TypeInfo* type = nullptr;
  uint64_t offset = 0;  // from the start of the data section
  uint64_t bytes = 0;
  int64_t elements = 0;
};

struct ParsedGguf {
  uint32_t version = 0;
  uint64_t alignment = 32;
  std::vector<GgufKeyValue> metadata;  // in file order
  std::vector<GgufTensorInfo> tensors;  // in file order
  uint64_t data_offset = 0;            // where the data section starts in the file

  const GgufValue* Find(absl::string_view key) const;
};

// The most a metadata array may nest (the format sets no limit; ggml reads
// none at all): deeper files are refused instead of recursing without bound.
inline constexpr int kMaxGgufArrayDepth = 8;
// ggml's GGML_MAX_DIMS and GGML_MAX_NAME (names are at most 63 bytes).
inline constexpr uint32_t kMaxGgufDims = 4;
inline constexpr size_t kMaxGgufNameBytes = 63;

// Parses and checks the header of a whole GGUF file image; tensors' bytes lie
// at file[data_offset + offset, + bytes). InvalidArgument naming `file_name`,
// the entry at fault and what is wrong.
absl::StatusOr<ParsedGguf> ParseGguf(std::span<const uint8_t> file, absl::string_view file_name);

// The tensors of a parsed file image as views into it (named after `path`):
// the shape row-major (ne reversed, as safetensors and NumPy write it), plain
// element types as their dtype, block types as DType::kGgml with their type.
std::vector<TensorView> GgufViews(const ParsedGguf& gguf, std::span<const uint8_t> file,
                                  const std::string& path);

// The value as text: numbers in full precision, strings quoted and escaped,
// arrays as [a, b, ...] with at most `max_elements` elements shown and the
// count of the rest.
std::string FormatGgufValue(const GgufValue& value, size_t max_elements = 8);

}  // namespace lowp

#endif  // LOWP_IO_GGUF_H_
