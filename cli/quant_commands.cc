// lowp schemes | quant-error | quantize | range: the quantization commands.
#include <unistd.h>

#include <cmath>
#include <limits>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/capture.h"
#include "cli/commands.h"
#include "cli/shared.h"
#include "cli/table.h"
#include "formats/format.h"
#include "kernels/convert.h"
#include "nlohmann/json.hpp"
#include "quant/measure.h"
#include "quant/range.h"
#include "quant/scheme.h"
#include "io/safetensors.h"
#include "io/tensor_set.h"

namespace lowp::cli {

const char kSchemesHelp[] =
    "usage: lowp schemes [--json]\n"
    "\n"
    "Lists the quantization schemes: example names, the exact rule, the options\n"
    "a name takes (NAME:KEY=VALUE:...) and how bits per weight are counted.\n";

const char kQuantErrorHelp[] =
    "usage: lowp quant-error FILES... --scheme S[,S...] [--tensors PATTERN]\n"
    "                        [--json | --csv] [--summary] [--relative-floor F]\n"
    "                        [--histogram] [--threads N] [--quiet]\n"
    "\n"
    "Quantizes every floating tensor of FILES (.safetensors, a sharded\n"
    "checkpoint's .safetensors.index.json, .npy) with each scheme, reads it back\n"
    "and reports the error: a row per tensor and scheme, then one per scheme over\n"
    "all tensors (tensor \"(all)\", every metric weighted by element count).\n"
    "Metrics (x input, q dequantized, e = q - x, over elements where both are\n"
    "finite): mse, rmse, sqnr_db = 10 log10(sum x^2 / sum e^2), max_abs_error,\n"
    "mean_abs_error, max/mean/rms relative error |e|/|x| over |x| >= F (default\n"
    "1e-3), cosine similarity; counts of NaN/Inf inputs (excluded), overflow (x\n"
    "finite, q not), clipped (clamped by the scheme), zeroed (x != 0, q = 0),\n"
    "subnormal codes; bits per weight and bytes with every scale and zero point.\n"
    "--tensors: comma-separated globs ('*', '?') on tensor names.\n"
    "--summary: only the rows over all tensors.\n"
    "--histogram: measured elements by floor(log2 |e|) (JSON only).\n"
    "--threads: per tensor, 0 (default) takes every core.\n"
    "--quiet: no progress line on stderr (shown only when stderr is a terminal).\n"
    "Schemes: 'lowp schemes'.\n";

const char kQuantizeHelp[] =
    "usage: lowp quantize IN --scheme S --out OUT.safetensors [--tensors PATTERN]\n"
    "                     [--dtype F32|F16|BF16|same] [--json | --csv] [--summary]\n"
    "                     [--threads N] [--quiet]\n"
    "\n"
    "Writes IN's tensors to OUT with every selected floating tensor quantized by\n"
    "S and dequantized (fake quantization), stored as --dtype (F32 by default,\n"
    "which holds every dequantized value exactly; F16/BF16/same round to\n"
    "nearest-even). Other tensors are copied unchanged. Prints the error of each\n"
    "quantized tensor as quant-error does. OUT appears only when complete.\n";

const char kRangeHelp[] =
    "usage: lowp range FILES... [--formats F[,F...]] [--fraction P]\n"
    "                  [--tensors PATTERN] [--json | --csv] [--threads N] [--quiet]\n"
    "\n"
    "What the dynamic range of each format (default fp16,bf16,fp8_e4m3fn,fp8_e5m2)\n"
    "does to each floating tensor, as fractions of its finite elements:\n"
    "overflow (|x| above the largest finite), subnormal (0 < |q| < smallest\n"
    "normal), flushed (x != 0 became 0); the relative error |q - x| / |x| over\n"
    "nonzero x (max, rms); and the power-of-two scales 2^k that fit the tensor\n"
    "(the loss-scale question): max_scale_log2, the largest k with every |x| 2^k\n"
    "within range; min_scale_log2, the smallest k with a fraction P (default\n"
    "0.999) of the nonzero values at or above the smallest normal.\n";

namespace {

std::string Num(double v) {
  if (std::isnan(v)) return "-";  // unknown: nothing measured
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return absl::StrFormat("%.6g", v);
}

// The selected tensors; an error if a pattern was given and matches none.
// `inputs` are the files given, for the message (none: arrays were given).
absl::StatusOr<std::vector<const TensorView*>> Select(const TensorSet& set,
                                                      const std::string& pattern,
                                                      const std::vector<std::string>& inputs) {
  std::vector<const TensorView*> selected;
  for (const TensorView& t : set.tensors()) {
    if (MatchesPattern(pattern, t.name)) selected.push_back(&t);
  }
  const std::string where =
      inputs.empty() ? std::string("the arrays given") : absl::StrJoin(inputs, ", ");
  if (selected.empty()) {
    return absl::InvalidArgumentError(
        set.tensors().empty()
            ? absl::StrCat("no tensors in ", where)
            : absl::StrCat("--tensors '", pattern, "' matches no tensor of ", where));
  }
  return selected;
}

Row ReportRow(const QuantReport& r) {
  return {r.tensor,
          r.scheme,
          std::to_string(r.elements),
          absl::StrFormat("%.4g", r.bits_per_weight()),
          Num(r.rmse()),
          SqnrText(r.sqnr_db()),
          Num(r.max_abs_error()),
          Num(r.mean_abs_error()),
          Num(r.max_relative_error()),
          std::isnan(r.cosine()) ? "-" : absl::StrFormat("%.6f", r.cosine()),
          std::to_string(r.counts.clipped),
          std::to_string(r.stats.zeroed),
          std::to_string(r.stats.nonfinite_outputs),
          std::to_string(r.stats.nan_inputs + r.stats.inf_inputs)};
}

const Row kReportHeader = {"tensor",  "scheme",  "elements", "bits/w",  "rmse",
                           "sqnr_db", "max_abs", "mean_abs", "max_rel", "cosine",
                           "clipped", "zeroed",  "overflow", "nan_inf"};

enum class Output { kTable, kJson, kCsv };

void PrintSkipped(const std::vector<std::string>& skipped) {
  if (skipped.empty()) return;
  std::fprintf(stderr, "lowp: skipped %zu tensor(s) that are not floating: %s\n", skipped.size(),
               Printable(absl::StrJoin(skipped, ", ")).c_str());
}

// The table, or CSV, of rows[0] as header and the rest.
void PrintRows(const std::vector<Row>& rows, Output output) {
  if (output == Output::kCsv) {
    PrintCsv(rows);
  } else {
    PrintTable(rows, {0, 1});
  }
}

absl::StatusOr<Output> ParseOutput(const Args& args) {
  if (args.Has("json") && args.Has("csv")) {
    return absl::InvalidArgumentError("--json and --csv exclude each other");
  }
  return args.Has("json") ? Output::kJson : args.Has("csv") ? Output::kCsv : Output::kTable;
}

void PrintReports(const std::vector<QuantReport>& reports,
                  const std::vector<QuantReport>& aggregates,
                  const std::vector<std::string>& skipped, Output output,
                  const MeasureOptions& options) {
  if (output == Output::kJson) {
    nlohmann::json j;
    j["results"] = nlohmann::json::array();
    for (const QuantReport& r : reports) {
      j["results"].push_back(QuantReportJson(r, options.relative_floor, options.histogram));
    }
    j["aggregates"] = nlohmann::json::array();
    for (const QuantReport& r : aggregates) {
      j["aggregates"].push_back(QuantReportJson(r, options.relative_floor, options.histogram));
    }
    j["skipped"] = skipped;
    EmitJson(j);
    return;
  }
  std::vector<Row> rows = {kReportHeader};
  for (const QuantReport& r : reports) rows.push_back(ReportRow(r));
  for (const QuantReport& r : aggregates) rows.push_back(ReportRow(r));
  PrintRows(rows, output);
  PrintSkipped(skipped);
}

absl::StatusOr<MeasureOptions> ParseMeasureOptions(const Args& args) {
  MeasureOptions options;
  absl::StatusOr<int> threads = ParseThreads(args);
  if (!threads.ok()) return threads.status();
  options.threads = *threads;
  if (std::optional<std::string> f = args.Value("relative-floor")) {
    double floor = 0;
    if (!absl::SimpleAtod(*f, &floor) || !(floor >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--relative-floor '", *f, "': want a number >= 0"));
    }
    if (!(floor <= std::numeric_limits<float>::max())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--relative-floor '", *f, "': above float32's largest value (3.4028235e38), ",
          "which the inputs are compared in"));
    }
    options.relative_floor = static_cast<float>(floor);
  }
  options.histogram = args.Has("histogram");
  return options;
}

absl::StatusOr<std::vector<std::unique_ptr<Scheme>>> ParseSchemes(const Args& args) {
  std::optional<std::string> list = args.Value("scheme");
  if (!list) return absl::InvalidArgumentError("--scheme is required; see lowp schemes");
  std::vector<std::unique_ptr<Scheme>> schemes;
  for (const std::string& name : SplitNames(*list)) {
    absl::StatusOr<std::unique_ptr<Scheme>> scheme = ParseScheme(name);
    if (!scheme.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--scheme: ", scheme.status().message()));
    }
    schemes.push_back(*std::move(scheme));
  }
  return schemes;
}

}  // namespace

int SchemesCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {}, {"json"});
  if (!args.ok()) return Fail(args.status());
  if (!args->positional().empty()) {
    return Fail(absl::InvalidArgumentError("schemes takes no positional arguments"));
  }
  if (args->Has("json")) {
    nlohmann::json all = nlohmann::json::array();
    for (const SchemeFamily& f : SchemeFamilies()) {
      nlohmann::json j;
      j["family"] = f.family;
      j["examples"] = f.examples;
      j["rule"] = f.rule;
      j["options"] = f.options;
      nlohmann::json bits = nlohmann::json::object();
      for (const std::string& name : f.examples) {
        absl::StatusOr<std::unique_ptr<Scheme>> s = ParseScheme(name);
        if (s.ok()) bits[name] = (*s)->BitsPerWeight(4096, 4096);
      }
      j["bits_per_weight_4096x4096"] = bits;
      all.push_back(j);
    }
    EmitJson(all);
    return 0;
  }
  for (const SchemeFamily& f : SchemeFamilies()) {
    std::vector<std::string> named;
    for (const std::string& name : f.examples) {
      absl::StatusOr<std::unique_ptr<Scheme>> s = ParseScheme(name);
      named.push_back(
          s.ok() ? absl::StrFormat("%s (%.4g b/w)", name, (*s)->BitsPerWeight(4096, 4096)) : name);
    }
    std::printf("%s\n  %s\n  %s\n", f.family.c_str(), absl::StrJoin(named, ", ").c_str(),
                f.rule.c_str());
    if (!f.options.empty()) std::printf("  options: %s\n", f.options.c_str());
    std::printf("\n");
  }
  std::printf("bits per weight (b/w) are for a 4096 x 4096 matrix.\n");
  return 0;
}

int QuantErrorCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {"scheme", "tensors", "relative-floor", "threads"},
                                          {"json", "csv", "histogram", "summary", "quiet"});
  if (!args.ok()) return Fail(args.status());
  if (args->positional().empty() && !HasCapturedTensors()) {
    return Fail(absl::InvalidArgumentError("quant-error needs input files; see --help"));
  }
  if (!args->positional().empty() && HasCapturedTensors()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("quant-error: arrays were given, so '",
                                                        args->positional()[0],
                                                        "' is one argument too many")));
  }
  absl::StatusOr<Output> output = ParseOutput(*args);
  if (!output.ok()) return Fail(output.status());
  absl::StatusOr<MeasureOptions> options = ParseMeasureOptions(*args);
  if (!options.ok()) return Fail(options.status());
  absl::StatusOr<std::vector<std::unique_ptr<Scheme>>> schemes = ParseSchemes(*args);
  if (!schemes.ok()) return Fail(schemes.status());
  absl::StatusOr<TensorSet> set = OpenInputs(args->positional());
  if (!set.ok()) return Fail(set.status());
  options->release = [&set](std::span<const uint8_t> bytes) { set->Release(bytes); };
  absl::StatusOr<std::vector<const TensorView*>> selected =
      Select(*set, args->Value("tensors").value_or(""), args->positional());
  if (!selected.ok()) return Fail(selected.status());

  std::vector<QuantReport> reports, aggregates;
  std::vector<std::string> skipped;
  for (const auto& scheme : *schemes) {
    QuantReport all;
    all.tensor = "(all)";
    all.scheme = scheme->name();
    aggregates.push_back(all);
  }
  Progress progress(selected->size(), args->Has("quiet"));
  for (const TensorView* tensor : *selected) {
    progress.Step(tensor->name);
    if (!IsFloating(tensor->dtype)) {
      skipped.push_back(tensor->name);
      continue;
    }
    for (size_t s = 0; s < schemes->size(); ++s) {
      absl::StatusOr<QuantReport> report = MeasureTensor(*tensor, *(*schemes)[s], *options);
      if (!report.ok()) return Fail(report.status());
      aggregates[s].Add(*report);
      reports.push_back(*std::move(report));
    }
    if (absl::Status s = set->CheckIntact(); !s.ok()) return Fail(s);
    set->Release(*tensor);
  }
  if (args->Has("summary")) reports.clear();
  PrintReports(reports, aggregates, skipped, *output, *options);
  return 0;
}

int QuantizeCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {"scheme", "out", "tensors", "dtype", "threads"},
                                          {"json", "csv", "summary", "quiet"});
  if (!args.ok()) return Fail(args.status());
  if (args->positional().size() != 1) {
    return Fail(absl::InvalidArgumentError("quantize takes one input; see --help"));
  }
  std::optional<std::string> out_path = args->Value("out");
  if (!out_path) return Fail(absl::InvalidArgumentError("--out is required"));
  absl::StatusOr<Output> output = ParseOutput(*args);
  if (!output.ok()) return Fail(output.status());
  absl::StatusOr<MeasureOptions> options = ParseMeasureOptions(*args);
  if (!options.ok()) return Fail(options.status());
  absl::StatusOr<std::vector<std::unique_ptr<Scheme>>> schemes = ParseSchemes(*args);
  if (!schemes.ok()) return Fail(schemes.status());
  if (schemes->size() != 1) {
    return Fail(absl::InvalidArgumentError("quantize takes one --scheme"));
  }
  const Scheme& scheme = *schemes->front();
  const std::string dtype_name = args->Value("dtype").value_or("F32");
  std::optional<DType> out_dtype;  // nullopt: the input's
  if (dtype_name != "same") {
    absl::StatusOr<DType> d = ParseDType(dtype_name);
    if (!d.ok() || (*d != DType::kF32 && *d != DType::kF16 && *d != DType::kBF16)) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--dtype '", dtype_name, "': want F32, F16, BF16 or same")));
    }
    out_dtype = *d;
  }
  absl::StatusOr<TensorSet> set = TensorSet::Open(args->positional()[0]);
  if (!set.ok()) return Fail(set.status());
  options->release = [&set](std::span<const uint8_t> bytes) { set->Release(bytes); };
  const std::string pattern = args->Value("tensors").value_or("");
  if (absl::StatusOr<std::vector<const TensorView*>> s = Select(*set, pattern, args->positional());
      !s.ok()) {
    return Fail(s.status());
  }

  // Which tensors are quantized, and the declared output of each.
  std::vector<SafetensorsWriter::Entry> entries;
  std::vector<bool> quantized;
  for (const TensorView& t : set->tensors()) {
    const bool q = IsFloating(t.dtype) && MatchesPattern(pattern, t.name);
    // The output dtype must hold the dequantized values: float inputs of 8
    // bits (F8_*) and F64 go to F32 under "same".
    DType dtype = t.dtype;
    if (q) {
      dtype = out_dtype.value_or(t.dtype);
      if (dtype == DType::kF8E4M3 || dtype == DType::kF8E5M2 || dtype == DType::kF64) {
        dtype = DType::kF32;
      }
    }
    entries.push_back({t.name, dtype, t.shape});
    quantized.push_back(q);
  }
  std::map<std::string, std::string> metadata = set->metadata();
  metadata["lowp.scheme"] = scheme.name();
  absl::StatusOr<std::unique_ptr<SafetensorsWriter>> writer =
      SafetensorsWriter::Create(*out_path, entries, metadata);
  if (!writer.ok()) return Fail(writer.status());

  std::vector<QuantReport> reports;
  QuantReport all;
  all.tensor = "(all)";
  all.scheme = scheme.name();
  Progress progress(set->tensors().size(), args->Has("quiet"));
  std::vector<uint8_t> bytes;
  for (size_t i = 0; i < set->tensors().size(); ++i) {
    const TensorView& t = set->tensors()[i];
    progress.Step(t.name);
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
      status = QuantizeTensor(t, scheme, *options, sink, &report);
      if (status.ok()) {
        all.Add(report);
        reports.push_back(std::move(report));
      }
    }
    if (status.ok()) status = set->CheckIntact();
    if (!status.ok()) return Fail(status);
    set->Release(t);
  }
  if (absl::Status s = (*writer)->Finish(); !s.ok()) return Fail(s);
  if (args->Has("summary")) reports.clear();
  PrintReports(reports, {all}, {}, *output, *options);
  return 0;
}

int RangeCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args =
      Args::Parse(argv, {"formats", "fraction", "tensors", "threads"}, {"json", "csv", "quiet"});
  if (!args.ok()) return Fail(args.status());
  if (args->positional().empty() && !HasCapturedTensors()) {
    return Fail(absl::InvalidArgumentError("range needs input files; see --help"));
  }
  if (!args->positional().empty() && HasCapturedTensors()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "range: arrays were given, so '", args->positional()[0], "' is one argument too many")));
  }
  absl::StatusOr<Output> output = ParseOutput(*args);
  if (!output.ok()) return Fail(output.status());
  RangeOptions options;
  absl::StatusOr<int> threads = ParseThreads(*args);
  if (!threads.ok()) return Fail(threads.status());
  options.threads = *threads;
  if (std::optional<std::string> p = args->Value("fraction")) {
    if (!absl::SimpleAtod(*p, &options.fraction) || !(options.fraction > 0) ||
        options.fraction > 1) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--fraction '", *p, "': want (0, 1]")));
    }
  }
  std::vector<Format> formats;
  for (const std::string& name :
       SplitNames(args->Value("formats").value_or("fp16,bf16,fp8_e4m3fn,fp8_e5m2"))) {
    absl::StatusOr<Format> f = FindFormat(name);
    if (!f.ok())
      return Fail(absl::InvalidArgumentError(absl::StrCat("--formats: ", f.status().message())));
    formats.push_back(*f);
  }
  absl::StatusOr<TensorSet> set = OpenInputs(args->positional());
  if (!set.ok()) return Fail(set.status());
  options.release = [&set](std::span<const uint8_t> bytes) { set->Release(bytes); };
  absl::StatusOr<std::vector<const TensorView*>> selected =
      Select(*set, args->Value("tensors").value_or(""), args->positional());
  if (!selected.ok()) return Fail(selected.status());

  std::vector<RangeRow> rows;
  std::vector<std::string> skipped;
  Progress progress(selected->size(), args->Has("quiet"));
  for (const TensorView* tensor : *selected) {
    progress.Step(tensor->name);
    if (!IsFloating(tensor->dtype)) {
      skipped.push_back(tensor->name);
      continue;
    }
    absl::StatusOr<std::vector<RangeRow>> study = StudyRange(*tensor, formats, options);
    if (!study.ok()) return Fail(study.status());
    rows.insert(rows.end(), study->begin(), study->end());
    if (absl::Status s = set->CheckIntact(); !s.ok()) return Fail(s);
    set->Release(*tensor);
  }
  auto scale = [](const std::optional<int>& k) {
    return k ? nlohmann::json(*k) : nlohmann::json(nullptr);
  };
  if (*output == Output::kJson) {
    nlohmann::json j;
    j["fraction"] = options.fraction;
    j["results"] = nlohmann::json::array();
    for (const RangeRow& r : rows) {
      nlohmann::json row;
      row["tensor"] = r.tensor;
      row["format"] = r.format;
      row["elements"] = r.elements;
      row["finite"] = r.finite;
      row["nonzero"] = r.nonzero;
      row["absmax"] = r.absmax;
      row["min_nonzero"] = r.min_nonzero;
      row["overflow"] = r.overflow;
      row["overflow_fraction"] = r.fraction_of_finite(r.overflow);
      row["subnormal"] = r.subnormal;
      row["subnormal_fraction"] = r.fraction_of_finite(r.subnormal);
      row["flushed"] = r.flushed;
      row["flushed_fraction"] = r.fraction_of_finite(r.flushed);
      row["max_relative_error"] = r.max_relative_error;
      row["rms_relative_error"] = r.rms_relative_error;
      row["max_scale_log2"] = scale(r.max_scale_log2);
      row["min_scale_log2"] = scale(r.min_scale_log2);
      j["results"].push_back(row);
    }
    j["skipped"] = skipped;
    EmitJson(j);
    return 0;
  }
  auto opt = [](const std::optional<int>& k) { return k ? std::to_string(*k) : std::string("-"); };
  std::vector<Row> table = {{"tensor", "format", "elements", "absmax", "min_nonzero", "overflow",
                             "subnormal", "flushed", "max_rel", "rms_rel", "max_scale_log2",
                             "min_scale_log2"}};
  for (const RangeRow& r : rows) {
    table.push_back({r.tensor, r.format, std::to_string(r.elements), Num(r.absmax),
                     Num(r.min_nonzero), Num(r.fraction_of_finite(r.overflow)),
                     Num(r.fraction_of_finite(r.subnormal)), Num(r.fraction_of_finite(r.flushed)),
                     Num(r.max_relative_error), Num(r.rms_relative_error), opt(r.max_scale_log2),
                     opt(r.min_scale_log2)});
  }
  PrintRows(table, *output);
  PrintSkipped(skipped);
  return 0;
}

}  // namespace lowp::cli
