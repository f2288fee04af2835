// Writing GGUF files laid out byte for byte as ggml's gguf_write_to_file
// (ggml/src/gguf.cpp, gguf_write_out) lays them out, version 3,
// little-endian:
//   "GGUF", u32 version 3, i64 tensor count, i64 metadata count,
//   each metadata entry: string key, i32 type, value (an array: i32 element
//     type, u64 count, the elements),
//   each tensor info: string name, u32 n_dims, n_dims x i64 ne, i32 ggml type,
//     u64 offset in the data section,
//   zeros up to the alignment (32; general.alignment is not written),
//   each tensor's bytes followed by zeros up to the alignment (the last too).
// Strings are a u64 length and the bytes. n_dims is ggml_n_dims: trailing
// dimensions of 1 are not written (an [8, 1] tensor is written as [8]; at
// least one dimension is). Offsets are assigned in the order tensors are
// added, each the previous one's plus its bytes rounded up to the alignment
// (gguf_add_tensor).
//
// Only what lowp writes is supported: string, u32 and string-array metadata,
// and F32 tensors. The bytes of a tensor are not copied: they must stay alive
// until Write returns.
#ifndef LOWP_IO_GGUF_WRITER_H_
#define LOWP_IO_GGUF_WRITER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "io/output_file.h"

namespace lowp {

class GgufWriter {
 public:
  // Metadata in the order added. Keys must be unique (checked by Write).
  void AddString(absl::string_view key, absl::string_view value);
  void AddU32(absl::string_view key, uint32_t value);
  void AddStringArray(absl::string_view key, const std::vector<std::string>& values);

  // A float32 tensor of dimensions `ne` (ggml order: ne[0] is the row
  // length; at most 4) holding `values` (their count must be the product).
  void AddF32Tensor(absl::string_view name, std::vector<int64_t> ne, std::span<const float> values);

  // The whole file to `out` (not committed: the caller commits). Refuses,
  // naming the tensor or key, what ggml would refuse or write wrongly: a
  // duplicate key or tensor name, a tensor name over 63 bytes (ggml's
  // GGML_MAX_NAME - 1; ggml_format_name would truncate it), more than 4
  // dimensions, a negative dimension, or values not matching the dimensions.
  absl::Status Write(OutputFile& out) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> ne;
    std::span<const float> values;
  };
  std::vector<std::string> keys_;
  std::vector<uint8_t> metadata_;  // the encoded entries, in order
  std::vector<Tensor> tensors_;
};

}  // namespace lowp

#endif  // LOWP_IO_GGUF_WRITER_H_
