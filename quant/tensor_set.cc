#include "quant/tensor_set.h"

#include <limits>
#include <map>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "nlohmann/json.hpp"
#include "quant/npy.h"
#include "quant/output_file.h"
#include "quant/safetensors.h"

namespace lowp {
namespace {

// Whether `text` can be a string of a JSON header, i.e. is UTF-8 (a tensor
// named after an .npy file's stem need not be).
bool IsUtf8(const std::string& text) {
  try {
    (void)nlohmann::json(text).dump();
    return true;
  } catch (const nlohmann::json::type_error&) {
    return false;
  }
}

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

absl::StatusOr<TensorSet> TensorSet::Open(const std::string& path) {
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
  if (!safetensors && !absl::EndsWith(path, ".npy")) {
    return absl::InvalidArgumentError(
        absl::StrCat(path,
                     ": unknown kind of tensor file (expected *.safetensors, "
                     "*.safetensors.index.json or *.npy)"));
  }
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  if (safetensors) {
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

absl::StatusOr<TensorSet> TensorSet::OpenAll(const std::vector<std::string>& paths) {
  TensorSet all;
  std::map<std::string, std::string> file_of;  // tensor -> file
  bool first = true;
  for (const std::string& path : paths) {
    absl::StatusOr<TensorSet> set = Open(path);
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
    first = false;
    for (auto& file : set->files_) all.files_.push_back(std::move(file));
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

void TensorSet::Release(std::span<const uint8_t> bytes) const {
  for (const auto& file : files_) {
    if (file->Contains(bytes)) {
      file->Release(bytes);
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

struct SafetensorsWriter::State {
  std::string path;
  std::unique_ptr<OutputFile> file;
  std::vector<Entry> entries;
  std::vector<uint64_t> sizes;  // bytes of each tensor
  size_t current = 0;           // tensor being written
  uint64_t written = 0;         // bytes of it written so far
  bool failed = false;

  absl::Status Fail(absl::Status status) {
    failed = true;
    file.reset();  // removes the temporary
    return status;
  }
};

absl::StatusOr<std::unique_ptr<SafetensorsWriter>> SafetensorsWriter::Create(
    const std::string& path, const std::vector<Entry>& tensors,
    const std::map<std::string, std::string>& metadata) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json meta = nlohmann::ordered_json::object();
    for (const auto& [key, value] : metadata) {
      if (!IsUtf8(key) || !IsUtf8(value)) {
        return absl::InvalidArgumentError(absl::StrCat(
            path, ": metadata \"", key, "\" is not UTF-8 text (a safetensors header is JSON)"));
      }
      meta[key] = value;
    }
    header["__metadata__"] = std::move(meta);
  }
  auto state = std::make_unique<State>();
  state->path = path;
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const Entry& entry : tensors) {
    if (entry.name.empty() || entry.name == "__metadata__") {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": invalid tensor name \"", entry.name, "\""));
    }
    if (!IsUtf8(entry.name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor name \"", entry.name,
                       "\" is not UTF-8 text (a safetensors header is JSON)"));
    }
    if (!names.insert(entry.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor \"", entry.name, "\" declared twice"));
    }
    absl::StatusOr<int64_t> elements =
        ShapeElements(entry.shape, absl::StrCat(path, ": tensor \"", entry.name, "\""));
    if (!elements.ok()) return elements.status();
    const uint64_t width = DTypeBytes(entry.dtype);
    const uint64_t count = static_cast<uint64_t>(*elements);
    if (count > (std::numeric_limits<uint64_t>::max() - offset) / width) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor \"", entry.name, "\": byte size overflows"));
    }
    const uint64_t size = count * width;
    header[entry.name] = {{"dtype", std::string(DTypeName(entry.dtype))},
                          {"shape", entry.shape},
                          {"data_offsets", {offset, offset + size}}};
    offset += size;
    state->sizes.push_back(size);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data starts 8-byte aligned
  state->entries = tensors;

  absl::StatusOr<std::unique_ptr<OutputFile>> file = OutputFile::Create(path);
  if (!file.ok()) return file.status();
  state->file = *std::move(file);
  uint8_t length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<uint8_t>(uint64_t{text.size()} >> (8 * i));
  if (absl::Status s = state->file->Write(length); !s.ok()) return s;
  if (absl::Status s = state->file->Write(text); !s.ok()) return s;
  std::unique_ptr<SafetensorsWriter> writer(new SafetensorsWriter());
  writer->state_ = std::move(state);
  return writer;
}

SafetensorsWriter::~SafetensorsWriter() = default;

absl::Status SafetensorsWriter::Write(std::span<const uint8_t> bytes) {
  State& s = *state_;
  if (s.failed || s.file == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(s.path, ": the writer has failed or finished"));
  }
  while (!bytes.empty()) {
    while (s.current < s.sizes.size() && s.written == s.sizes[s.current]) {
      ++s.current;
      s.written = 0;
    }
    if (s.current == s.sizes.size()) {
      return s.Fail(absl::InvalidArgumentError(absl::StrCat(
          s.path, ": ", bytes.size(), " bytes written beyond the end of the last tensor")));
    }
    const uint64_t n = std::min<uint64_t>(bytes.size(), s.sizes[s.current] - s.written);
    if (absl::Status status = s.file->Write(bytes.first(n)); !status.ok()) return s.Fail(status);
    s.written += n;
    bytes = bytes.subspan(n);
  }
  return absl::OkStatus();
}

absl::Status SafetensorsWriter::Finish() {
  State& s = *state_;
  if (s.failed || s.file == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat(s.path, ": the writer has failed or finished"));
  }
  while (s.current < s.sizes.size() && s.written == s.sizes[s.current]) {
    ++s.current;
    s.written = 0;
  }
  if (s.current < s.sizes.size()) {
    return s.Fail(absl::FailedPreconditionError(
        absl::StrCat(s.path, ": tensor \"", s.entries[s.current].name, "\" has ", s.written,
                     " of its ", s.sizes[s.current], " bytes written")));
  }
  if (absl::Status status = s.file->Commit(); !status.ok()) return s.Fail(status);
  s.file.reset();
  return absl::OkStatus();
}

}  // namespace lowp
