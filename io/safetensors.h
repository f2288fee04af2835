// The safetensors format (https://github.com/huggingface/safetensors): an
// 8-byte little-endian header length N, N bytes of JSON
//   {"__metadata__": {"key": "value"},
//    "name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...}
// then the data buffer; offsets are relative to the start of the buffer and
// the tensors tile it exactly, as the reference implementation requires.
#ifndef LOWP_IO_SAFETENSORS_H_
#define LOWP_IO_SAFETENSORS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "io/mapped_file.h"
#include "io/tensor.h"

namespace lowp {

// The largest header safetensors itself accepts.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

struct ParsedSafetensors {
  std::vector<TensorView> tensors;              // in data order; bytes point into the parsed span
  std::map<std::string, std::string> metadata;  // "__metadata__"
};

// Parses and validates a whole safetensors file image. `file_name` is used in
// messages and as TensorView::file. InvalidArgument naming the file (and the
// tensor at fault) for anything the reference implementation rejects, plus
// duplicate keys.
absl::StatusOr<ParsedSafetensors> ParseSafetensors(std::span<const uint8_t> file,
                                                   absl::string_view file_name);

// A sharded checkpoint's "*.safetensors.index.json":
//   {"metadata": {...}, "weight_map": {"tensor": "shard file name", ...}}
struct ParsedSafetensorsIndex {
  std::vector<std::string> shards;  // in the order the weight_map first names them
  std::vector<std::pair<std::string, std::string>> weight_map;  // tensor -> shard, file order
};

// Parses an index file's text. Shard names must be plain file names (no '/',
// no '\\', not "." or "..", not empty); duplicate keys are rejected. Errors name
// `file_name` and the tensor at fault.
absl::StatusOr<ParsedSafetensorsIndex> ParseSafetensorsIndex(std::span<const uint8_t> text,
                                                             absl::string_view file_name);

// Writes a safetensors file tensor by tensor, never holding more than one
// piece in memory: the header is written first from the declared tensors,
// then each tensor's bytes in declaration order (in any number of pieces).
// The file appears at `path` only when Finish() succeeds (written to a
// temporary beside it and renamed); on error or destruction without
// Finish() nothing is left behind.
class SafetensorsWriter {
 public:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
  };
  static absl::StatusOr<std::unique_ptr<SafetensorsWriter>> Create(
      const std::string& path, const std::vector<Entry>& tensors,
      const std::map<std::string, std::string>& metadata = {});
  ~SafetensorsWriter();

  // Appends bytes of the current tensor; moves to the next one when full.
  absl::Status Write(std::span<const uint8_t> bytes);
  // Checks every tensor was written completely, then renames into place.
  absl::Status Finish();

 private:
  SafetensorsWriter() = default;
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace lowp

#endif  // LOWP_IO_SAFETENSORS_H_
