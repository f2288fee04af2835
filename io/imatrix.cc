#include "io/imatrix.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "io/byte_reader.h"
#include "absl/strings/strip.h"
#include "io/gguf.h"
#include "io/gguf_names.h"
#include "io/gguf_writer.h"
#include "io/mapped_file.h"
#include "io/output_file.h"

namespace lowp {
namespace {

static_assert(std::endian::native == std::endian::little,
              "both formats are little-endian and are copied as they are in memory");

constexpr absl::string_view kSum2Suffix = ".in_sum2";
constexpr absl::string_view kSumSuffix = ".in_sum";
constexpr absl::string_view kCountsSuffix = ".counts";
// The chunk size a .dat is read with: llama-imatrix's default --ctx-size
// (load_imatrix_legacy multiplies by its n_ctx / n_parallel). A power of two,
// so the quotient sum2 / count is exactly the stored value / ncall.
constexpr uint32_t kLegacyChunkSize = 512;
// ggml's tensor names are at most 63 bytes (GGML_MAX_NAME 64 with the NUL).
constexpr size_t kMaxName = kMaxGgufNameBytes;
constexpr size_t kMaxEntryNameForGguf = kMaxName - kSum2Suffix.size();

// Names in messages: escaped, so a NUL or control byte shows as \000.
std::string Quote(absl::string_view s) { return absl::StrCat("\"", absl::CHexEscape(s), "\""); }

std::string EntryWhere(absl::string_view where, absl::string_view name) {
  return absl::StrCat(where, ": entry ", Quote(name), ": ");
}

absl::Status CheckValues(std::span<const float> values, absl::string_view what,
                         bool non_negative, bool whole, const std::string& where) {
  for (size_t i = 0; i < values.size(); ++i) {
    const float v = values[i];
    const char* wrong = nullptr;
    if (!std::isfinite(v)) {
      wrong = "is not finite";
    } else if (non_negative && v < 0) {
      wrong = "is negative";
    } else if (whole && v != std::nearbyint(v)) {
      wrong = "is not a whole number";
    }
    if (wrong != nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, what, "[", i, "] = ", v, " ", wrong));
    }
  }
  return absl::OkStatus();
}

absl::Status CheckName(absl::string_view name, const std::string& where) {
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(where, "the name is empty"));
  if (name.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(where, "the name holds a NUL byte"));
  }
  return absl::OkStatus();
}

absl::Status CheckDatasets(const std::vector<std::string>& datasets, absl::string_view where) {
  for (size_t i = 0; i < datasets.size(); ++i) {
    if (datasets[i].find('\0') != std::string::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": dataset ", i, " holds a NUL byte (llama.cpp passes dataset names as C strings)"));
    }
  }
  return absl::OkStatus();
}

// The float count of matrix m, for the flattened index k of a valid entry.
float CountOf(const ImatrixEntry& e, size_t k) {
  const size_t m = k / static_cast<size_t>(e.columns);
  return m < e.counts.size() ? e.counts[m] : 0.0f;
}

// quantize.cpp load_imatrix: sum2 / count, 1 where the count is 0.
float ValueAt(const ImatrixEntry& e, size_t k) {
  const float count = CountOf(e, k);
  return count > 0.0f ? e.sum2[k] / count : 1.0f;
}

absl::StatusOr<Imatrix> ParseLegacy(std::span<const uint8_t> file, absl::string_view file_name) {
  ByteReader r(file, file_name);
  if (file.empty()) return r.Error("the file is empty: not an importance matrix");
  r.set_where("legacy imatrix: ");
  absl::StatusOr<int32_t> n_entries = r.Read<int32_t>("the entry count");
  if (!n_entries.ok()) return n_entries.status();
  // The smallest entry: name length, a 1-byte name, ncall, nval, one value.
  constexpr size_t kMinEntry = 4 + 1 + 4 + 4 + 4;
  if (*n_entries < 1) {
    return r.Error(absl::StrCat("entry count ", *n_entries,
                                " (llama.cpp: \"no data in file\"); or not an imatrix file"));
  }
  if (static_cast<size_t>(*n_entries) > r.left() / kMinEntry) {
    return r.Error(absl::StrCat("entry count ", *n_entries, " cannot fit in the ", r.left(),
                                " bytes left; not an imatrix file?"));
  }
  Imatrix imatrix;
  imatrix.format = ImatrixFormat::kLegacyDat;
  imatrix.chunk_size = kLegacyChunkSize;
  for (int32_t i = 0; i < *n_entries; ++i) {
    r.set_where(absl::StrCat("legacy imatrix: entry ", i, " (at byte ", r.pos(), "): "));
    absl::StatusOr<int32_t> len = r.Read<int32_t>("the name length");
    if (!len.ok()) return len.status();
    if (*len < 1 || static_cast<size_t>(*len) > kMaxName) {
      return r.Error(absl::StrCat("name length ", *len, " is not 1 to ", kMaxName,
                                  " (ggml's longest tensor name)"));
    }
    if (static_cast<size_t>(*len) > r.left()) {
      return r.Error(absl::StrCat("the name of ", *len, " bytes runs past the end of the file (",
                                  r.left(), " bytes left)"));
    }
    const std::span<const uint8_t> name_bytes = r.Take(static_cast<size_t>(*len));
    ImatrixEntry e;
    e.name.assign(reinterpret_cast<const char*>(name_bytes.data()), name_bytes.size());
    r.set_where(absl::StrCat("legacy imatrix: entry ", i, " ", Quote(e.name), ": "));
    if (e.name.find('\0') != std::string::npos) return r.Error("the name holds a NUL byte");
    if (imatrix.FindExact(e.name) != nullptr) return r.Error("the name appears twice");
    absl::StatusOr<int32_t> ncall = r.Read<int32_t>("ncall");
    if (!ncall.ok()) return ncall.status();
    if (*ncall < 0) return r.Error(absl::StrCat("ncall ", *ncall, " is negative"));
    absl::StatusOr<int32_t> nval = r.Read<int32_t>("the value count");
    if (!nval.ok()) return nval.status();
    if (*nval < 1) return r.Error(absl::StrCat("value count ", *nval, " is not positive"));
    if (static_cast<size_t>(*nval) > r.left() / sizeof(float)) {
      return r.Error(absl::StrCat(*nval, " values run past the end of the file (", r.left(),
                                  " bytes left)"));
    }
    const std::span<const uint8_t> bytes = r.Take(static_cast<size_t>(*nval) * sizeof(float));
    e.columns = *nval;
    e.matrices = 1;
    e.sum2.resize(static_cast<size_t>(*nval));
    std::memcpy(e.sum2.data(), bytes.data(), bytes.size());
    const std::string where = absl::StrCat(file_name, ": legacy imatrix: entry ", Quote(e.name), ": ");
    if (absl::Status s = CheckValues(e.sum2, "value", true, false, where); !s.ok()) return s;
    // As load_imatrix_legacy rebuilds llama-imatrix's state, with a chunk
    // size of 512; ncall 0 (llama-quantize: the values as they are) as 1.
    constexpr float kScale = static_cast<float>(kLegacyChunkSize);
    for (size_t k = 0; k < e.sum2.size(); ++k) {
      const float scaled = e.sum2[k] * kScale;
      if (!std::isfinite(scaled)) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "value[", k, "] = ", e.sum2[k], " is too large (times ", kLegacyChunkSize,
            " it is not finite)"));
      }
      e.sum2[k] = scaled;
    }
    e.counts = {static_cast<float>(*ncall > 0 ? *ncall : 1) * kScale};
    if (absl::Status s = imatrix.Add(std::move(e)); !s.ok()) return s;
  }
  // The tail: nothing, or the chunk count and one dataset name, exactly.
  if (r.left() == 0) return imatrix;
  r.set_where(absl::StrCat("legacy imatrix: after the entries (at byte ", r.pos(), "): "));
  absl::StatusOr<int32_t> chunks = r.Read<int32_t>("the chunk count");
  if (!chunks.ok()) return chunks.status();
  if (*chunks < 0) return r.Error(absl::StrCat("chunk count ", *chunks, " is negative"));
  absl::StatusOr<int32_t> len = r.Read<int32_t>("the dataset name's length");
  if (!len.ok()) return len.status();
  if (*len < 0 || static_cast<size_t>(*len) > r.left()) {
    return r.Error(absl::StrCat("dataset name length ", *len, " is not 0 to the ", r.left(),
                                " bytes left"));
  }
  const std::span<const uint8_t> dataset = r.Take(static_cast<size_t>(*len));
  if (r.left() != 0) {
    return r.Error(absl::StrCat(r.left(), " bytes after the dataset name (at byte ", r.pos(),
                                "): the file should end there"));
  }
  imatrix.chunk_count = static_cast<uint32_t>(*chunks);
  if (!dataset.empty()) {
    imatrix.datasets.emplace_back(reinterpret_cast<const char*>(dataset.data()), dataset.size());
  }
  if (absl::Status s = CheckDatasets(imatrix.datasets, file_name); !s.ok()) return s;
  return imatrix;
}

std::vector<float> CopyFloats(const GgufTensorInfo& t, const ParsedGguf& gguf,
                              std::span<const uint8_t> file) {
  std::vector<float> out(static_cast<size_t>(t.elements));
  if (!out.empty()) {
    std::memcpy(out.data(), file.data() + gguf.data_offset + t.offset, out.size() * sizeof(float));
  }
  return out;
}

// The dimensions without ggml's trailing 1s (at least one).
std::vector<int64_t> Trimmed(std::vector<int64_t> ne) {
  while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
  if (ne.empty()) ne.push_back(1);
  return ne;
}

absl::StatusOr<Imatrix> ParseGgufImatrix(std::span<const uint8_t> file,
                                         absl::string_view file_name) {
  absl::StatusOr<ParsedGguf> parsed = ParseGguf(file, file_name);
  if (!parsed.ok()) return parsed.status();
  const ParsedGguf& gguf = *parsed;
  const auto error = [&](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(file_name, ": ", what));
  };
  const GgufValue* type = gguf.Find("general.type");
  if (type == nullptr) {
    return error("no general.type: a GGUF file but not an importance matrix (general.type "
                 "\"imatrix\")");
  }
  if (type->type != GgufType::kString || type->s != "imatrix") {
    return error(absl::StrCat("general.type is ", FormatGgufValue(*type),
                              ", not \"imatrix\": not an importance matrix"));
  }
  Imatrix imatrix;
  imatrix.format = ImatrixFormat::kGguf;
  const GgufValue* datasets = gguf.Find("imatrix.datasets");
  const GgufValue* chunk_count = gguf.Find("imatrix.chunk_count");
  const GgufValue* chunk_size = gguf.Find("imatrix.chunk_size");
  if (datasets == nullptr || chunk_count == nullptr || chunk_size == nullptr) {
    return error(absl::StrCat(
        "missing imatrix metadata (llama-quantize needs imatrix.datasets, imatrix.chunk_count "
        "and imatrix.chunk_size): ",
        datasets == nullptr ? "imatrix.datasets " : "",
        chunk_count == nullptr ? "imatrix.chunk_count " : "",
        chunk_size == nullptr ? "imatrix.chunk_size " : "", "absent"));
  }
  if (datasets->type != GgufType::kArray || datasets->element_type != GgufType::kString) {
    return error(absl::StrCat("imatrix.datasets is ", GgufTypeName(datasets->type),
                              datasets->type == GgufType::kArray
                                  ? absl::StrCat(" of ", GgufTypeName(datasets->element_type))
                                  : "",
                              ", not an array of string"));
  }
  for (const auto& [key, value] : {std::pair{"imatrix.chunk_count", chunk_count},
                                   std::pair{"imatrix.chunk_size", chunk_size}}) {
    if (value->type != GgufType::kU32) {
      return error(absl::StrCat(key, " is ", GgufTypeName(value->type), ", not u32"));
    }
  }
  if (chunk_size->u == 0) return error("imatrix.chunk_size is 0");
  imatrix.chunk_count = static_cast<uint32_t>(chunk_count->u);
  imatrix.chunk_size = static_cast<uint32_t>(chunk_size->u);
  for (const GgufValue& v : datasets->Elements()) imatrix.datasets.push_back(v.s);
  if (absl::Status s = CheckDatasets(imatrix.datasets, file_name); !s.ok()) return s;

  struct Group {
    const GgufTensorInfo* sum2 = nullptr;
    const GgufTensorInfo* sum = nullptr;
    const GgufTensorInfo* counts = nullptr;
  };
  std::map<std::string, Group, std::less<>> groups;
  for (const GgufTensorInfo& t : gguf.tensors) {
    absl::string_view name = t.name;
    if (absl::ConsumeSuffix(&name, kSum2Suffix)) {
      groups[std::string(name)].sum2 = &t;
    } else if (absl::ConsumeSuffix(&name, kSumSuffix)) {
      groups[std::string(name)].sum = &t;
    } else if (absl::ConsumeSuffix(&name, kCountsSuffix)) {
      groups[std::string(name)].counts = &t;
    }  // other tensors: ignored, as llama.cpp does
  }
  if (groups.empty()) {
    return error(absl::StrCat("no entries (no <name>.in_sum2 / <name>.counts tensors among its ",
                              gguf.tensors.size(), "; llama.cpp: \"no data in file\")"));
  }
  for (const auto& [name, g] : groups) {
    const std::string where = EntryWhere(file_name, name);
    const auto entry_error = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat(where, what));
    };
    if (g.sum2 == nullptr || g.counts == nullptr) {
      return entry_error(absl::StrCat(
          "has ", g.sum2 != nullptr ? "in_sum2" : (g.counts != nullptr ? "counts" : "in_sum"),
          " but no ", g.sum2 == nullptr ? "in_sum2" : "counts",
          " (llama.cpp: \"mismatched sums and counts\")"));
    }
    for (const GgufTensorInfo* t : {g.sum2, g.counts, g.sum}) {
      if (t != nullptr && t->type->type != ggml::Type::kF32) {
        return entry_error(absl::StrCat("tensor ", Quote(t->name), " is ", t->type->name,
                                        ", not f32"));
      }
    }
    const std::vector<int64_t> ne = Trimmed(g.sum2->ne);
    if (ne.size() > 2) {
      return entry_error(absl::StrCat("in_sum2 has ", ne.size(),
                                      " dimensions; llama.cpp writes [columns, matrices]"));
    }
    ImatrixEntry e;
    e.name = name;
    e.columns = ne[0];
    e.matrices = ne.size() > 1 ? ne[1] : 1;
    if (e.columns < 1 || e.matrices < 1) {
      return entry_error(absl::StrCat("in_sum2 is [", e.columns, ", ", e.matrices,
                                      "]: no values"));
    }
    if (g.counts->elements != e.matrices) {
      return entry_error(absl::StrCat("counts has ", g.counts->elements, " elements for the ",
                                      e.matrices, " matrices of in_sum2"));
    }
    if (g.sum != nullptr && g.sum->elements != g.sum2->elements) {
      return entry_error(absl::StrCat("in_sum has ", g.sum->elements, " elements, in_sum2 ",
                                      g.sum2->elements));
    }
    e.sum2 = CopyFloats(*g.sum2, gguf, file);
    e.counts = CopyFloats(*g.counts, gguf, file);
    if (g.sum != nullptr) e.sum = CopyFloats(*g.sum, gguf, file);
    if (absl::Status s = ValidateImatrixEntry(e, file_name); !s.ok()) return s;
    if (absl::Status s = imatrix.Add(std::move(e)); !s.ok()) return s;
  }
  return imatrix;
}

}  // namespace

std::vector<float> ImatrixEntry::Values() const {
  if (columns <= 0) return {};
  std::vector<float> out(sum2.size());
  for (size_t k = 0; k < out.size(); ++k) out[k] = ValueAt(*this, k);
  return out;
}

absl::Status ValidateImatrixEntry(const ImatrixEntry& e, absl::string_view where) {
  const std::string at = EntryWhere(where, e.name);
  if (absl::Status s = CheckName(e.name, at); !s.ok()) return s;
  int64_t values = 0;
  if (e.columns < 1 || e.matrices < 1 || __builtin_mul_overflow(e.columns, e.matrices, &values)) {
    return absl::InvalidArgumentError(absl::StrCat(at, "columns ", e.columns, " x matrices ",
                                                   e.matrices, " is not a positive size"));
  }
  if (e.sum2.size() != static_cast<uint64_t>(values)) {
    return absl::InvalidArgumentError(absl::StrCat(at, "sum2 has ", e.sum2.size(),
                                                   " values, not columns x matrices = ", e.columns,
                                                   " x ", e.matrices, " = ", values));
  }
  if (e.counts.size() != static_cast<uint64_t>(e.matrices)) {
    return absl::InvalidArgumentError(absl::StrCat(at, "counts has ", e.counts.size(),
                                                   " values, not one per matrix (", e.matrices,
                                                   ")"));
  }
  if (!e.sum.empty() && e.sum.size() != e.sum2.size()) {
    return absl::InvalidArgumentError(absl::StrCat(at, "sum has ", e.sum.size(),
                                                   " values, sum2 ", e.sum2.size()));
  }
  if (absl::Status s = CheckValues(e.sum2, "sum2", true, false, at); !s.ok()) return s;
  if (absl::Status s = CheckValues(e.counts, "counts", true, true, at); !s.ok()) return s;
  return CheckValues(e.sum, "sum", false, false, at);
}

absl::Status Imatrix::Add(ImatrixEntry entry) {
  if (absl::Status s = ValidateImatrixEntry(entry, "imatrix"); !s.ok()) return s;
  if (entries_.contains(entry.name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("imatrix: entry ", Quote(entry.name), " is there already"));
  }
  std::string name = entry.name;
  entries_.emplace(std::move(name), std::move(entry));
  return absl::OkStatus();
}

const ImatrixEntry* Imatrix::FindExact(absl::string_view name) const {
  const auto it = entries_.find(name);
  return it == entries_.end() ? nullptr : &it->second;
}

const ImatrixEntry* Imatrix::Find(absl::string_view tensor_name) const {
  if (const ImatrixEntry* e = FindExact(tensor_name)) return e;
  const std::optional<std::string> llama_cpp = LlamaCppName(tensor_name);
  for (const std::optional<std::string>& other : {llama_cpp, HuggingFaceName(tensor_name)}) {
    if (!other.has_value()) continue;
    if (const ImatrixEntry* e = FindExact(*other)) return e;
  }
  // A matrix of a fused tensor (Phi-3's attn_qkv and ffn_up, gate then up)
  // takes the fused tensor's input, which is its own.
  const std::string name = llama_cpp.value_or(std::string(tensor_name));
  absl::string_view stem = name;
  for (const auto& [part, fused] : {std::pair{".attn_q.weight", ".attn_qkv.weight"},
                                    std::pair{".attn_k.weight", ".attn_qkv.weight"},
                                    std::pair{".attn_v.weight", ".attn_qkv.weight"},
                                    std::pair{".ffn_gate.weight", ".ffn_up.weight"}}) {
    if (absl::ConsumeSuffix(&stem, part)) return FindExact(absl::StrCat(stem, fused));
  }
  return nullptr;
}

absl::Status Imatrix::Select(const std::vector<std::string>& include,
                             const std::vector<std::string>& exclude) {
  if (!include.empty() && !exclude.empty()) {
    return absl::InvalidArgumentError(
        "imatrix: include and exclude weights cannot be given together (as llama-quantize's "
        "--include-weights and --exclude-weights)");
  }
  const auto contains_any = [](absl::string_view name, const std::vector<std::string>& parts) {
    for (const std::string& p : parts) {
      if (absl::StrContains(name, p)) return true;
    }
    return false;
  };
  for (auto it = entries_.begin(); it != entries_.end();) {
    const bool drop = include.empty() ? contains_any(it->first, exclude)
                                      : !contains_any(it->first, include);
    it = drop ? entries_.erase(it) : std::next(it);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> Imatrix::Importance(absl::string_view tensor_name,
                                                       int64_t columns, int64_t matrices,
                                                       int64_t matrix) const {
  int64_t size = 0;
  if (columns < 1 || matrices < 1 || __builtin_mul_overflow(columns, matrices, &size)) {
    return absl::InvalidArgumentError(absl::StrCat("imatrix: ", Quote(tensor_name), ": columns ",
                                                   columns, " x matrices ", matrices,
                                                   " is not a positive size"));
  }
  if (matrix < 0 || matrix >= matrices) {
    return absl::InvalidArgumentError(absl::StrCat("imatrix: ", Quote(tensor_name), ": matrix ",
                                                   matrix, " is outside [0, ", matrices, ")"));
  }
  const ImatrixEntry* e = Find(tensor_name);
  if (e == nullptr) {
    return absl::NotFoundError(absl::StrCat("imatrix: no entry for ", Quote(tensor_name)));
  }
  if (e->sum2.size() != static_cast<uint64_t>(size)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "imatrix: entry ", Quote(e->name), ": imatrix size ", e->sum2.size(),
        " is different from tensor size ", size, " (", columns, " columns x ", matrices,
        " matrices) for ", Quote(tensor_name)));
  }
  std::vector<float> out(static_cast<size_t>(columns));
  const size_t first = static_cast<size_t>(matrix) * static_cast<size_t>(columns);
  for (size_t i = 0; i < out.size(); ++i) out[i] = ValueAt(*e, first + i);
  return out;
}

absl::StatusOr<std::vector<float>> Imatrix::Importance(absl::string_view tensor_name,
                                                       int64_t matrix) const {
  const ImatrixEntry* e = Find(tensor_name);
  if (e == nullptr) {
    return absl::NotFoundError(absl::StrCat("imatrix: no entry for ", Quote(tensor_name)));
  }
  return Importance(tensor_name, e->columns, e->matrices, matrix);
}

absl::StatusOr<Imatrix> ParseImatrix(std::span<const uint8_t> file, absl::string_view file_name) {
  if (file.size() >= 4 && std::memcmp(file.data(), "GGUF", 4) == 0) {
    return ParseGgufImatrix(file, file_name);
  }
  return ParseLegacy(file, file_name);
}

absl::StatusOr<Imatrix> ReadImatrix(const std::string& path) {
  absl::StatusOr<std::unique_ptr<MappedFile>> file = MappedFile::Open(path);
  if (!file.ok()) return file.status();
  absl::StatusOr<Imatrix> imatrix = ParseImatrix((*file)->bytes(), path);
  // Whatever was read from a file that changed meanwhile is not reported,
  // not even as an error about its contents.
  if (absl::Status s = (*file)->CheckIntact(); !s.ok()) return s;
  return imatrix;
}

namespace {

// What both writers refuse.
absl::Status CheckWritable(const Imatrix& imatrix, const std::string& path) {
  if (imatrix.entries().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": no entries to write (llama.cpp refuses an imatrix without)"));
  }
  if (imatrix.chunk_size == 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": chunk size 0"));
  }
  if (absl::Status s = CheckDatasets(imatrix.datasets, path); !s.ok()) return s;
  for (const auto& [name, e] : imatrix.entries()) {
    if (absl::Status s = ValidateImatrixEntry(e, path); !s.ok()) return s;
  }
  return absl::OkStatus();
}

template <typename T>
absl::Status Put(OutputFile& out, T v) {
  uint8_t bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  return out.Write(std::span<const uint8_t>(bytes, sizeof(T)));
}

}  // namespace

absl::Status WriteImatrixGguf(const Imatrix& imatrix, const std::string& path) {
  if (absl::Status s = CheckWritable(imatrix, path); !s.ok()) return s;
  GgufWriter w;
  w.AddString("general.type", "imatrix");
  w.AddStringArray("imatrix.datasets", imatrix.datasets);
  w.AddU32("imatrix.chunk_count", imatrix.chunk_count);
  w.AddU32("imatrix.chunk_size", imatrix.chunk_size);
  for (const auto& [name, e] : imatrix.entries()) {
    if (name.size() > kMaxEntryNameForGguf) {
      return absl::InvalidArgumentError(absl::StrCat(
          EntryWhere(path, name), "the name is ", name.size(), " bytes: with \"", kSum2Suffix,
          "\" it is longer than ggml's ", kMaxName, "-byte tensor names"));
    }
    w.AddF32Tensor(absl::StrCat(name, kSum2Suffix), {e.columns, e.matrices}, e.sum2);
    w.AddF32Tensor(absl::StrCat(name, kCountsSuffix), {1, e.matrices}, e.counts);
    if (!e.sum.empty()) w.AddF32Tensor(absl::StrCat(name, kSumSuffix), {e.columns, e.matrices}, e.sum);
  }
  absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(path);
  if (!out.ok()) return out.status();
  if (absl::Status s = w.Write(**out); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(path, ": ", s.message()));
  }
  return (*out)->Commit();
}

absl::Status WriteImatrixDat(const Imatrix& imatrix, const std::string& path) {
  if (absl::Status s = CheckWritable(imatrix, path); !s.ok()) return s;
  constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
  if (imatrix.chunk_count > kI32Max) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": chunk count ", imatrix.chunk_count,
                                                   " does not fit the format's int32"));
  }
  const std::string dataset = imatrix.datasets.empty() ? "" : imatrix.datasets.back();
  if (dataset.size() > static_cast<size_t>(kI32Max)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": the dataset name is too long"));
  }
  // save_imatrix_legacy: entries with data, each value (sum2 / count) * ncall.
  struct Stored {
    const ImatrixEntry* entry;
    int32_t ncall;
    std::vector<float> values;
  };
  std::vector<Stored> stored;
  for (const auto& [name, e] : imatrix.entries()) {
    const std::string where = EntryWhere(path, name);
    float max_count = 0;
    for (float c : e.counts) max_count = std::max(max_count, c);
    if (max_count == 0) continue;  // "has no data - skipping"
    if (name.size() > kMaxName) {
      return absl::InvalidArgumentError(absl::StrCat(where, "the name is ", name.size(),
                                                     " bytes, more than ggml's ", kMaxName));
    }
    if (e.sum2.size() > static_cast<size_t>(kI32Max)) {
      return absl::InvalidArgumentError(absl::StrCat(where, e.sum2.size(),
                                                     " values do not fit the format's int32"));
    }
    // ceil(max count / chunk size) in integers; counts are whole numbers.
    if (max_count > 0x1p62f) {
      return absl::InvalidArgumentError(absl::StrCat(where, "count ", max_count, " is too large"));
    }
    const int64_t chunk = imatrix.chunk_size;
    const int64_t ncall = (static_cast<int64_t>(max_count) + chunk - 1) / chunk;
    if (ncall > kI32Max) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "ncall ", ncall, " (count ", max_count, " / chunk size ", chunk,
          ") does not fit the format's int32"));
    }
    Stored s{&e, static_cast<int32_t>(ncall), std::vector<float>(e.sum2.size())};
    for (size_t k = 0; k < e.sum2.size(); ++k) {
      float count = CountOf(e, k);
      float value = e.sum2[k];
      if (count == 0.0f) {  // store 1 for partial data
        value = 1.0f;
        count = 1.0f;
      }
      s.values[k] = (value / count) * static_cast<float>(s.ncall);
      // Readers rebuild llama-imatrix's sums as value x 512 (ReadImatrix,
      // load_imatrix_legacy): a value they cannot rebuild is not written.
      if (!std::isfinite(s.values[k] * static_cast<float>(kLegacyChunkSize))) {
        return absl::InvalidArgumentError(absl::StrCat(
            where, "sum2[", k, "] / count x ncall ", s.ncall, " x ", kLegacyChunkSize,
            " is not finite in float: the legacy format cannot hold it"));
      }
    }
    stored.push_back(std::move(s));
  }
  if (stored.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path, ": every entry has only zero counts: the .dat would hold none (llama.cpp skips "
              "them and cannot read a file without entries)"));
  }
  absl::StatusOr<std::unique_ptr<OutputFile>> opened = OutputFile::Create(path);
  if (!opened.ok()) return opened.status();
  OutputFile& out = **opened;
  absl::Status s = Put<int32_t>(out, static_cast<int32_t>(stored.size()));
  for (const Stored& st : stored) {
    const std::string& name = st.entry->name;
    if (s.ok()) s = Put<int32_t>(out, static_cast<int32_t>(name.size()));
    if (s.ok()) s = out.Write(name);
    if (s.ok()) s = Put<int32_t>(out, st.ncall);
    if (s.ok()) s = Put<int32_t>(out, static_cast<int32_t>(st.values.size()));
    if (s.ok()) {
      s = out.Write(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(st.values.data()),
                                             st.values.size() * sizeof(float)));
    }
  }
  if (s.ok()) s = Put<int32_t>(out, static_cast<int32_t>(imatrix.chunk_count));
  if (s.ok()) s = Put<int32_t>(out, static_cast<int32_t>(dataset.size()));
  if (s.ok()) s = out.Write(dataset);
  if (!s.ok()) return s;
  return out.Commit();
}

}  // namespace lowp
