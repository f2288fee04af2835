// The tensors of one or more files, memory-mapped read-only: a .safetensors
// file, a sharded checkpoint (model.safetensors.index.json and its shards), a
// GGUF file (llama.cpp's; block types are DType::kGgml views), a NumPy .npy
// file. A checkpoint larger than RAM streams through: the data is
// read from the mapping on demand and Release() drops a tensor's pages once
// it has been processed.
#ifndef LOWP_IO_TENSOR_SET_H_
#define LOWP_IO_TENSOR_SET_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "io/tensor.h"

namespace lowp {

class MappedFile;   // io/mapped_file.h
struct ParsedGguf;  // io/gguf.h

class TensorSet {
 public:
  // Opens `path` by its name: "*.safetensors", "*.safetensors.index.json"
  // (every shard it names, checked against the index), "*.gguf", "*.npy"
  // (one tensor named after the file's stem). FP8 weights of a safetensors
  // checkpoint come with their scales (io/scaled_tensors.h) and GPTQ, AWQ
  // and compressed-tensors weights are composed from their packed parts
  // (io/packed_tensors.h); the config.json beside the file, if any, says the
  // layout. Errors name the file and,
  // where one is at fault, the tensor.
  static absl::StatusOr<TensorSet> Open(const std::string& path);
  // Several paths into one set; a tensor name seen twice is an error.
  static absl::StatusOr<TensorSet> OpenAll(const std::vector<std::string>& paths);
  // Tensors in memory the caller keeps alive (a NumPy array, say): no file
  // behind them, Release leaves them alone. A name seen twice, or bytes that
  // do not match the dtype and shape, is InvalidArgument.
  static absl::StatusOr<TensorSet> FromViews(std::vector<TensorView> views);

  TensorSet(TensorSet&&) noexcept;
  TensorSet& operator=(TensorSet&&) noexcept;
  ~TensorSet();

  // In file order (shards in the order the index first names them).
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // The safetensors "__metadata__" of the (first) file, if any.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The header of the (first) GGUF file, typed metadata and tensor infos;
  // null when the set holds no GGUF file.
  const ParsedGguf* gguf() const { return gguf_.get(); }

  // Drops the pages of `tensor` from this process's memory (madvise) and
  // from the page cache; the view stays valid and re-reads the file if used
  // again.
  void Release(const TensorView& tensor) const;
  // The same for part of a tensor's bytes (MeasureOptions::release calls it
  // batch by batch, so even one tensor larger than RAM streams through).
  // Bytes outside this set's files are left alone. With `keep_cached` the
  // pages leave this process's memory but stay in the page cache, for a
  // caller that reads them again soon (the evaluator's next batch).
  void Release(std::span<const uint8_t> bytes, bool keep_cached = false) const;

  // OK while every file behind the set still has the size it had when
  // opened; DataLoss naming the file that shrank while it was read (its
  // views then read zeros past the new end, which must not be reported).
  // Ask before reporting or writing anything computed from the views.
  absl::Status CheckIntact() const;
  // The paths of the files behind the set (an index's shards, not the index).
  std::vector<std::string> files() const;

 private:
  TensorSet();
  // One path, its scales not yet attached.
  static absl::StatusOr<TensorSet> OpenFile(const std::string& path);
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<TensorView> tensors_;
  std::map<std::string, std::string> metadata_;
  std::shared_ptr<const ParsedGguf> gguf_;
};

// Tensor name patterns: comma-separated globs ('*' any run, '?' one
// character; whitespace around a glob is ignored); a name matches if any glob
// matches all of it. An empty pattern matches everything.
bool MatchesPattern(absl::string_view pattern, absl::string_view name);

}  // namespace lowp

#endif  // LOWP_IO_TENSOR_SET_H_
