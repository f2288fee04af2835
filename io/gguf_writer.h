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
// A tensor's bytes are given either when it is added (AddF32Tensor,
// AddTensor with bytes: they must stay alive until Write returns) or
// streamed after the header (WriteHeader, then WriteTensorBytes in the
// order the tensors were added, in pieces of any size, then Finish): a
// model's tensors are written as they are made, a layer at a time.
#ifndef LOWP_IO_GGUF_WRITER_H_
#define LOWP_IO_GGUF_WRITER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "codecs/ggml.h"
#include "io/output_file.h"

namespace lowp {

class GgufWriter {
 public:
  // Metadata in the order added. Keys must be unique (checked by Write).
  void AddString(absl::string_view key, absl::string_view value);
  void AddU32(absl::string_view key, uint32_t value);
  void AddI32(absl::string_view key, int32_t value);
  void AddF32(absl::string_view key, float value);
  void AddBool(absl::string_view key, bool value);
  void AddStringArray(absl::string_view key, const std::vector<std::string>& values);
  void AddF32Array(absl::string_view key, std::span<const float> values);
  void AddI32Array(absl::string_view key, std::span<const int32_t> values);

  // A tensor of ggml type `type` and dimensions `ne` (ggml order: ne[0] is
  // the row length, a multiple of the type's block; at most 4), its bytes
  // given now (`bytes`, which must stay alive until Write returns) or, when
  // empty, streamed by WriteTensorBytes.
  void AddTensor(absl::string_view name, const ggml::TypeInfo& type, std::vector<int64_t> ne,
                 std::span<const uint8_t> bytes = {});
  // A float32 tensor holding `values` (their count must be the product).
  void AddF32Tensor(absl::string_view name, std::vector<int64_t> ne, std::span<const float> values);

  // The bytes tensor `index` (in the order added) takes in the file.
  uint64_t TensorBytes(size_t index) const;
  size_t tensor_count() const { return tensors_.size(); }

  // The whole file to `out` (not committed: the caller commits), every
  // tensor's bytes given when it was added. Refuses, naming the tensor or
  // key, what ggml would refuse or write wrongly: a duplicate key or tensor
  // name, a tensor name over 63 bytes (ggml's GGML_MAX_NAME - 1;
  // ggml_format_name would truncate it), more than 4 dimensions, a negative
  // dimension, a row that is not whole blocks, or bytes not matching the
  // dimensions.
  absl::Status Write(OutputFile& out);

  // Streaming: the header (checked as Write checks it), then each tensor's
  // bytes in order, then Finish, which refuses a file whose tensors did not
  // all get their bytes.
  absl::Status WriteHeader(OutputFile& out);
  absl::Status WriteTensorBytes(OutputFile& out, std::span<const uint8_t> bytes);
  absl::Status Finish();

 private:
  struct Tensor {
    std::string name;
    const ggml::TypeInfo* type;
    std::vector<int64_t> ne;
    std::span<const uint8_t> bytes;  // empty: streamed
  };
  void Key(absl::string_view key, uint32_t type);
  absl::Status Check(const Tensor& t, uint64_t& bytes) const;

  std::vector<std::string> keys_;
  std::vector<uint8_t> metadata_;  // the encoded entries, in order
  std::vector<Tensor> tensors_;
  // Streaming: the tensor being written and its bytes so far.
  bool header_written_ = false;
  size_t next_ = 0;
  uint64_t written_ = 0;
};

}  // namespace lowp

#endif  // LOWP_IO_GGUF_WRITER_H_
