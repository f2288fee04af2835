// lowp plan: bytes and measured accuracy side by side, per weight format.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "api/plan.h"
#include "api/plan_table.h"
#include "cli/commands.h"
#include "cli/shared.h"
#include "cli/table.h"
#include "nlohmann/json.hpp"
#include "sizing/plan.h"

namespace lowp::cli {

const char kPlanHelp[] =
    "usage: lowp plan --model PRESET|config.json --mode inference|lora|qlora|finetune|pretrain\n"
    "                 [--formats F,F,...] [--device D[,D...]] [--tensors FILE[,FILE...] ...]\n"
    "                 [--select PATTERN] [sizing options as in lowp size]\n"
    "                 [--json | --csv] [--html report.html] [--quiet] [--threads N]\n"
    "                 [--eval [--eval-model DIR] [--eval-sample N:LEN | --eval-text FILE]\n"
    "                 [--eval-seed S] [--eval-imatrix FILE] [--calib-text FILE ... |\n"
    "                 --calib-tokens FILE.npy]] [--mix [--mix-types LIST]\n"
    "                 [--mix-tune-sample N:LEN] [--mix-tune-seed S]\n"
    "                 [--mix-sensitivity predicted|exact]] [--kv F,G,... [--kv-sample N:LEN]]\n"
    "       lowp plan --model M --mode pretrain|finetune --recipes R,R,... [--device D]\n"
    "                 [--tensors FILES] [--select PATTERN] [--steps N] [--lr X] [--seed S]\n"
    "\n"
    "For each candidate format of the decoder's linear weights, side by side: bits per\n"
    "weight with scales, weight bytes, memory per device, whether the job fits the\n"
    "layout, devices needed, the longest context and most sequences that fit, the\n"
    "decode tokens/s bound from bandwidth (what 'lowp size --weights F' reports) and\n"
    "the precision the format loses on real tensors (the \"(all)\" row of 'lowp\n"
    "quant-error' on them): SQNR, relative RMSE = ||q - x|| / ||x||, max abs error,\n"
    "fraction clipped. Pareto-optimal candidates (no other is both smaller and more\n"
    "accurate) are marked.\n"
    "\n"
    "  --formats F,...   candidates, any 'lowp schemes' name\n"
    "                    (bf16,fp8_e4m3fn,int8-channel,int4-g128,nf4,mxfp4,q4_0); with\n"
    "                    --eval also calibrated ones (int4-g128:gptq, q4_K:awq, as lowp\n"
    "                    eval's --weights): sized as their scheme, measured on the\n"
    "                    model's outputs only (their error columns are '-')\n"
    "  --device D,...    each candidate on each device (h100-sxm); NAME:MEMORY[:BANDWIDTH]\n"
    "                    defines one, e.g. mygpu:96GB:4TB/s\n"
    "  --tensors F,...   checkpoint files the error is measured on (.safetensors, a\n"
    "                    sharded .safetensors.index.json, .npy); default the bundled\n"
    "                    stories260K checkpoint. When their shapes are not the model's,\n"
    "                    the output says the accuracy is a proxy.\n"
    "  --select PATTERN  comma-separated globs on tensor names; default every floating\n"
    "                    2-D tensor that is not an embedding, output head or router\n"
    "  --html FILE       also write a self-contained report (table and two SVG charts)\n"
    "  --quiet           no progress line on stderr (shown only when it is a terminal)\n"
    "  --threads N       per tensor, 0 (default) takes every core\n"
    "  --recipes R,...   (pretrain, finetune) the training plan instead: per training-\n"
    "                    state recipe ('lowp update-error --list'), its bytes per\n"
    "                    parameter, model states, GB per device, devices, beside what\n"
    "                    it does to AdamW's updates on --tensors (default the bundled\n"
    "                    stories260K): updates lost, update ratio, weight and moment\n"
    "                    errors over --steps (100) at --lr (1e-4), --seed (0)\n"
    "  --eval            also the model's outputs with each format on its linear layers\n"
    "                    ('lowp eval'): mean KL divergence from the float32 model, top-1\n"
    "                    agreement, perplexity change; the Pareto front is then on KL\n"
    "  --eval-model DIR  the Hugging Face model evaluated (default the bundled\n"
    "                    stories260K-hf; a proxy when it is not --model's shape)\n"
    "  --eval-sample N:LEN, --eval-seed S   the sampled tokens (16:128, seed 0)\n"
    "  --eval-text FILE [--eval-ctx N] [--eval-chunks N]   text instead, measured by\n"
    "      llama.cpp's perplexity protocol as `lowp eval --text` (ctx 512, all chunks)\n"
    "  --eval-imatrix FILE   an importance matrix of the evaluated model (lowp\n"
    "                    imatrix) its formats and the mix quantize with\n"
    "  --calib-text FILE [--calib-ctx N] [--calib-chunks N] | --calib-tokens FILE.npy\n"
    "      what the calibrated formats calibrate on, as lowp eval's (default the\n"
    "      bundled TinyStories calibration text, ctx 256, 64 chunks)\n"
    "  --mix             also, per device, the mix 'lowp mix' chooses for what the device\n"
    "                    leaves beside the job (inference, one device per replica): each\n"
    "                    matrix's cost in each type measured on the evaluated model\n"
    "                    (default then the bundled stories3M-hf, where llama.cpp's types\n"
    "                    apply), the least predicted KL at the device's bits per weight,\n"
    "                    evaluated beside the formats as a row 'lowp mix' (implies --eval;\n"
    "                    not in --csv or --html)\n"
    "  --mix-types LIST, --mix-tune-sample N:LEN, --mix-tune-seed S,\n"
    "  --mix-sensitivity M   as lowp mix's --types, --tune-sample and --sensitivity\n"
    "      (q2_K..q8_0,iq4_xs,fp16; 8:256, seed 1; predicted)\n"
    "  --kv F,G,...      (inference) the KV cache formats to study, as lowp eval's --kv\n"
    "                    (bf16,fp8_e4m3fn,q8_0,q4_0:rotate=hadamard): each format with\n"
    "                    each, sized on each device (the longest context, the most\n"
    "                    sequences) and measured by lowp eval on the evaluated model\n"
    "                    (implies --eval) at its whole context (4 sequences, at most 2048\n"
    "                    tokens; --kv-sample N:LEN otherwise), each KV format also with\n"
    "                    float32 weights; Pareto over weights + KV cache bytes and KL\n"
    "The format rows keep the KV cache in the bf16 reference's format (or the one --kv\n"
    "names), so they differ in their weights alone. Memory conventions: docs/sizing.md;\n"
    "metrics: lowp quant-error --help.\n";

namespace {

// Every digit, for CSV; empty when unknown.
std::string Exact(double v) { return std::isnan(v) ? "" : absl::StrFormat("%.17g", v); }
std::string Bool(bool b) { return b ? "true" : "false"; }

// The device could be sized at all (not a device whose buffers leave nothing).
bool Sized(const PlanFit& f) { return f.report.capacity_bytes > 0; }

using api::NoFitReasons;
using api::PlanAnyOverflow;
using api::PlanCells;
using api::PlanDecode;

// The terminal table for device d; the overflow column only when a format
// overflowed.
std::vector<Row> TableRows(const Plan& plan, size_t d) {
  const bool inference = plan.options.sizing.mode == Mode::kInference;
  const bool overflow = PlanAnyOverflow(plan);
  std::vector<Row> rows = {{"format", "bits/w", "weights GB", "GB/device", "fits", "devices",
                            inference ? "max ctx" : "max seq", inference ? "max seqs" : "max batch",
                            "tok/s", "SQNR dB", "rel RMSE", "max err", "clipped"}};
  if (overflow) rows[0].push_back("overflow");
  if (plan.eval) {
    for (const char* h : {"KL mean", "top-1", "ppl"}) rows[0].push_back(h);
  }
  rows[0].push_back("Pareto");
  for (const PlanCandidate& c : plan.candidates) {
    Row row = PlanCells(plan, c, d, [](int64_t v) { return absl::StrCat(v); });
    row.push_back(c.pareto ? "*" : "");
    rows.push_back(std::move(row));
  }
  if (plan.mix && plan.mix->devices[d].possible) {
    const PlanMix& m = plan.mix->devices[d];
    const PlanCandidate::EndToEnd& x = *m.end_to_end;
    Row row = {"lowp mix", absl::StrFormat("%.4g", m.bits_per_weight), Gb(m.weight_bytes),
               Gb(m.per_device_bytes), "yes", "1", "-", "-", "-", "-", "-", "-", "-"};
    if (overflow) row.push_back("-");
    row.push_back(absl::StrFormat("%.3g", x.kl_mean));
    row.push_back(api::PercentText(x.top1_agreement));
    row.push_back(absl::StrFormat("%+.2f%%", 100 * (x.perplexity_ratio - 1)));
    row.push_back("");
    rows.push_back(std::move(row));
  }
  return rows;
}

// One CSV row per candidate and device, every number; empty fields where a
// device has no room to size anything; then the KV study's pairs (`study`
// kv, each with its own kv_format).
std::vector<Row> CsvRows(const Plan& plan) {
  std::vector<Row> rows = {{"format",
                            "device",
                            "linear_bits_per_parameter",
                            "weight_bits_per_parameter",
                            "weight_bytes",
                            "saving_vs_bf16",
                            "kv_format",
                            "per_device_weights",
                            "per_device_gradients",
                            "per_device_master",
                            "per_device_optimizer",
                            "per_device_activations",
                            "per_device_kv_cache",
                            "per_device_workspace",
                            "per_device_buffers",
                            "per_device_bytes",
                            "capacity_bytes",
                            "fits",
                            "possible",
                            "devices_needed",
                            "max_seq",
                            "max_batch",
                            "decode_tokens_per_s_per_sequence",
                            "sqnr_db",
                            "relative_rmse",
                            "max_abs_error",
                            "clipped",
                            "clipped_fraction",
                            "overflow",
                            "overflow_fraction",
                            "nan_inf_inputs",
                            "measured_elements",
                            "pareto",
                            "proxy",
                            "reason",
                            "kl_mean",
                            "kl_p99",
                            "top1_agreement",
                            "perplexity",
                            "perplexity_ratio",
                            "eval_proxy",
                            "study"}};
  auto add = [&](const PlanCandidate& c, const char* study) {
    for (const PlanFit& f : c.fits) {
      const SizingReport& r = f.report;
      const Bytes& b = r.per_device;
      auto sized = [&](auto v) { return Sized(f) ? absl::StrCat(v) : std::string(); };
      const double decode = PlanDecode(plan, f);
      rows.push_back({c.format,
                      f.device.name,
                      Exact(c.linear_bits_per_parameter),
                      Exact(c.weight_bits_per_parameter),
                      absl::StrCat(c.weight_bytes),
                      Exact(c.saving_vs_bf16),
                      c.kv,
                      sized(b.weights),
                      sized(b.gradients),
                      sized(b.master),
                      sized(b.optimizer),
                      sized(b.activations),
                      sized(b.kv_cache),
                      sized(b.workspace),
                      sized(b.buffers),
                      sized(b.total()),
                      sized(r.capacity_bytes),
                      Bool(r.fits),
                      Bool(f.possible),
                      f.possible ? absl::StrCat(r.devices_needed) : "",
                      sized(r.max_seq),
                      sized(r.max_batch),
                      decode > 0 ? Exact(decode) : "",
                      Exact(c.sqnr_db()),
                      Exact(c.relative_rmse()),
                      Exact(c.error.max_abs_error()),
                      absl::StrCat(c.error.counts.clipped),
                      Exact(c.clipped_fraction()),
                      absl::StrCat(c.error.stats.nonfinite_outputs),
                      Exact(c.overflow_fraction()),
                      absl::StrCat(c.error.stats.nan_inputs + c.error.stats.inf_inputs),
                      absl::StrCat(c.error.stats.measured),
                      Bool(c.pareto),
                      Bool(plan.source.proxy),
                      f.reason,
                      c.end_to_end ? Exact(c.end_to_end->kl_mean) : "",
                      c.end_to_end ? Exact(c.end_to_end->kl_p99) : "",
                      c.end_to_end ? Exact(c.end_to_end->top1_agreement) : "",
                      c.end_to_end ? Exact(c.end_to_end->perplexity) : "",
                      c.end_to_end ? Exact(c.end_to_end->perplexity_ratio) : "",
                      plan.eval ? Bool(plan.eval->proxy) : "",
                      study});
    }
  };
  for (const PlanCandidate& c : plan.candidates) add(c, "formats");
  if (plan.kv_study) {
    for (const PlanCandidate& c : plan.kv_study->pairs) add(c, "kv");
  }
  return rows;
}

std::string Plural(size_t n, const char* word) {
  return absl::StrCat(n, " ", word, n == 1 ? "" : "s");
}

void PrintPlan(const Plan& plan) {
  const SizingOptions& o = plan.options.sizing;
  const PlanSource& s = plan.source;
  auto line = [](const char* label, const std::string& text) {
    std::printf("%-9s %s\n", label, Printable(text).c_str());
  };
  const bool inference = o.mode == Mode::kInference;
  line("plan",
       absl::StrFormat("%s (%s parameters), %s, %s %d tokens, %s %d, dp %d x tp %d x pp "
                       "%d, kv cache %s for every format",
                       plan.model.name, Grouped(CountParameters(plan.model).total),
                       ModeName(o.mode), inference ? "context" : "seq", o.seq,
                       inference ? "batch" : "micro-batch", o.batch, o.dp, o.tp, o.pp, plan.kv));
  // The bundled file's absolute path, shorter when under the current directory.
  std::vector<std::string> files;
  for (const std::string& f : s.files) {
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::proximate(f, ec);
    files.push_back(ec || !s.bundled || p.string().starts_with("..") ? f : p.string());
  }
  line("accuracy", absl::StrCat("measured on ", Plural(s.tensors.size(), "tensor"), " (",
                                Grouped(static_cast<int64_t>(s.elements)), " weights) of ",
                                absl::StrJoin(files, ", "),
                                s.bundled ? " (the bundled stories260K checkpoint)" : ""));
  if (s.proxy) {
    line("", absl::StrCat("a PROXY: measured on tensors that are not ", plan.model.name,
                          "'s linear layers (", s.proxy_reason, ")"));
  }
  if (!plan.candidates.empty()) {
    const ErrorStats& stats = plan.candidates.front().error.stats;
    if (stats.nan_inputs + stats.inf_inputs > 0) {
      line("", absl::StrCat(stats.nan_inputs, " NaN and ", stats.inf_inputs,
                            " infinite weights in the input, left out of every error"));
    }
  }
  if (!s.skipped.empty()) {
    line("", absl::StrCat("not floating, not measured: ", absl::StrJoin(s.skipped, ", ")));
  }
  if (plan.mix) {
    const PlanMixes& m = *plan.mix;
    line("mix", absl::StrFormat("lowp mix per device: sensitivity %s, %d candidates (%s) "
                                "measured on %s, tokens %s (%d positions), allocated at the bits "
                                "per weight each device leaves beside the job",
                                m.sensitivity, m.candidates_measured, absl::StrJoin(m.types, " "),
                                ShortPath(m.model), m.tune_tokens, m.tune_positions));
  }
  if (plan.eval) {
    const PlanEval& e = *plan.eval;
    line("outputs", absl::StrFormat("measured by lowp eval on %s, tokens %s (%d positions); "
                                    "float32 perplexity %.4f",
                                    ShortPath(e.model), e.tokens, e.positions,
                                    e.reference_perplexity));
    if (e.proxy) line("", absl::StrCat("a PROXY: ", e.proxy_reason));
  }
  line("units", "GB = 10^9 bytes; bits/w: bits per weight of the linear layers, scales included;");
  line("", "GB/device: the most loaded device; devices: a lower bound, the whole job divided");
  line("", "evenly; max ctx: tokens per sequence at the batch given, max seqs: sequences per");
  line("", "replica at the context given, both on the layout given; tok/s: decode per sequence,");
  line("", "an upper bound from memory bandwidth; rel RMSE = ||q - x|| / ||x||, max err = max");
  line("", "|q - x|; clipped: share of weights clamped (overflow: turned to inf or NaN, which");
  line("", "makes the error infinite); * Pareto-optimal: no other format is as small (within");
  line("", "0.1%) and as accurate, and better in one. Definitions: docs/plan.md");
  if (plan.eval) {
    line("", "KL mean: KL(P_float32 || P_format) in nats per position; top-1: positions whose");
    line("", "argmax agrees; ppl: perplexity change; Pareto on KL mean");
  }
  if (plan.kv_study) {
    const PlanKvStudy& k = *plan.kv_study;
    std::vector<std::string> names;
    for (const PlanKvFormat& f : k.formats) names.push_back(f.format);
    line("kv", absl::StrFormat("each format with each KV cache format (%s), measured by lowp "
                               "eval on %s, tokens %s (%d positions, sequences of %d); KV alone: "
                               "float32 weights; Pareto on weights + KV cache bytes and KL mean",
                               absl::StrJoin(names, " "), ShortPath(k.model), k.tokens,
                               k.positions, k.context));
  }
  const int64_t devices = o.dp * o.tp * o.pp;
  for (size_t d = 0; d < plan.options.devices.size(); ++d) {
    const Device& device = plan.options.devices[d];
    const std::string heading = absl::StrFormat(
        "%s (%s): %s GB, %s; on %s (dp %d x tp %d x pp %d)", device.name, device.description,
        Gb(device.memory_bytes),
        device.bandwidth_bytes_per_s > 0
            ? absl::StrCat(TbPerS(device.bandwidth_bytes_per_s), " TB/s")
            : "bandwidth unknown",
        Plural(devices, "device"), o.dp, o.tp, o.pp);
    std::printf("\n%s\n", Printable(heading).c_str());
    PrintTable(TableRows(plan, d), {0, 4});
    for (const auto& [reason, formats] : NoFitReasons(plan, d)) {
      std::printf("%s: %s\n", Printable(absl::StrJoin(formats, ", ")).c_str(),
                  Printable(reason).c_str());
    }
    if (plan.kv_study) {
      std::printf("\nKV cache formats on %s: each format with each\n",
                  Printable(device.name).c_str());
      PrintTable(api::KvStudyRows(plan, d, [](int64_t v) { return absl::StrCat(v); }), {0, 1, 5});
    }
    if (plan.mix) {
      const PlanMix& m = plan.mix->devices[d];
      if (!m.possible) {
        std::printf("lowp mix: none (%s)\n", Printable(m.reason).c_str());
      } else {
        const std::string room =
            m.budget_bits_per_weight >= 32
                ? std::string("of float32's 32 (the device holds float32 matrices beside the job)")
                : absl::StrFormat("of the %.4g the device leaves beside the job",
                                  m.budget_bits_per_weight);
        std::printf("lowp mix: the matrices in %.4g bits per weight %s (predicted KL %.3g)\n"
                    "  --weights '%s'\n",
                    m.bits_per_weight, room.c_str(), m.predicted_kl,
                    Printable(m.weights_option).c_str());
      }
    }
  }
}

// plan --recipes: the training plan (api/training_plan.h) on one device,
// measured on --tensors (default the bundled stories260K) selected by --select.
int TrainingPlanCommand(const Args& args, const std::string& model, Output output) {
  if (!args.Value("recipes")) {
    return Fail(absl::InvalidArgumentError("--steps, --lr and --seed go with --recipes"));
  }
  for (const char* o : {"formats", "html", "mix-types"}) {
    if (args.Value(o)) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--", o, " does not go with --recipes")));
    }
  }
  if (args.Has("eval") || args.Has("mix")) {
    return Fail(absl::InvalidArgumentError("--eval and --mix do not go with --recipes"));
  }
  api::TrainingPlanOptions t;
  t.size.model = model;
  if (absl::Status s = ReadSizingOptions(args, &t.size.sizing); !s.ok()) return Fail(s);
  absl::StatusOr<std::vector<std::string>> devices = SplitList(args, "device");
  if (!devices.ok()) return Fail(devices.status());
  if (devices->size() > 1) {
    return Fail(absl::InvalidArgumentError("--recipes plans on one --device"));
  }
  if (!devices->empty()) t.size.device = devices->front();
  if (absl::Status s = ReadRecipeOptions(args, t.measure); !s.ok()) return Fail(s);
  absl::StatusOr<std::vector<std::string>> files = SplitList(args, "tensors");
  if (!files.ok()) return Fail(files.status());
  t.measure.inputs.files = *files;
  for (const std::string& f : args.positional()) t.measure.inputs.files.push_back(f);
  t.measure.tensors = args.Value("select").value_or("");
  absl::StatusOr<int> threads = ParseThreads(args);
  if (!threads.ok()) return Fail(threads.status());
  t.measure.update.threads = *threads;
  std::optional<Progress> line;
  t.measure.progress = ProgressLine(line, args.Has("quiet"));
  absl::StatusOr<api::TrainingPlanResult> result = api::TrainingPlan(t);
  if (!result.ok()) return Fail(result.status());
  if (output == Output::kJson) {
    EmitJson(api::ToJson(*result));
  } else {
    PrintTrainingPlan(*result, output == Output::kCsv);
  }
  return 0;
}

}  // namespace

int PlanCommand(const std::vector<std::string>& argv) {
  std::vector<std::string> value_options = SizingValueOptions();
  for (const char* o : {"device", "formats", "tensors", "select", "html", "threads", "eval-model",
                        "eval-sample", "eval-seed", "eval-text", "eval-ctx", "eval-chunks",
                        "eval-imatrix", "mix-types", "mix-tune-sample", "mix-tune-seed",
                        "mix-sensitivity", "kv-sample",
                        "recipes", "steps", "lr", "seed"}) {
    value_options.push_back(o);
  }
  const std::vector<std::string> calib = TokenOptionNames("calib-");
  value_options.insert(value_options.end(), calib.begin(), calib.end());
  absl::StatusOr<Args> args = Args::Parse(
      argv, value_options,
      {"sequence-parallel", "no-flash-attention", "json", "csv", "quiet", "eval", "mix"});
  if (!args.ok()) return Fail(args.status());
  if (!args->positional().empty() && !args->Value("tensors")) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "plan takes files only after --tensors (got '", args->positional()[0], "'); see --help")));
  }
  absl::StatusOr<Output> output = ParseOutput(*args);
  if (!output.ok()) return Fail(output.status());
  if (args->Value("weights")) {
    return Fail(absl::InvalidArgumentError(
        "--weights: plan compares weight formats; list them with --formats"));
  }
  std::optional<std::string> model_name = args->Value("model");
  if (!model_name) {
    return Fail(absl::InvalidArgumentError(
        "--model is required: a preset (e.g. llama-3.1-8b) or a config.json"));
  }
  if (args->Value("recipes") || args->Value("steps") || args->Value("lr") || args->Value("seed")) {
    return TrainingPlanCommand(*args, *model_name, *output);
  }
  api::PlanJobOptions options;
  options.model = *model_name;
  if (absl::Status s = ReadSizingOptions(*args, &options.sizing); !s.ok()) return Fail(s);
  absl::StatusOr<std::vector<std::string>> formats = SplitList(*args, "formats");
  if (!formats.ok()) return Fail(formats.status());
  options.formats = *formats;
  absl::StatusOr<std::vector<std::string>> devices = SplitList(*args, "device");
  if (!devices.ok()) return Fail(devices.status());
  options.devices = *devices;
  // --tensors A,B or --tensors A B ... (what a shell glob gives).
  absl::StatusOr<std::vector<std::string>> files = SplitList(*args, "tensors");
  if (!files.ok()) return Fail(files.status());
  options.tensor_files = *files;
  for (const std::string& f : args->positional()) options.tensor_files.push_back(f);
  options.select = args->Value("select").value_or("");
  absl::StatusOr<int> threads = ParseThreads(*args);
  if (!threads.ok()) return Fail(threads.status());
  options.threads = *threads;
  options.mix = args->Has("mix");
  options.eval = args->Has("eval") || options.mix;
  std::vector<std::string> needs_eval = {"eval-model", "eval-sample", "eval-seed", "eval-text",
                                         "eval-ctx",   "eval-chunks", "eval-imatrix"};
  needs_eval.insert(needs_eval.end(), calib.begin(), calib.end());
  for (const std::string& o : needs_eval) {
    if (!options.eval && args->Value(o)) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--", o, " needs --eval")));
    }
  }
  if (absl::Status s = ReadTokenOptions(*args, "calib-", options.calibration,
                                        /*text_by_default=*/true);
      !s.ok()) {
    return Fail(s);
  }
  for (const char* o : {"mix-types", "mix-tune-sample", "mix-tune-seed", "mix-sensitivity"}) {
    if (!options.mix && args->Value(o)) {
      return Fail(absl::InvalidArgumentError(absl::StrCat("--", o, " needs --mix")));
    }
  }
  if (options.mix && *output == Output::kCsv) {
    return Fail(absl::InvalidArgumentError("--mix: its rows are in the table and --json, not --csv"));
  }
  absl::StatusOr<std::vector<std::string>> mix_types = SplitList(*args, "mix-types");
  if (!mix_types.ok()) return Fail(mix_types.status());
  options.mix_types = *mix_types;
  options.mix_tune_sample = args->Value("mix-tune-sample").value_or(options.mix_tune_sample);
  options.mix_sensitivity = args->Value("mix-sensitivity").value_or(options.mix_sensitivity);
  options.kv_sample = args->Value("kv-sample").value_or("");
  if (std::optional<std::string> seed = args->Value("mix-tune-seed")) {
    if (!absl::SimpleAtoi(*seed, &options.mix_tune_seed)) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--mix-tune-seed '", *seed, "': want a number >= 0")));
    }
  }
  options.eval_model = args->Value("eval-model").value_or("");
  options.eval_sample = args->Value("eval-sample").value_or(options.eval_sample);
  options.eval_text = args->Value("eval-text").value_or("");
  options.eval_imatrix = args->Value("eval-imatrix").value_or("");
  for (auto [name, value] : {std::pair<const char*, int64_t*>{"eval-ctx", &options.eval_ctx},
                             {"eval-chunks", &options.eval_chunks}}) {
    if (absl::Status s = ReadCount(*args, name, value); !s.ok()) return Fail(s);
  }
  if (std::optional<std::string> seed = args->Value("eval-seed")) {
    if (!absl::SimpleAtoi(*seed, &options.eval_seed)) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--eval-seed '", *seed, "': want a number >= 0")));
    }
  }
  options.html = args->Value("html");
  // The command line as a shell would take it back.
  options.html_command = "lowp plan";
  for (const std::string& word : argv) {
    const bool plain = !word.empty() && word.find_first_not_of(
                                            "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                                            "0123456789_./:,=@%+-") == std::string::npos;
    absl::StrAppend(
        &options.html_command, " ",
        plain ? word : absl::StrCat("'", absl::StrReplaceAll(word, {{"'", "'\\''"}}), "'"));
  }
  // One line per phase: the tensors measured, then the sequences evaluated.
  std::optional<Progress> progress;
  size_t phase_total = 0;
  options.progress = [&](size_t total, const std::string& name) {
    if (!progress || total != phase_total) {
      progress.reset();
      progress.emplace(total, args->Has("quiet"));
      phase_total = total;
    }
    progress->Step(name);
  };
  absl::StatusOr<Plan> plan = api::PlanJob(options);
  progress.reset();
  if (!plan.ok()) return Fail(plan.status());
  switch (*output) {
    case Output::kJson:
      EmitJson(api::ToJson(*plan));
      break;
    case Output::kCsv:
      PrintCsv(CsvRows(*plan));
      break;
    case Output::kTable:
      PrintPlan(*plan);
      if (options.html) std::printf("\nreport    %s\n", Printable(*options.html).c_str());
      break;
  }
  return 0;
}

}  // namespace lowp::cli
