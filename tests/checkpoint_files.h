// What tests that write small checkpoints share: a scratch directory
// removed with its contents, tensors as raw bytes, and a safetensors file
// of them.
#ifndef LOWP_TESTS_CHECKPOINT_FILES_H_
#define LOWP_TESTS_CHECKPOINT_FILES_H_

#include <stdlib.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "io/safetensors.h"
#include "io/tensor.h"

namespace lowp::testing {

class TempDir {
 public:
  TempDir() {
    std::string t = ::testing::TempDir() + "/lowp_checkpoint_XXXXXX";
    path_ = mkdtemp(t.data());
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string operator/(absl::string_view name) const { return absl::StrCat(path_, "/", name); }

 private:
  std::string path_;
};

struct Tensor {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

template <typename T>
std::vector<uint8_t> Bytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}

inline absl::Status WriteSafetensors(const std::string& path, const std::vector<Tensor>& tensors) {
  std::vector<SafetensorsWriter::Entry> entries;
  for (const Tensor& t : tensors) entries.push_back({t.name, t.dtype, t.shape});
  auto writer = SafetensorsWriter::Create(path, entries);
  if (!writer.ok()) return writer.status();
  for (const Tensor& t : tensors) {
    if (absl::Status s = (*writer)->Write(t.bytes); !s.ok()) return s;
  }
  return (*writer)->Finish();
}

}  // namespace lowp::testing

#endif  // LOWP_TESTS_CHECKPOINT_FILES_H_
