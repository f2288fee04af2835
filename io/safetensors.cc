#include "io/safetensors.h"

#include <algorithm>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "io/output_file.h"
#include "io/strict_json.h"

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


using Json = nlohmann::ordered_json;

absl::StatusOr<Json> ParseJson(absl::string_view text, absl::string_view file_name,
                               absl::string_view what) {
  return ParseStrictJson(text, absl::StrCat(file_name, ": ", what));
}

absl::string_view TypeName(const Json& value) {
  if (value.is_number_unsigned()) return "non-negative integer";
  if (value.is_number_integer()) return "negative integer";
  if (value.is_number_float()) return "non-integer number";
  return value.type_name();
}

absl::Status TensorError(absl::string_view file_name, absl::string_view name,
                         absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat(file_name, ": tensor \"", name, "\": ", message));
}

struct Entry {
  TensorView view;
  uint64_t begin = 0;
  uint64_t end = 0;
};

absl::StatusOr<Entry> ParseEntry(const std::string& name, const Json& value,
                                 absl::string_view file_name) {
  Entry entry;
  entry.view.name = name;
  entry.view.file = std::string(file_name);
  if (!value.is_object()) {
    return TensorError(file_name, name,
                       absl::StrCat("entry is a ", TypeName(value), ", not an object"));
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(field)) {
      return TensorError(file_name, name, absl::StrCat("missing field \"", field, "\""));
    }
  }
  const Json& dtype = value["dtype"];
  if (!dtype.is_string()) {
    return TensorError(file_name, name,
                       absl::StrCat("\"dtype\" is a ", TypeName(dtype), ", not a string"));
  }
  absl::StatusOr<DType> parsed = ParseDType(dtype.get<std::string>());
  if (!parsed.ok()) return TensorError(file_name, name, parsed.status().message());
  entry.view.dtype = *parsed;

  const Json& shape = value["shape"];
  if (!shape.is_array()) {
    return TensorError(file_name, name,
                       absl::StrCat("\"shape\" is a ", TypeName(shape), ", not an array"));
  }
  for (const Json& dim : shape) {
    if (dim.is_number_unsigned()) {
      const uint64_t d = dim.get<uint64_t>();
      if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        return TensorError(file_name, name, absl::StrCat("dimension ", d, " overflows int64"));
      }
      entry.view.shape.push_back(static_cast<int64_t>(d));
    } else if (dim.is_number_integer()) {
      return TensorError(file_name, name,
                         absl::StrCat("negative dimension ", dim.get<int64_t>(), " in \"shape\""));
    } else {
      return TensorError(file_name, name,
                         absl::StrCat("\"shape\" holds a ", TypeName(dim), ", not an integer"));
    }
  }
  const std::string what = absl::StrCat(file_name, ": tensor \"", name, "\"");
  absl::StatusOr<int64_t> elements = ShapeElements(entry.view.shape, what);
  if (!elements.ok()) return elements.status();

  const Json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
      !offsets[1].is_number_unsigned()) {
    return TensorError(file_name, name,
                       "\"data_offsets\" must be an array of two non-negative integers");
  }
  entry.begin = offsets[0].get<uint64_t>();
  entry.end = offsets[1].get<uint64_t>();
  if (entry.end < entry.begin) {
    return TensorError(file_name, name,
                       absl::StrCat("data_offsets [", entry.begin, ", ", entry.end,
                                    "] are out of order (end before begin)"));
  }
  const uint64_t count = static_cast<uint64_t>(*elements);
  absl::StatusOr<uint64_t> bytes = DTypeStorageBytes(entry.view.dtype, count, "its data");
  if (!bytes.ok()) return TensorError(file_name, name, bytes.status().message());
  if (*bytes != entry.end - entry.begin) {
    return TensorError(
        file_name, name,
        absl::StrCat("shape [", absl::StrJoin(entry.view.shape, ", "), "] of ",
                     DTypeName(entry.view.dtype), " has ", count, " elements, but data_offsets [",
                     entry.begin, ", ", entry.end, "] hold ", entry.end - entry.begin, " bytes"));
  }
  return entry;
}

}  // namespace

absl::StatusOr<ParsedSafetensors> ParseSafetensors(std::span<const uint8_t> file,
                                                   absl::string_view file_name) {
  if (file.size() < 8) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_name, ": ", file.size(), " bytes, too short for a safetensors header length"));
  }
  uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | file[i];
  if (header_bytes > kMaxSafetensorsHeaderBytes) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": header length ", header_bytes,
                                                   " is above the limit of ",
                                                   kMaxSafetensorsHeaderBytes, " bytes"));
  }
  if (header_bytes > file.size() - 8) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": header length ", header_bytes,
                                                   " is beyond the end of the file (", file.size(),
                                                   " bytes)"));
  }
  const absl::string_view text(reinterpret_cast<const char*>(file.data() + 8), header_bytes);
  absl::StatusOr<Json> header = ParseJson(text, file_name, "header");
  if (!header.ok()) return header.status();
  if (!header->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": header is a ", TypeName(*header), ", not a JSON object"));
  }
  const std::span<const uint8_t> data = file.subspan(8 + header_bytes);
  ParsedSafetensors result;
  std::vector<Entry> entries;
  for (const auto& [key, value] : header->items()) {
    if (key == "__metadata__") {
      if (value.is_null()) continue;
      if (!value.is_object()) {
        return absl::InvalidArgumentError(absl::StrCat(file_name, ": \"__metadata__\" is a ",
                                                       TypeName(value), ", not an object"));
      }
      for (const auto& [meta_key, meta_value] : value.items()) {
        if (!meta_value.is_string()) {
          return absl::InvalidArgumentError(
              absl::StrCat(file_name, ": \"__metadata__\" value of \"", meta_key, "\" is a ",
                           TypeName(meta_value), ", not a string"));
        }
        result.metadata[meta_key] = meta_value.get<std::string>();
      }
      continue;
    }
    absl::StatusOr<Entry> entry = ParseEntry(key, value, file_name);
    if (!entry.ok()) return entry.status();
    if (entry->end > data.size()) {
      return TensorError(file_name, key,
                         absl::StrCat("data_offsets [", entry->begin, ", ", entry->end,
                                      "] are out of bounds of the data buffer (", data.size(),
                                      " bytes): the file is truncated or the offsets wrong"));
    }
    entries.push_back(std::move(*entry));
  }
  // The tensors must tile the data buffer exactly, as safetensors requires.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  uint64_t expected = 0;
  const Entry* previous = nullptr;
  for (const Entry& entry : entries) {
    if (entry.begin < expected) {
      return TensorError(
          file_name, entry.view.name,
          absl::StrCat("data_offsets [", entry.begin, ", ", entry.end, "] overlap tensor \"",
                       previous->view.name, "\" [", previous->begin, ", ", previous->end, "]"));
    }
    if (entry.begin > expected) {
      return TensorError(
          file_name, entry.view.name,
          absl::StrCat("data_offsets [", entry.begin, ", ", entry.end, "] leave a gap of ",
                       entry.begin - expected, " bytes before them (at byte ", expected,
                       " of the data buffer)"));
    }
    expected = entry.end;
    previous = &entry;
  }
  if (expected != data.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        file_name, ": the tensors cover ", expected, " bytes of the data buffer, but it holds ",
        data.size(), " (", data.size() - expected, " bytes after the last tensor)"));
  }
  result.tensors.reserve(entries.size());
  for (Entry& entry : entries) {
    entry.view.bytes = data.subspan(entry.begin, entry.end - entry.begin);
    result.tensors.push_back(std::move(entry.view));
  }
  return result;
}

absl::StatusOr<ParsedSafetensorsIndex> ParseSafetensorsIndex(std::span<const uint8_t> text,
                                                             absl::string_view file_name) {
  absl::StatusOr<Json> index =
      ParseJson(absl::string_view(reinterpret_cast<const char*>(text.data()), text.size()),
                file_name, "index");
  if (!index.ok()) return index.status();
  if (!index->is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": index is a ", TypeName(*index), ", not a JSON object"));
  }
  if (index->contains("metadata")) {
    const Json& metadata = (*index)["metadata"];
    if (!metadata.is_null() && !metadata.is_object()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file_name, ": \"metadata\" is a ", TypeName(metadata), ", not an object"));
    }
  }
  if (!index->contains("weight_map")) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": missing \"weight_map\""));
  }
  const Json& weight_map = (*index)["weight_map"];
  if (!weight_map.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(file_name, ": \"weight_map\" is a ", TypeName(weight_map), ", not an object"));
  }
  ParsedSafetensorsIndex result;
  std::set<std::string> seen;
  for (const auto& [tensor, shard_value] : weight_map.items()) {
    if (!shard_value.is_string()) {
      return absl::InvalidArgumentError(absl::StrCat(file_name, ": tensor \"", tensor,
                                                     "\": shard is a ", TypeName(shard_value),
                                                     ", not a string"));
    }
    const std::string shard = shard_value.get<std::string>();
    if (shard.empty() || shard.find('/') != std::string::npos ||
        shard.find('\\') != std::string::npos || shard == ".." ||
        shard.find('\0') != std::string::npos || shard == ".") {
      return absl::InvalidArgumentError(
          absl::StrCat(file_name, ": tensor \"", tensor, "\": shard \"", shard,
                       "\" is not a plain file name in the index's directory"));
    }
    if (seen.insert(shard).second) result.shards.push_back(shard);
    result.weight_map.emplace_back(tensor, shard);
  }
  return result;
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
    const uint64_t count = static_cast<uint64_t>(*elements);
    absl::StatusOr<uint64_t> bytes =
        DTypeStorageBytes(entry.dtype, count, absl::StrCat(path, ": tensor \"", entry.name, "\""));
    if (!bytes.ok()) return bytes.status();
    if (*bytes > std::numeric_limits<uint64_t>::max() - offset) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": tensor \"", entry.name, "\": byte size overflows"));
    }
    const uint64_t size = *bytes;
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
