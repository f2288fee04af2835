// lowp schemes | quant-error | quantize | range: the quantization commands.
#include <cmath>
#include <optional>
#include <limits>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/catalog.h"
#include "api/quant.h"
#include "api/quantize_model.h"
#include "cli/commands.h"
#include "cli/shared.h"
#include "cli/table.h"

namespace lowp::cli {

const char kSchemesHelp[] =
    "usage: lowp schemes [--json]\n"
    "\n"
    "Lists the quantization schemes: example names, the exact rule, the options\n"
    "a name takes (NAME:KEY=VALUE:...) and how bits per weight are counted.\n";

const char kQuantErrorHelp[] =
    "usage: lowp quant-error FILES... --scheme S[,S...] [--tensors PATTERN]\n"
    "                        [--json | --csv] [--summary] [--relative-floor F]\n"
    "                        [--histogram] [--imatrix FILE] [--threads N] [--quiet]\n"
    "       lowp quant-error FILE.gguf --reference ORIGINAL[,...] [options]\n"
    "       lowp quant-error --model DIR --scheme S[,S...] [--imatrix FILE]\n"
    "                        [--calib-text FILE ... | --calib-tokens F] [options]\n"
    "\n"
    "Quantizes every floating tensor of FILES (.safetensors, a sharded\n"
    "checkpoint's .safetensors.index.json, .gguf, .npy) with each scheme, reads it\n"
    "back and reports the error: a row per tensor and scheme, then one per scheme\n"
    "over all tensors (tensor \"(all)\", every metric weighted by element count).\n"
    "GGUF tensors of llama.cpp's block types are read decoded, as ggml does.\n"
    "--reference: no scheme; each tensor of FILE as stored (q4_K blocks, f16, ...)\n"
    "is measured against its original in ORIGINAL (safetensors, sharded, a float\n"
    "GGUF): same name, or llama.cpp's mapped to Hugging Face's (blk.N.attn_q.weight\n"
    "-> model.layers.N.self_attn.q_proj.weight). attn_q/attn_k are compared both\n"
    "as stored and with llama.cpp's q/k row permutation undone, and the closer\n"
    "kept (column rows). Rows per stored type, then \"(file)\" over all; tensors\n"
    "with no counterpart are listed on stderr (JSON: unmatched).\n"
    "Metrics (x input, q dequantized, e = q - x, over elements where both are\n"
    "finite): mse, rmse, sqnr_db = 10 log10(sum x^2 / sum e^2), max_abs_error,\n"
    "mean_abs_error, max/mean/rms relative error |e|/|x| over |x| >= F (default\n"
    "1e-3), cosine similarity; counts of NaN/Inf inputs (excluded), overflow (x\n"
    "finite, q not), clipped (clamped by the scheme), zeroed (x != 0, q = 0),\n"
    "subnormal codes; bits per weight and bytes with every scale and zero point.\n"
    "--tensors: comma-separated globs ('*', '?') on tensor names.\n"
    "--summary: only the rows over all tensors.\n"
    "--histogram: measured elements by floor(log2 |e|) (JSON only).\n"
    "--imatrix: an importance matrix (llama.cpp's imatrix .gguf or legacy .dat;\n"
    "'lowp imatrix' makes one): the llama.cpp types quantize each tensor with its\n"
    "entry (in_sum2 / counts per column, found by llama.cpp's or Hugging Face's\n"
    "name), as llama-quantize --imatrix does, and each row gains w_rel_rmse =\n"
    "sqrt(sum w e^2 / sum w x^2), w the column's importance. iq2_xxs, iq2_xs,\n"
    "iq1_s and the mixes IQ1_*, IQ2_*, IQ3_XXS and Q2_K_S need one.\n"
    "--model DIR: the Hugging Face model's matrices as lowp eval's --weights makes\n"
    "them from each scheme (a plain scheme: the decoder's linear layers; a recipe:\n"
    "every matrix), so calibrated schemes too (int4-g128:gptq, q4_K:awq), on the\n"
    "--calib- tokens as eval's (default the bundled calibration text). GPTQ moves\n"
    "the weights further from the model's to move the layers' outputs less: its\n"
    "rows here are larger than rounding to nearest's; lowp eval measures outputs.\n"
    "--threads: per tensor, 0 (default) takes every core.\n"
    "--quiet: no progress line on stderr (shown only when stderr is a terminal).\n"
    "Schemes: 'lowp schemes'.\n";

const char kQuantizeHelp[] =
    "usage: lowp quantize IN --scheme S --out OUT.safetensors [--tensors PATTERN]\n"
    "                     [--dtype F32|F16|BF16|same] [--json | --csv] [--summary]\n"
    "                     [--imatrix FILE] [--threads N] [--quiet]\n"
    "\n"
    "Writes IN's tensors to OUT with every selected floating tensor quantized by\n"
    "S and dequantized (fake quantization), stored as --dtype (F32 by default,\n"
    "which holds every dequantized value exactly; F16/BF16/same round to\n"
    "nearest-even). Other tensors are copied unchanged. Prints the error of each\n"
    "quantized tensor as quant-error does. OUT appears only when complete.\n"
    "--imatrix: as quant-error's.\n"
    "\n"
    "       lowp quantize --model DIR --weights RULES --out OUT.safetensors|OUT.gguf|OUTDIR\n"
    "                     [--format compressed-tensors|gptq] [--dtype F32|F16|BF16]\n"
    "                     [--tokenizer FILE] [--imatrix FILE] [--calib-text FILE\n"
    "                     [--calib-ctx N] [--calib-chunks N] | --calib-tokens F]\n"
    "                     [--json | --csv] [--summary] [--threads N] [--quiet]\n"
    "\n"
    "Writes the Hugging Face model DIR with its matrices as lowp eval's --weights\n"
    "RULES make them (a scheme, a recipe or PATTERN=SCHEME items; :gptq calibrates\n"
    "on the --calib- tokens, default the bundled calibration text), dequantized, a\n"
    "layer at a time: the model eval measured, for any tool that reads\n"
    "safetensors. Every matrix is stored as --dtype, the norms and biases as DIR\n"
    "stores them. Prints the error of each matrix the rules change.\n"
    "OUT.gguf: llama.cpp's model file instead, each matrix in its llama.cpp type as\n"
    "the rules' own bytes (not rounded again: a GPTQ result stays one), laid out\n"
    "as convert_hf_to_gguf.py does (llama.cpp's names, q/k rows permuted for\n"
    "llama/mistral/mixtral, Gemma's norms plus 1, experts merged, norms F32,\n"
    "matrices no rule takes in DIR's F16/BF16, else F32), with the vocabulary of\n"
    "DIR's tokenizer (or --tokenizer FILE) and general.file_type as llama-quantize\n"
    "sets it for a recipe. Schemes llama.cpp has no type for (int4-g128, OCP\n"
    "mxfp4, nvfp4, rotations) are refused by name.\n"
    "--format compressed-tensors --out OUTDIR: a new model directory vLLM loads,\n"
    "each decoder matrix as the rules' own codes and scales (llm-compressor's\n"
    "layouts: intN-gG/-channel/-tensor packed, with zero points when asymmetric\n"
    "and weight_g_idx for :gptq=actorder; fp8_e4m3fn-tensor/-channel/-gG/-bRxC;\n"
    "nvfp4), a config group per scheme in config.json's quantization_config,\n"
    "DIR's tokenizer files copied. --format gptq: AutoGPTQ's layout (v1, what vLLM\n"
    "and transformers read), one intN-gG or intN-channel scheme with fp16 scales\n"
    "for every decoder matrix. The embedding and lm_head stay as DIR stores them;\n"
    "a rule that takes them, or a scheme the format has no layout for, is refused.\n";

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

Row ReportRow(const QuantReport& r) {
  return {r.tensor,
          r.applied.empty() ? r.scheme : absl::StrCat(r.scheme, "->", r.applied),
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

// The table, or CSV, of rows[0] as header and the rest.
void PrintRows(const std::vector<Row>& rows, Output output) {
  if (output == Output::kCsv) {
    PrintCsv(rows);
  } else {
    PrintTable(rows, {0, 1});
  }
}

void PrintReports(const api::QuantErrorResult& r, Output output) {
  if (output == Output::kJson) {
    EmitJson(api::ToJson(r));
    return;
  }
  std::vector<Row> rows = {kReportHeader};
  const bool weighted = !r.imatrix.empty();
  if (weighted) rows[0].push_back("w_rel_rmse");
  if (r.reference) rows[0].insert(rows[0].end(), {"reference", "rows"});
  const auto row = [&](const QuantReport& q) {
    Row out = ReportRow(q);
    if (weighted) out.push_back(q.weighted ? Num(q.weighted_relative_rmse()) : "-");
    return out;
  };
  for (size_t i = 0; i < r.results.size(); ++i) {
    rows.push_back(row(r.results[i]));
    if (r.reference && i < r.matches.size()) {
      rows.back().push_back(r.matches[i].reference);
      rows.back().push_back(r.matches[i].rope_permuted ? "unpermuted" : "as stored");
    }
  }
  for (const QuantReport& q : r.aggregates) {
    rows.push_back(row(q));
    if (r.reference) rows.back().insert(rows.back().end(), {"", ""});
  }
  PrintRows(rows, output);
  PrintSkipped(r.skipped);
  for (const std::string& note : r.notes) std::fprintf(stderr, "lowp: note: %s\n", note.c_str());
  if (!r.unmatched.empty()) {
    std::fprintf(stderr, "lowp: %zu tensor(s) have no counterpart in the reference: %s\n",
                 r.unmatched.size(), Printable(absl::StrJoin(r.unmatched, ", ")).c_str());
  }
}

// --relative-floor as typed: a number >= 0 within float32's range.
absl::StatusOr<double> ParseRelativeFloor(const Args& args) {
  double floor = 1e-3;
  if (std::optional<std::string> f = args.Value("relative-floor")) {
    if (!absl::SimpleAtod(*f, &floor) || !(floor >= 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--relative-floor '", *f, "': want a number >= 0"));
    }
    if (!(floor <= std::numeric_limits<float>::max())) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--relative-floor '", *f, "': above float32's largest value (3.4028235e38), ",
          "which the inputs are compared in"));
    }
  }
  return floor;
}

absl::StatusOr<std::vector<std::string>> SchemeNames(const Args& args) {
  std::optional<std::string> list = args.Value("scheme");
  if (!list) return absl::InvalidArgumentError("--scheme is required; see lowp schemes");
  return SplitNames(*list);
}

}  // namespace

int SchemesCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {}, {"json"});
  if (!args.ok()) return Fail(args.status());
  if (!args->positional().empty()) {
    return Fail(absl::InvalidArgumentError("schemes takes no positional arguments"));
  }
  const api::SchemeCatalog catalog = api::Schemes();
  if (args->Has("json")) {
    EmitJson(api::ToJson(catalog));
    return 0;
  }
  for (const api::SchemeCatalog::Entry& e : catalog.families) {
    std::vector<std::string> named;
    for (const auto& [name, bits] : e.bits_4096x4096) {
      named.push_back(bits ? absl::StrFormat("%s (%.4g b/w)", name, *bits) : name);
    }
    std::printf("%s\n  %s\n  %s\n", e.family.family.c_str(), absl::StrJoin(named, ", ").c_str(),
                e.family.rule.c_str());
    if (!e.family.options.empty()) std::printf("  options: %s\n", e.family.options.c_str());
    std::printf("\n");
  }
  std::printf("bits per weight (b/w) are for a 4096 x 4096 matrix.\n");
  return 0;
}

namespace {

// What quant-error --model and quantize --model share: --model, --imatrix,
// --summary, --threads and the --calib- tokens read into `o`, then `run`
// with a progress line, its reports printed.
template <class Options>
int RunOnModel(const Args& args, Output output, Options& o,
               absl::StatusOr<api::QuantErrorResult> (*run)(const Options&)) {
  o.model = *args.Value("model");
  o.imatrix = args.Value("imatrix").value_or("");
  o.summary = args.Has("summary");
  absl::StatusOr<int> threads = ParseThreads(args);
  if (!threads.ok()) return Fail(threads.status());
  o.threads = *threads;
  if (absl::Status s = ReadTokenOptions(args, "calib-", o.calibration, /*text_by_default=*/true);
      !s.ok()) {
    return Fail(s);
  }
  std::optional<Progress> line;
  o.progress = ProgressLine(line, args.Has("quiet"));
  absl::StatusOr<api::QuantErrorResult> result = run(o);
  line.reset();
  if (!result.ok()) return Fail(result.status());
  PrintReports(*result, output);
  return 0;
}

// lowp quant-error --model DIR --scheme S[,S...].
int ModelQuantErrorCommand(const Args& args, Output output) {
  for (const char* excluded : {"reference", "tensors", "relative-floor"}) {
    if (args.Value(excluded)) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--", excluded, " is for FILES, not --model; see --help")));
    }
  }
  if (!args.positional().empty() || args.Has("histogram")) {
    return Fail(absl::InvalidArgumentError(
        "quant-error --model takes no FILES or --histogram; see --help"));
  }
  api::ModelQuantErrorOptions o;
  absl::StatusOr<std::vector<std::string>> schemes = SchemeNames(args);
  if (!schemes.ok()) return Fail(schemes.status());
  o.schemes = *schemes;
  return RunOnModel(args, output, o, api::ModelQuantError);
}

}  // namespace

int QuantErrorCommand(const std::vector<std::string>& argv) {
  std::vector<std::string> values = {"scheme",  "reference", "tensors", "relative-floor",
                                     "threads", "imatrix",   "model"};
  for (std::string& name : TokenOptionNames("calib-")) values.push_back(std::move(name));
  absl::StatusOr<Args> args =
      Args::Parse(argv, values, {"json", "csv", "histogram", "summary", "quiet"});
  if (!args.ok()) return Fail(args.status());
  if (args->Value("model")) {
    absl::StatusOr<Output> output = ParseOutput(*args);
    if (!output.ok()) return Fail(output.status());
    return ModelQuantErrorCommand(*args, *output);
  }
  for (const std::string& name : values) {
    if (name.rfind("calib-", 0) == 0 && args->Value(name)) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--", name, " needs --model")));
    }
  }
  if (args->positional().empty()) {
    return Fail(absl::InvalidArgumentError("quant-error needs input files; see --help"));
  }
  absl::StatusOr<Output> output = ParseOutput(*args);
  if (!output.ok()) return Fail(output.status());
  api::QuantErrorOptions options;
  absl::StatusOr<int> threads = ParseThreads(*args);
  if (!threads.ok()) return Fail(threads.status());
  options.threads = *threads;
  absl::StatusOr<double> floor = ParseRelativeFloor(*args);
  if (!floor.ok()) return Fail(floor.status());
  options.relative_floor = *floor;
  options.histogram = args->Has("histogram");
  options.summary = args->Has("summary");
  options.imatrix = args->Value("imatrix").value_or("");
  if (std::optional<std::string> reference = args->Value("reference")) {
    if (args->Has("scheme")) {
      return Fail(absl::InvalidArgumentError(
          "--scheme and --reference exclude each other: with --reference the stored tensors "
          "are measured"));
    }
    absl::StatusOr<std::vector<std::string>> files = SplitNames(*reference);
    if (!files.ok()) return Fail(files.status());
    options.reference = *files;
  } else {
    absl::StatusOr<std::vector<std::string>> schemes = SchemeNames(*args);
    if (!schemes.ok()) return Fail(schemes.status());
    options.schemes = *schemes;
  }
  options.inputs.files = args->positional();
  options.tensors = args->Value("tensors").value_or("");
  std::optional<Progress> line;
  options.progress = ProgressLine(line, args->Has("quiet"));
  absl::StatusOr<api::QuantErrorResult> result = api::QuantError(options);
  line.reset();
  if (!result.ok()) return Fail(result.status());
  PrintReports(*result, *output);
  return 0;
}

namespace {

// lowp quantize --model DIR --weights RULES.
int QuantizeModelCommand(const Args& args, Output output) {
  if (!args.positional().empty() || args.Value("scheme") || args.Value("tensors")) {
    return Fail(absl::InvalidArgumentError(
        "quantize --model takes --weights (eval's rules), not an input file, --scheme or "
        "--tensors; see --help"));
  }
  api::QuantizeModelOptions o;
  std::optional<std::string> weights = args.Value("weights");
  if (!weights) return Fail(absl::InvalidArgumentError("--weights is required with --model"));
  o.weights = *weights;
  std::optional<std::string> out_path = args.Value("out");
  if (!out_path) return Fail(absl::InvalidArgumentError("--out is required"));
  o.output = *out_path;
  o.dtype = args.Value("dtype").value_or("F32");
  o.tokenizer = args.Value("tokenizer").value_or("");
  o.format = args.Value("format").value_or("");
  return RunOnModel(args, output, o, api::QuantizeModel);
}

}  // namespace

int QuantizeCommand(const std::vector<std::string>& argv) {
  std::vector<std::string> values = {"scheme", "out",     "tensors",   "dtype", "threads",
                                     "imatrix", "model", "weights", "tokenizer", "format"};
  for (std::string& name : TokenOptionNames("calib-")) values.push_back(std::move(name));
  absl::StatusOr<Args> args = Args::Parse(argv, values, {"json", "csv", "summary", "quiet"});
  if (!args.ok()) return Fail(args.status());
  if (args->Value("model")) {
    absl::StatusOr<Output> output = ParseOutput(*args);
    if (!output.ok()) return Fail(output.status());
    return QuantizeModelCommand(*args, *output);
  }
  for (const std::string& name : values) {
    if ((name == "weights" || name == "tokenizer" || name == "format" ||
         name.rfind("calib-", 0) == 0) &&
        args->Value(name)) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--", name, " needs --model")));
    }
  }
  if (args->positional().size() != 1) {
    return Fail(absl::InvalidArgumentError("quantize takes one input; see --help"));
  }
  std::optional<std::string> out_path = args->Value("out");
  if (!out_path) return Fail(absl::InvalidArgumentError("--out is required"));
  absl::StatusOr<Output> output = ParseOutput(*args);
  if (!output.ok()) return Fail(output.status());
  api::QuantizeOptions options;
  absl::StatusOr<int> threads = ParseThreads(*args);
  if (!threads.ok()) return Fail(threads.status());
  options.threads = *threads;
  absl::StatusOr<std::vector<std::string>> schemes = SchemeNames(*args);
  if (!schemes.ok()) return Fail(schemes.status());
  if (schemes->size() != 1) {
    return Fail(absl::InvalidArgumentError("quantize takes one --scheme"));
  }
  options.scheme = schemes->front();
  options.input = args->positional()[0];
  options.output = *out_path;
  options.tensors = args->Value("tensors").value_or("");
  options.dtype = args->Value("dtype").value_or("F32");
  options.summary = args->Has("summary");
  options.imatrix = args->Value("imatrix").value_or("");
  std::optional<Progress> line;
  options.progress = ProgressLine(line, args->Has("quiet"));
  absl::StatusOr<api::QuantErrorResult> result = api::Quantize(options);
  line.reset();
  if (!result.ok()) return Fail(result.status());
  PrintReports(*result, *output);
  return 0;
}

int RangeCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args =
      Args::Parse(argv, {"formats", "fraction", "tensors", "threads"}, {"json", "csv", "quiet"});
  if (!args.ok()) return Fail(args.status());
  if (args->positional().empty()) {
    return Fail(absl::InvalidArgumentError("range needs input files; see --help"));
  }
  absl::StatusOr<Output> output = ParseOutput(*args);
  if (!output.ok()) return Fail(output.status());
  api::RangeStudyOptions options;
  absl::StatusOr<int> threads = ParseThreads(*args);
  if (!threads.ok()) return Fail(threads.status());
  options.threads = *threads;
  if (std::optional<std::string> p = args->Value("fraction")) {
    if (!absl::SimpleAtod(*p, &options.fraction) || !(options.fraction > 0) ||
        options.fraction > 1) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--fraction '", *p, "': want (0, 1]")));
    }
  }
  if (std::optional<std::string> list = args->Value("formats")) options.formats = SplitNames(*list);
  options.inputs.files = args->positional();
  options.tensors = args->Value("tensors").value_or("");
  std::optional<Progress> line;
  options.progress = ProgressLine(line, args->Has("quiet"));
  absl::StatusOr<api::RangeStudyResult> result = api::RangeStudy(options);
  line.reset();
  if (!result.ok()) return Fail(result.status());
  if (*output == Output::kJson) {
    EmitJson(api::ToJson(*result));
    return 0;
  }
  auto opt = [](const std::optional<int>& k) { return k ? std::to_string(*k) : std::string("-"); };
  std::vector<Row> table = {{"tensor", "format", "elements", "absmax", "min_nonzero", "overflow",
                             "subnormal", "flushed", "max_rel", "rms_rel", "max_scale_log2",
                             "min_scale_log2"}};
  for (const RangeRow& r : result->rows) {
    table.push_back({r.tensor, r.format, std::to_string(r.elements), Num(r.absmax),
                     Num(r.min_nonzero), Num(r.fraction_of_finite(r.overflow)),
                     Num(r.fraction_of_finite(r.subnormal)), Num(r.fraction_of_finite(r.flushed)),
                     Num(r.max_relative_error), Num(r.rms_relative_error), opt(r.max_scale_log2),
                     opt(r.min_scale_log2)});
  }
  PrintRows(table, *output);
  PrintSkipped(result->skipped);
  return 0;
}

}  // namespace lowp::cli
