// What a tensor file holds (`lowp tensors`, lowp.tensors): each tensor's
// name, type, shape, bytes and bits per weight, and with metadata the GGUF
// key/value pairs (typed) or the safetensors "__metadata__".
#ifndef LOWP_API_TENSORS_H_
#define LOWP_API_TENSORS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace lowp::api {

struct TensorsOptions {
  std::vector<std::string> files;  // .safetensors, .safetensors.index.json, .gguf, .npy
  std::string tensors;             // comma-separated globs on names; empty: all
  bool metadata = false;
};

struct TensorEntry {
  std::string name;
  std::string file;
  std::string type;            // "F32", "BF16", or the ggml type ("q4_K")
  std::vector<int64_t> shape;  // row-major: the last dimension is the row
  uint64_t elements = 0;
  uint64_t bytes = 0;
  double bits_per_weight = 0;  // bytes * 8 / elements (0 for an empty tensor)
};

struct MetadataEntry {
  std::string key;
  std::string type;      // GGUF: "u32", "string", "array[string]", "array[array[i32]]"; safetensors: "string"
  nlohmann::json value;  // arrays in full
  std::string text;      // the value as text, long arrays cut (FormatGgufValue)
};

struct FileEntry {
  std::string path;
  std::string format;  // "gguf", "safetensors", "safetensors index", "npy"
  uint32_t gguf_version = 0;
  uint64_t alignment = 0;  // GGUF's
  std::vector<MetadataEntry> metadata;  // only when asked
};

struct TensorsResult {
  std::vector<FileEntry> files;
  std::vector<TensorEntry> tensors;  // in file order
  uint64_t bytes = 0;                // of the tensors listed
  uint64_t elements = 0;
};

// Errors name the file (and the entry at fault) or the option (tensors).
absl::StatusOr<TensorsResult> Tensors(const TensorsOptions& options);
nlohmann::json ToJson(const TensorsResult& result);

}  // namespace lowp::api

#endif  // LOWP_API_TENSORS_H_
