#include "io/tensor_set.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "io/gguf.h"
#include "io/npy.h"
#include "io/packed_tensors.h"
#include "io/safetensors.h"
#include "io/scaled_tensors.h"
#include "nlohmann/json.hpp"

namespace lowp {
namespace {

std::string Directory(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

// Glob match of all of `name`: '*' any run, '?' one character.
bool GlobMatches(absl::string_view glob, absl::string_view name) {
  size_t g = 0, n = 0;
  size_t star = absl::string_view::npos, star_n = 0;
  while (n < name.size()) {
    if (g < glob.size() && (glob[g] == '?' || glob[g] == name[n])) {
      ++g;
      ++n;
    } else if (g < glob.size() && glob[g] == '*') {
      star = g++;
      star_n = n;
    } else if (star != absl::string_view::npos) {
      g = star + 1;
      n = ++star_n;
    } else {
      return false;
    }
  }
  while (g < glob.size() && glob[g] == '*') ++g;
  return g == glob.size();
}

}  // namespace

TensorSet::TensorSet() = default;
TensorSet::TensorSet(TensorSet&&) noexcept = default;
TensorSet& TensorSet::operator=(TensorSet&&) noexcept = default;
TensorSet::~TensorSet() = default;

absl::StatusOr<TensorSet> TensorSet::OpenFile(const std::string& path) {
  TensorSet set;
  if (absl::EndsWith(path, ".safetensors.index.json")) {
    absl::StatusOr<std::unique_ptr<MappedFile>> index_file = MappedFile::Open(path);
    if (!index_file.ok()) return index_file.status();
    absl::StatusOr<ParsedSafetensorsIndex> index =
        ParseSafetensorsIndex((*index_file)->bytes(), path);
    if (!index.ok()) return index.status();
    std::map<std::string, std::string> shard_of;  // tensor -> shard
    for (const auto& [tensor, shard] : index->weight_map) shard_of[tensor] = shard;
    const std::string dir = Directory(path);
    for (const std::string& shard : index->shards) {
      absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(dir + shard);
      if (!file.ok()) {
        return absl::Status(file.status().code(), absl::StrCat(path, ": shard \"", shard,
                                                               "\": ", file.status().message()));
      }
      absl::StatusOr<ParsedSafetensors> parsed = ParseSafetensors((*file)->bytes(), dir + shard);
      if (!parsed.ok()) {
        return absl::Status(
            parsed.status().code(),
            absl::StrCat(path, ": shard \"", shard, "\": ", parsed.status().message()));
      }
      std::set<std::string> in_shard;
      for (TensorView& view : parsed->tensors) {
        auto it = shard_of.find(view.name);
        if (it == shard_of.end()) {
          return absl::InvalidArgumentError(absl::StrCat(path, ": shard \"", shard,
                                                         "\" holds tensor \"", view.name,
                                                         "\", which the weight_map does not name"));
        }
        if (it->second != shard) {
          return absl::InvalidArgumentError(
              absl::StrCat(path, ": shard \"", shard, "\" holds tensor \"", view.name,
                           "\", which the weight_map puts in shard \"", it->second, "\""));
        }
        in_shard.insert(view.name);
        set.tensors_.push_back(std::move(view));
      }
      for (const auto& [tensor, tensor_shard] : index->weight_map) {
        if (tensor_shard == shard && !in_shard.count(tensor)) {
          return absl::InvalidArgumentError(absl::StrCat(path, ": the weight_map puts tensor \"",
                                                         tensor, "\" in shard \"", shard,
                                                         "\", which does not hold it"));
        }
      }
      if (set.files_.empty()) set.metadata_ = std::move(parsed->metadata);
      set.files_.push_back(std::move(*file));
    }
    return set;
  }
  const bool safetensors = absl::EndsWith(path, ".safetensors");
  const bool gguf = absl::EndsWith(path, ".gguf");
  if (!safetensors && !gguf && !absl::EndsWith(path, ".npy")) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": unknown kind of tensor file (expected *.safetensors, "
                     "*.safetensors.index.json, *.gguf or *.npy)"));
  }
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  if (gguf) {
    absl::StatusOr<ParsedGguf> parsed = ParseGguf((*file)->bytes(), path);
    if (!parsed.ok()) return parsed.status();
    set.tensors_ = GgufViews(*parsed, (*file)->bytes(), path);
    set.gguf_ = std::make_shared<const ParsedGguf>(std::move(*parsed));
  } else if (safetensors) {
    absl::StatusOr<ParsedSafetensors> parsed = ParseSafetensors((*file)->bytes(), path);
    if (!parsed.ok()) return parsed.status();
    set.tensors_ = std::move(parsed->tensors);
    set.metadata_ = std::move(parsed->metadata);
  } else {
    absl::StatusOr<TensorView> view = ParseNpy((*file)->bytes(), path);
    if (!view.ok()) return view.status();
    set.tensors_.push_back(std::move(*view));
  }
  set.files_.push_back(std::move(*file));
  return set;
}

absl::StatusOr<TensorSet> TensorSet::Open(const std::string& path) { return OpenAll({path}); }

absl::StatusOr<TensorSet> TensorSet::OpenAll(const std::vector<std::string>& paths) {
  TensorSet all;
  std::map<std::string, std::string> file_of;  // tensor -> file
  bool first = true;
  for (const std::string& path : paths) {
    absl::StatusOr<TensorSet> set = OpenFile(path);
    if (!set.ok()) return set.status();
    for (TensorView& view : set->tensors_) {
      auto [it, inserted] = file_of.emplace(view.name, view.file);
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat("tensor \"", view.name, "\" is both in ",
                                                       it->second, " and in ", view.file));
      }
      all.tensors_.push_back(std::move(view));
    }
    if (first) all.metadata_ = std::move(set->metadata_);
    if (all.gguf_ == nullptr) all.gguf_ = std::move(set->gguf_);
    first = false;
    for (auto& file : set->files_) all.files_.push_back(std::move(file));
  }
  // Packed weights from their parts (io/packed_tensors.h) and FP8 weights
  // with their scale tensors (io/scaled_tensors.h), whichever files they are
  // in; the config.json beside the first safetensors file says how the
  // checkpoint was quantized.
  const auto safetensors = std::find_if(paths.begin(), paths.end(), [](const std::string& p) {
    return absl::EndsWith(p, ".safetensors") || absl::EndsWith(p, ".safetensors.index.json");
  });
  if (safetensors != paths.end()) {
    absl::StatusOr<CheckpointQuantization> quantization =
        ReadCheckpointQuantization(Directory(*safetensors));
    if (!quantization.ok()) return quantization.status();
    if (absl::Status s = AttachQuantizedParts(all.tensors_, *quantization); !s.ok()) return s;
  }
  return all;
}

absl::StatusOr<TensorSet> TensorSet::FromViews(std::vector<TensorView> views) {
  TensorSet set;
  std::set<std::string> names;
  for (const TensorView& v : views) {
    if (!names.insert(v.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", v.name, "\" is given twice"));
    }
    if (v.dtype == DType::kGgml) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor \"", v.name, "\": ggml blocks come only from GGUF files"));
    }
    if (v.dtype == DType::kPacked || v.packed != nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor \"", v.name, "\": packed weights come only from checkpoints and their config"));
    }
    absl::StatusOr<int64_t> elements = ShapeElements(v.shape, v.name);
    if (!elements.ok()) return elements.status();
    if (v.bytes.size() != static_cast<uint64_t>(*elements) * DTypeBytes(v.dtype)) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", v.name, "\": ", v.bytes.size(),
                                                     " bytes do not hold its shape and dtype"));
    }
  }
  set.tensors_ = std::move(views);
  return set;
}

void TensorSet::Release(const TensorView& tensor) const { Release(tensor.bytes); }

void TensorSet::Release(std::span<const uint8_t> bytes, bool keep_cached) const {
  for (const auto& file : files_) {
    if (file->Contains(bytes)) {
      file->Release(bytes, keep_cached);
      return;
    }
  }
}

absl::Status TensorSet::CheckIntact() const {
  for (const auto& file : files_) {
    if (absl::Status s = file->CheckIntact(); !s.ok()) return s;
  }
  return absl::OkStatus();
}

std::vector<std::string> TensorSet::files() const {
  std::vector<std::string> paths;
  for (const auto& file : files_) paths.push_back(file->path());
  return paths;
}

bool MatchesPattern(absl::string_view pattern, absl::string_view name) {
  if (pattern.empty()) return true;
  for (absl::string_view glob : absl::StrSplit(pattern, ',')) {
    if (GlobMatches(absl::StripAsciiWhitespace(glob), name)) return true;
  }
  return false;
}

}  // namespace lowp
