#include "api/tensors.h"

#include <cmath>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "formats/option_error.h"
#include "io/gguf.h"
#include "io/tensor_set.h"

namespace lowp::api {
namespace {

std::string TypeText(const GgufValue& v) {
  if (v.type != GgufType::kArray) return std::string(GgufTypeName(v.type));
  if (v.element_type != GgufType::kArray) {
    return absl::StrCat("array[", GgufTypeName(v.element_type), "]");
  }
  // A nested array: its first element says what it holds (all elements of
  // an array share the element type, not their own element types).
  const std::vector<GgufValue> elements = v.Elements();
  return absl::StrCat("array[", elements.empty() ? "array" : TypeText(elements.front()), "]");
}

nlohmann::json JsonValue(const GgufValue& v) {
  switch (v.type) {
    case GgufType::kU8:
    case GgufType::kU16:
    case GgufType::kU32:
    case GgufType::kU64:
      return v.u;
    case GgufType::kBool:
      return v.u != 0;
    case GgufType::kI8:
    case GgufType::kI16:
    case GgufType::kI32:
    case GgufType::kI64:
      return v.i;
    case GgufType::kF32:
    case GgufType::kF64:
      if (std::isfinite(v.f)) return v.f;
      return std::isnan(v.f) ? "nan" : v.f > 0 ? "inf" : "-inf";
    case GgufType::kString:
      return v.s;
    case GgufType::kArray: {
      nlohmann::json a = nlohmann::json::array();
      for (const GgufValue& e : v.Elements()) a.push_back(JsonValue(e));
      return a;
    }
  }
  return nullptr;
}

std::string Format(const std::string& path) {
  if (absl::EndsWith(path, ".gguf")) return "gguf";
  if (absl::EndsWith(path, ".safetensors.index.json")) return "safetensors index";
  if (absl::EndsWith(path, ".safetensors")) return "safetensors";
  return "npy";
}

}  // namespace

absl::StatusOr<TensorsResult> Tensors(const TensorsOptions& o) {
  if (o.files.empty()) return OptionError("files", "at least one tensor file is needed", " ");
  TensorsResult r;
  bool any = false;
  for (const std::string& path : o.files) {
    absl::StatusOr<TensorSet> set = TensorSet::Open(path);
    if (!set.ok()) return set.status();
    FileEntry file;
    file.path = path;
    file.format = Format(path);
    if (const ParsedGguf* gguf = set->gguf(); gguf != nullptr) {
      file.gguf_version = gguf->version;
      file.alignment = gguf->alignment;
      if (o.metadata) {
        for (const GgufKeyValue& kv : gguf->metadata) {
          file.metadata.push_back(
              {kv.key, TypeText(kv.value), JsonValue(kv.value), FormatGgufValue(kv.value)});
        }
      }
    } else if (o.metadata) {
      for (const auto& [key, value] : set->metadata()) {
        file.metadata.push_back({key, "string", value, absl::StrCat("\"", value, "\"")});
      }
    }
    r.files.push_back(std::move(file));
    for (const TensorView& t : set->tensors()) {
      if (!MatchesPattern(o.tensors, t.name)) continue;
      any = true;
      TensorEntry e{t.name, t.file, t.type_name(), t.shape};
      e.elements = static_cast<uint64_t>(t.elements());
      e.bytes = t.stored_bytes();
      e.bits_per_weight = e.elements > 0 ? static_cast<double>(e.bytes) * 8 / e.elements : 0;
      r.bytes += e.bytes;
      r.elements += e.elements;
      r.tensors.push_back(std::move(e));
    }
  }
  if (!any && !o.tensors.empty()) {
    return OptionError("tensors", absl::StrCat("'", o.tensors, "' matches no tensor"), " ");
  }
  return r;
}

nlohmann::json ToJson(const TensorsResult& r) {
  nlohmann::json j;
  j["files"] = nlohmann::json::array();
  for (const FileEntry& f : r.files) {
    nlohmann::json fj;
    fj["path"] = f.path;
    fj["format"] = f.format;
    if (f.format == "gguf") {
      fj["gguf_version"] = f.gguf_version;
      fj["alignment"] = f.alignment;
    }
    if (!f.metadata.empty()) {
      fj["metadata"] = nlohmann::json::array();
      for (const MetadataEntry& m : f.metadata) {
        fj["metadata"].push_back({{"key", m.key}, {"type", m.type}, {"value", m.value}});
      }
    }
    j["files"].push_back(std::move(fj));
  }
  j["tensors"] = nlohmann::json::array();
  for (const TensorEntry& t : r.tensors) {
    j["tensors"].push_back({{"name", t.name},
                            {"file", t.file},
                            {"type", t.type},
                            {"shape", t.shape},
                            {"elements", t.elements},
                            {"bytes", t.bytes},
                            {"bits_per_weight", t.bits_per_weight}});
  }
  j["bytes"] = r.bytes;
  j["elements"] = r.elements;
  return j;
}

}  // namespace lowp::api
