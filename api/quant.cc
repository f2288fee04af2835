#include "api/quant.h"

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/inputs.h"
#include "api/json.h"
#include "formats/format.h"
#include "formats/option_error.h"
#include "io/input_files.h"
#include "io/gguf.h"
#include "io/gguf_names.h"
#include "io/safetensors.h"
#include "io/tensor_set.h"
#include "kernels/convert.h"
#include "quant/recipe.h"
#include "quant/scheme.h"

namespace lowp::api {
namespace {

absl::StatusOr<std::vector<std::unique_ptr<Scheme>>> ParseSchemes(
    const std::vector<std::string>& names) {
  if (names.empty()) return OptionError("scheme", "is required; see lowp schemes", " ");
  std::vector<std::unique_ptr<Scheme>> schemes;
  for (const std::string& name : names) {
    absl::StatusOr<std::unique_ptr<Scheme>> scheme = ParseScheme(name);
    if (!scheme.ok()) return OptionError("scheme", scheme.status().message());
    schemes.push_back(*std::move(scheme));
  }
  return schemes;
}

absl::StatusOr<MeasureOptions> Measure(double relative_floor, bool histogram, int threads) {
  if (!(relative_floor >= 0)) {
    return OptionError(absl::StrCat("relative_floor ", relative_floor), "want a number >= 0");
  }
  if (!(relative_floor <= std::numeric_limits<float>::max())) {
    return OptionError(absl::StrCat("relative_floor ", relative_floor),
                       "above float32's largest value (3.4028235e38), which the inputs are "
                       "compared in");
  }
  if (absl::Status s = CheckThreads(threads); !s.ok()) return s;
  MeasureOptions m;
  m.relative_floor = static_cast<float>(relative_floor);
  m.histogram = histogram;
  m.threads = threads;
  return m;
}

void Step(const ProgressFn& progress, size_t total, const std::string& name) {
  if (progress) progress(total, name);
}

// An integer metadata value of a GGUF file, if it has one.
std::optional<int64_t> GgufInt(const TensorSet& set, const std::string& key) {
  if (set.gguf() == nullptr) return std::nullopt;
  const GgufValue* v = set.gguf()->Find(key);
  if (v == nullptr) return std::nullopt;
  switch (v->type) {
    case GgufType::kU8:
    case GgufType::kU16:
    case GgufType::kU32:
    case GgufType::kU64:
      return static_cast<int64_t>(v->u);
    case GgufType::kI8:
    case GgufType::kI16:
    case GgufType::kI32:
    case GgufType::kI64:
      return v->i;
    default:
      return std::nullopt;
  }
}

// The head count llama.cpp's converter permuted a q or k tensor's rows with,
// if the tensor is one and the file says.
std::optional<int64_t> RopeHeads(const TensorSet& set, const std::string& name) {
  const bool q = absl::EndsWith(name, ".attn_q.weight");
  const bool k = absl::EndsWith(name, ".attn_k.weight");
  if ((!q && !k) || set.gguf() == nullptr) return std::nullopt;
  const GgufValue* arch = set.gguf()->Find("general.architecture");
  if (arch == nullptr || arch->type != GgufType::kString) return std::nullopt;
  const std::string prefix = absl::StrCat(arch->s, ".attention.head_count");
  std::optional<int64_t> heads = GgufInt(set, prefix);
  if (k) {
    if (std::optional<int64_t> kv = GgufInt(set, prefix + "_kv"); kv.has_value()) heads = kv;
  }
  return heads;
}

absl::StatusOr<QuantErrorResult> ReferenceError(const QuantErrorOptions& o,
                                                const MeasureOptions& options) {
  if (!o.schemes.empty()) {
    return OptionError("scheme", "is not taken with a reference: the stored tensors are measured",
                       " ");
  }
  absl::StatusOr<TensorSet> set = Open(o.inputs);
  if (!set.ok()) return set.status();
  absl::StatusOr<TensorSet> reference = TensorSet::OpenAll(o.reference);
  if (!reference.ok()) return reference.status();
  absl::StatusOr<std::vector<const TensorView*>> selected =
      Select(*set, o.tensors, o.inputs.files);
  if (!selected.ok()) return selected.status();
  std::map<std::string, const TensorView*> by_name;
  for (const TensorView& t : reference->tensors()) by_name[t.name] = &t;

  QuantErrorResult r;
  r.reference = true;
  r.relative_floor = options.relative_floor;
  r.histogram = options.histogram;
  std::map<std::string, QuantReport> by_type;
  QuantReport all;
  all.tensor = "(all)";
  all.scheme = "(file)";
  for (const TensorView* t : *selected) {
    Step(o.progress, selected->size(), t->name);
    auto it = by_name.find(t->name);
    if (it == by_name.end()) {
      if (std::optional<std::string> hf = HuggingFaceName(t->name); hf.has_value()) {
        it = by_name.find(*hf);
      }
    }
    if (it == by_name.end()) {
      r.unmatched.push_back(t->name);
      continue;
    }
    const TensorView& original = *it->second;
    if (!IsFloating(t->dtype) || !IsFloating(original.dtype)) {
      r.skipped.push_back(t->name);
      continue;
    }
    MeasureOptions measure = options;
    measure.release = [&](std::span<const uint8_t> bytes) {
      set->Release(bytes);
      reference->Release(bytes);
    };
    absl::StatusOr<QuantReport> report = CompareTensors(original, *t, measure);
    if (!report.ok()) return report.status();
    ReferenceMatch match{original.name, false};
    if (std::optional<int64_t> heads = RopeHeads(*set, t->name); heads.has_value()) {
      const std::vector<int64_t> order = LlamaRopeRowOrder(t->rows(), *heads);
      if (!order.empty()) {
        absl::StatusOr<QuantReport> permuted = CompareTensors(original, *t, measure, order);
        if (!permuted.ok()) return permuted.status();
        if (permuted->stats.sum_squared_error < report->stats.sum_squared_error) {
          report = std::move(permuted);
          match.rope_permuted = true;
        }
      }
    }
    if (absl::Status s = set->CheckIntact(); !s.ok()) return s;
    if (absl::Status s = reference->CheckIntact(); !s.ok()) return s;
    QuantReport& type = by_type[report->scheme];
    type.tensor = "(all)";
    type.scheme = report->scheme;
    type.Add(*report);
    all.Add(*report);
    if (!o.summary) {
      r.results.push_back(std::move(*report));
      r.matches.push_back(std::move(match));
    }
  }
  for (auto& [name, report] : by_type) r.aggregates.push_back(std::move(report));
  r.aggregates.push_back(std::move(all));
  return r;
}

}  // namespace

absl::StatusOr<QuantErrorResult> QuantError(const QuantErrorOptions& o) {
  absl::StatusOr<MeasureOptions> options = Measure(o.relative_floor, o.histogram, o.threads);
  if (!options.ok()) return options.status();
  if (!o.reference.empty()) {
    if (!o.imatrix.empty()) {
      return OptionError("imatrix", "is not used with reference (the file's bytes are measured as"
                                    " stored)", " ");
    }
    return ReferenceError(o, *options);
  }
  absl::StatusOr<std::shared_ptr<const ImportanceMap>> importance = OpenImportance(o.imatrix);
  if (!importance.ok()) return importance.status();
  options->importance = *importance;
  absl::StatusOr<std::vector<std::unique_ptr<Scheme>>> schemes = ParseSchemes(o.schemes);
  if (!schemes.ok()) return schemes.status();
  absl::StatusOr<TensorSet> set = Open(o.inputs);
  if (!set.ok()) return set.status();
  absl::StatusOr<std::vector<const TensorView*>> selected =
      Select(*set, o.tensors, o.inputs.files);
  if (!selected.ok()) return selected.status();
  std::vector<QuantizedTensor> quantized;
  for (const TensorView* t : *selected) {
    if (!IsFloating(t->dtype)) continue;
    for (const std::unique_ptr<Scheme>& scheme : *schemes) quantized.push_back({t, scheme.get()});
  }
  if (absl::Status s = CheckImportanceUsed(importance->get(), quantized); !s.ok()) return s;
  absl::StatusOr<SetReports> measured =
      MeasureTensors(*set, *selected, *schemes, *options, o.progress, !o.summary);
  if (!measured.ok()) return measured.status();
  QuantErrorResult r;
  r.results = std::move(measured->results);
  r.aggregates = std::move(measured->aggregates);
  r.skipped = std::move(measured->skipped);
  r.relative_floor = options->relative_floor;
  r.histogram = options->histogram;
  r.imatrix = o.imatrix;
  return r;
}

nlohmann::json ToJson(const QuantErrorResult& r) {
  nlohmann::json j;
  j["results"] = nlohmann::json::array();
  for (const QuantReport& q : r.results) {
    j["results"].push_back(QuantReportJson(q, r.relative_floor, r.histogram));
  }
  j["aggregates"] = nlohmann::json::array();
  for (const QuantReport& q : r.aggregates) {
    j["aggregates"].push_back(QuantReportJson(q, r.relative_floor, r.histogram));
  }
  j["skipped"] = r.skipped;
  if (!r.imatrix.empty()) j["imatrix"] = r.imatrix;
  if (!r.notes.empty()) j["notes"] = r.notes;
  if (r.reference) {
    for (size_t i = 0; i < r.results.size() && i < r.matches.size(); ++i) {
      j["results"][i]["reference"] = r.matches[i].reference;
      j["results"][i]["rows"] = r.matches[i].rope_permuted ? "llama.cpp q/k permutation undone"
                                                           : "as stored";
    }
    j["unmatched"] = r.unmatched;
  }
  return j;
}

absl::StatusOr<QuantErrorResult> Quantize(const QuantizeOptions& o) {
  const InputScope scope;  // the output never replaces the input
  if (o.output.empty()) return OptionError("output", "is required", " ");
  absl::StatusOr<MeasureOptions> options = Measure(1e-3, false, o.threads);
  if (!options.ok()) return options.status();
  absl::StatusOr<std::vector<std::unique_ptr<Scheme>>> schemes = ParseSchemes({o.scheme});
  if (!schemes.ok()) return schemes.status();
  const Scheme& scheme = *schemes->front();
  std::optional<DType> out_dtype;  // nullopt: the input's
  if (o.dtype != "same") {
    absl::StatusOr<DType> d = ParseDType(o.dtype);
    if (!d.ok() || (*d != DType::kF32 && *d != DType::kF16 && *d != DType::kBF16)) {
      return OptionError("dtype", absl::StrCat("'", o.dtype, "': want F32, F16, BF16 or same"),
                         " ");
    }
    out_dtype = *d;
  }
  absl::StatusOr<std::shared_ptr<const ImportanceMap>> importance = OpenImportance(o.imatrix);
  if (!importance.ok()) return importance.status();
  options->importance = *importance;
  absl::StatusOr<TensorSet> set = TensorSet::Open(o.input);
  if (!set.ok()) return set.status();
  options->release = [&set](std::span<const uint8_t> bytes) { set->Release(bytes); };
  absl::StatusOr<std::vector<const TensorView*>> selected = Select(*set, o.tensors, {o.input});
  if (!selected.ok()) return selected.status();
  std::vector<QuantizedTensor> weighed;
  for (const TensorView* t : *selected) {
    if (IsFloating(t->dtype)) weighed.push_back({t, &scheme});
  }
  if (absl::Status s = CheckImportanceUsed(importance->get(), weighed); !s.ok()) return s;

  // Which tensors are quantized, and the declared output of each.
  std::vector<SafetensorsWriter::Entry> entries;
  std::vector<bool> quantized;
  for (const TensorView& t : set->tensors()) {
    const bool q = IsFloating(t.dtype) && MatchesPattern(o.tensors, t.name);
    // The output dtype must hold the dequantized values: float inputs of 8
    // bits (F8_*), F64 and ggml blocks go to F32 under "same".
    DType dtype = t.dtype;
    if (q) {
      dtype = out_dtype.value_or(t.dtype);
      if (DTypeBits(dtype) <= 8 || dtype == DType::kF64 || dtype == DType::kGgml) {
        dtype = DType::kF32;
      }
    }
    if (dtype == DType::kGgml) {
      return OptionError("tensors", absl::StrCat("tensor \"", t.name, "\" of ", t.file, " is ",
                                                 t.type_name(), " blocks, which a safetensors file",
                                                 " cannot hold: select it with --tensors"));
    }
    if (!q && (t.scales != nullptr || t.packed != nullptr)) {
      return OptionError("tensors", absl::StrCat("tensor \"", t.name, "\" of ", t.file, " is ",
                                                 t.type_name(), " (codes and scales), which the",
                                                 " output cannot copy: select it with --tensors"));
    }
    entries.push_back({t.name, dtype, t.shape});
    quantized.push_back(q);
  }
  std::map<std::string, std::string> metadata = set->metadata();
  metadata["lowp.scheme"] = scheme.name();
  absl::StatusOr<std::unique_ptr<SafetensorsWriter>> writer =
      SafetensorsWriter::Create(o.output, entries, metadata);
  if (!writer.ok()) return writer.status();

  QuantErrorResult r;
  r.relative_floor = options->relative_floor;
  QuantReport all;
  all.tensor = "(all)";
  all.scheme = scheme.name();
  std::vector<uint8_t> bytes;
  RecipeModel recipe_model = RecipeModel::Of(set->tensors());
  recipe_model.has_imatrix = options->importance != nullptr;
  // llama-quantize's refusal before anything is written.
  for (size_t i = 0; i < set->tensors().size(); ++i) {
    if (!quantized[i]) continue;
    const TensorView& t = set->tensors()[i];
    RecipeChoice choice;
    SchemeForTensor(scheme, t, recipe_model, &choice);
    if (absl::Status s = CheckImatrixRequirement(scheme, choice, t.name,
                                                 options->importance != nullptr);
        !s.ok()) {
      return s;
    }
  }
  for (size_t i = 0; i < set->tensors().size(); ++i) {
    const TensorView& t = set->tensors()[i];
    Step(o.progress, set->tensors().size(), t.name);
    absl::Status status;
    if (!quantized[i]) {
      status = (*writer)->Write(t.bytes);
    } else {
      const DType dtype = entries[i].dtype;
      auto sink = [&](std::span<const float> values) -> absl::Status {
        if (dtype == DType::kF32) {
          return (*writer)->Write(std::span<const uint8_t>(
              reinterpret_cast<const uint8_t*>(values.data()), values.size() * sizeof(float)));
        }
        const Format half = *FindFormat(dtype == DType::kF16 ? "fp16" : "bf16");
        bytes.resize(values.size() * 2);
        if (absl::Status s = EncodeArray(half, values, bytes); !s.ok()) return s;
        return (*writer)->Write(bytes);
      };
      QuantReport report;
      RecipeChoice choice;
      const Scheme& applied = SchemeForTensor(scheme, t, recipe_model, &choice);
      status = QuantizeTensor(t, applied, *options, sink, &report);
      NameForRecipe(scheme, choice, report);
      if (status.ok()) {
        all.Add(report);
        r.results.push_back(std::move(report));
      }
    }
    if (status.ok()) status = set->CheckIntact();
    if (!status.ok()) return status;
    set->Release(t);
  }
  if (absl::Status s = (*writer)->Finish(); !s.ok()) return s;
  if (o.summary) r.results.clear();
  r.aggregates.push_back(std::move(all));
  r.imatrix = o.imatrix;
  return r;
}

absl::Status QuantizeArray(const TensorView& tensor, const std::string& scheme_name,
                           std::span<float> out, int threads, std::span<const float> importance) {
  absl::StatusOr<std::vector<std::unique_ptr<Scheme>>> schemes = ParseSchemes({scheme_name});
  if (!schemes.ok()) return schemes.status();
  if (out.size() != static_cast<size_t>(tensor.elements())) {
    return absl::InvalidArgumentError(absl::StrCat(tensor.name, ": ", tensor.elements(),
                                                   " values into ", out.size()));
  }
  size_t done = 0;
  QuantReport report;
  MeasureOptions measure;
  measure.threads = threads;
  if (!importance.empty()) {
    if (static_cast<int64_t>(importance.size()) != tensor.cols()) {
      return OptionError("imatrix", absl::StrCat(importance.size(), " weights for ", tensor.cols(),
                                                 " columns: want one per column"), " ");
    }
    for (float w : importance) {
      if (!std::isfinite(w) || w < 0) {
        return OptionError("imatrix", absl::StrCat("weight ", w, ": want finite and >= 0"), " ");
      }
    }
    measure.importance = std::make_shared<const ImportanceMap>(
        ImportanceMap::ForTensor(tensor.name, {importance.begin(), importance.end()}));
  }
  return QuantizeTensor(
      tensor, *schemes->front(), measure,
      [&](std::span<const float> values) {
        std::copy(values.begin(), values.end(), out.begin() + static_cast<ptrdiff_t>(done));
        done += values.size();
        return absl::OkStatus();
      },
      &report);
}

const std::vector<std::string>& DefaultRangeFormats() {
  static const std::vector<std::string> formats = {"fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2"};
  return formats;
}

absl::StatusOr<RangeStudyResult> RangeStudy(const RangeStudyOptions& o) {
  if (absl::Status s = CheckThreads(o.threads); !s.ok()) return s;
  if (!(o.fraction > 0) || o.fraction > 1) {
    return OptionError(absl::StrCat("fraction ", o.fraction), "want (0, 1]");
  }
  RangeOptions options;
  options.threads = o.threads;
  options.fraction = o.fraction;
  std::vector<Format> formats;
  for (const std::string& name : o.formats.empty() ? DefaultRangeFormats() : o.formats) {
    absl::StatusOr<Format> f = FindFormat(name);
    if (!f.ok()) return OptionError("formats", f.status().message());
    formats.push_back(*f);
  }
  absl::StatusOr<TensorSet> set = Open(o.inputs);
  if (!set.ok()) return set.status();
  options.release = [&set](std::span<const uint8_t> bytes) { set->Release(bytes); };
  absl::StatusOr<std::vector<const TensorView*>> selected =
      Select(*set, o.tensors, o.inputs.files);
  if (!selected.ok()) return selected.status();

  RangeStudyResult r;
  r.fraction = o.fraction;
  for (const TensorView* tensor : *selected) {
    Step(o.progress, selected->size(), tensor->name);
    if (!IsFloating(tensor->dtype)) {
      r.skipped.push_back(tensor->name);
      continue;
    }
    absl::StatusOr<std::vector<RangeRow>> study = StudyRange(*tensor, formats, options);
    if (!study.ok()) return study.status();
    r.rows.insert(r.rows.end(), study->begin(), study->end());
    if (absl::Status s = set->CheckIntact(); !s.ok()) return s;
    set->Release(*tensor);
  }
  return r;
}

nlohmann::json ToJson(const RangeStudyResult& r) {
  auto scale = [](const std::optional<int>& k) {
    return k ? nlohmann::json(*k) : nlohmann::json(nullptr);
  };
  nlohmann::json j;
  j["fraction"] = r.fraction;
  j["results"] = nlohmann::json::array();
  for (const RangeRow& row : r.rows) {
    nlohmann::json x;
    x["tensor"] = row.tensor;
    x["format"] = row.format;
    x["elements"] = row.elements;
    x["finite"] = row.finite;
    x["nonzero"] = row.nonzero;
    x["absmax"] = row.absmax;
    x["min_nonzero"] = row.min_nonzero;
    x["overflow"] = row.overflow;
    x["overflow_fraction"] = row.fraction_of_finite(row.overflow);
    x["subnormal"] = row.subnormal;
    x["subnormal_fraction"] = row.fraction_of_finite(row.subnormal);
    x["flushed"] = row.flushed;
    x["flushed_fraction"] = row.fraction_of_finite(row.flushed);
    x["max_relative_error"] = row.max_relative_error;
    x["rms_relative_error"] = row.rms_relative_error;
    x["max_scale_log2"] = scale(row.max_scale_log2);
    x["min_scale_log2"] = scale(row.min_scale_log2);
    j["results"].push_back(x);
  }
  j["skipped"] = r.skipped;
  return j;
}

}  // namespace lowp::api
