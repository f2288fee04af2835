// lowp plan: bytes and measured accuracy side by side, per weight format.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/plan_html.h"
#include "cli/shared.h"
#include "cli/table.h"
#include "nlohmann/json.hpp"
#include "sizing/plan.h"

namespace lowp::cli {

const char kPlanHelp[] =
    "usage: lowp plan --model PRESET|config.json --mode inference|lora|qlora|finetune|pretrain\n"
    "                 [--formats F,F,...] [--device D[,D...]] [--tensors FILE[,FILE...]]\n"
    "                 [--select PATTERN] [sizing options as in lowp size]\n"
    "                 [--json | --csv] [--html report.html] [--quiet] [--threads N]\n"
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
    "                    (bf16,fp8_e4m3fn,int8-channel,int4-g128,nf4,mxfp4,q4_0)\n"
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
    "The KV cache stays in the bf16 reference's format, so the rows differ in their\n"
    "weights alone. Memory conventions: docs/sizing.md; metrics: lowp quant-error --help.\n";

namespace {

enum class Output { kTable, kJson, kCsv };

std::string Percent(double fraction) { return absl::StrFormat("%.3g%%", 100 * fraction); }
std::string Sqnr(double db) { return std::isinf(db) ? "inf" : absl::StrFormat("%.2f", db); }
std::string Rate(double v) { return v > 0 ? absl::StrFormat("%.1f", v) : std::string("-"); }

const char* JobWord(const SizingOptions& o) {
  return o.mode == Mode::kInference ? "context" : "seq";
}

// The table for one device (index d of each candidate's fits).
std::vector<Row> DeviceRows(const Plan& plan, size_t d, bool csv) {
  const bool inference = plan.options.sizing.mode == Mode::kInference;
  std::vector<Row> rows;
  if (csv) {
    rows.push_back({"format",
                    "device",
                    "linear_bits_per_parameter",
                    "weight_bits_per_parameter",
                    "weight_bytes",
                    "saving_vs_bf16",
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
                    "measured_elements",
                    "pareto",
                    "proxy"});
  } else {
    rows.push_back({"format", "bits/w", "weights GB", "GB per device", "fits", "devices needed",
                    inference ? "max context" : "max seq",
                    inference ? "max sequences" : "max micro-batch", "decode tok/s", "SQNR dB",
                    "rel RMSE", "max abs err", "clipped", "Pareto"});
  }
  for (const PlanCandidate& c : plan.candidates) {
    const PlanFit& f = c.fits[d];
    const SizingReport& r = f.report;
    if (csv) {
      rows.push_back({c.format,
                      f.device.name,
                      absl::StrFormat("%.17g", c.linear_bits_per_parameter),
                      absl::StrFormat("%.17g", c.weight_bits_per_parameter),
                      absl::StrCat(c.weight_bytes),
                      absl::StrFormat("%.17g", c.saving_vs_bf16),
                      f.possible || r.capacity_bytes > 0 ? absl::StrCat(r.per_device.total()) : "",
                      absl::StrCat(r.capacity_bytes),
                      r.fits ? "true" : "false",
                      f.possible ? "true" : "false",
                      f.possible ? absl::StrCat(r.devices_needed) : "",
                      absl::StrCat(r.max_seq),
                      absl::StrCat(r.max_batch),
                      absl::StrFormat("%.17g", r.decode_tokens_per_s_per_sequence),
                      absl::StrFormat("%.17g", c.sqnr_db()),
                      absl::StrFormat("%.17g", c.relative_rmse()),
                      absl::StrFormat("%.17g", c.error.max_abs_error()),
                      absl::StrCat(c.error.counts.clipped),
                      absl::StrFormat("%.17g", c.clipped_fraction()),
                      absl::StrCat(c.error.stats.measured),
                      c.pareto ? "true" : "false",
                      plan.source.proxy ? "true" : "false"});
      continue;
    }
    const bool sized = r.capacity_bytes > 0;  // false when the device has no room at all
    rows.push_back({c.format, absl::StrFormat("%.4g", c.linear_bits_per_parameter),
                    Gb(c.weight_bytes), sized ? Gb(r.per_device.total()) : "-",
                    r.fits ? "yes" : "no", f.possible ? absl::StrCat(r.devices_needed) : "never",
                    r.max_seq > 0 ? absl::StrCat(r.max_seq) : "none",
                    r.max_batch > 0 ? absl::StrCat(r.max_batch) : "none",
                    inference ? Rate(r.decode_tokens_per_s_per_sequence) : "-", Sqnr(c.sqnr_db()),
                    Percent(c.relative_rmse()), absl::StrFormat("%.3g", c.error.max_abs_error()),
                    Percent(c.clipped_fraction()), c.pareto ? "*" : ""});
  }
  return rows;
}

std::string SourceText(const PlanSource& s) {
  // The bundled file's absolute path, shorter when under the current directory.
  std::vector<std::string> files;
  for (const std::string& f : s.files) {
    std::error_code ec;
    const std::filesystem::path p = std::filesystem::proximate(f, ec);
    files.push_back(ec || !s.bundled || p.string().starts_with("..") ? f : p.string());
  }
  std::string text =
      absl::StrCat(s.tensors.size(), " tensors (", Grouped(static_cast<int64_t>(s.elements)),
                   " weights) of ", absl::StrJoin(files, ", "));
  if (s.bundled) absl::StrAppend(&text, " (the bundled stories260K checkpoint)");
  return text;
}

void PrintPlan(const Plan& plan) {
  const SizingOptions& o = plan.options.sizing;
  auto line = [](const char* label, const std::string& text) {
    std::printf("%-9s %s\n", label, text.c_str());
  };
  line("plan", absl::StrFormat("%s (%s parameters), %s, %s %d tokens, %s %d, dp %d x tp %d x pp %d",
                               plan.model.name, Grouped(CountParameters(plan.model).total),
                               ModeName(o.mode), JobWord(o), o.seq,
                               o.mode == Mode::kInference ? "batch" : "micro-batch", o.batch, o.dp,
                               o.tp, o.pp));
  line("accuracy", absl::StrCat("measured on ", SourceText(plan.source)));
  if (plan.source.proxy) {
    line("", absl::StrCat("a PROXY: these are not ", plan.model.name, "'s tensors (",
                          plan.source.proxy_reason, ")"));
  }
  line("units", "GB = 10^9 bytes; bits/w: bits per weight of the linear layers, scales included;");
  line("", "rel RMSE = ||q - x|| / ||x||; clipped: share of weights clamped by the format;");
  line("", "devices needed: a lower bound, the whole job divided evenly (docs/sizing.md);");
  line("", "decode tok/s: per sequence, an upper bound from memory bandwidth;");
  line("", "* Pareto-optimal: no other format is both smaller and more accurate");
  for (size_t d = 0; d < plan.options.devices.size(); ++d) {
    const Device& device = plan.options.devices[d];
    std::printf("\n%s (%s): %s GB, %s; on %lld device%s (dp %lld x tp %lld x pp %lld)\n",
                device.name.c_str(), device.description.c_str(), Gb(device.memory_bytes).c_str(),
                device.bandwidth_bytes_per_s > 0
                    ? absl::StrCat(TbPerS(device.bandwidth_bytes_per_s), " TB/s").c_str()
                    : "bandwidth unknown",
                static_cast<long long>(o.dp * o.tp * o.pp), o.dp * o.tp * o.pp == 1 ? "" : "s",
                static_cast<long long>(o.dp), static_cast<long long>(o.tp),
                static_cast<long long>(o.pp));
    PrintTable(DeviceRows(plan, d, /*csv=*/false), {0, 4, 13});
    // Why some cannot fit, once per distinct reason.
    std::vector<std::pair<std::string, std::vector<std::string>>> reasons;
    for (const PlanCandidate& c : plan.candidates) {
      if (c.fits[d].possible) continue;
      auto it = std::find_if(reasons.begin(), reasons.end(),
                             [&](const auto& r) { return r.first == c.fits[d].reason; });
      if (it == reasons.end()) it = reasons.insert(reasons.end(), {c.fits[d].reason, {}});
      it->second.push_back(c.format);
    }
    for (const auto& [reason, formats] : reasons) {
      std::printf("%s: %s\n", absl::StrJoin(formats, ", ").c_str(), reason.c_str());
    }
  }
}

nlohmann::json PlanJson(const Plan& plan) {
  nlohmann::json j;
  j["model"] = plan.model.name;
  j["parameters"] = CountParameters(plan.model).total;
  nlohmann::json options = OptionsJson(plan.options.sizing);
  options["weights"] = nullptr;
  j["options"] = options;
  j["devices"] = nlohmann::json::array();
  for (const Device& d : plan.options.devices) j["devices"].push_back(DeviceJson(d));
  const PlanSource& s = plan.source;
  nlohmann::json a;
  a["files"] = s.files;
  a["bundled"] = s.bundled;
  a["proxy"] = s.proxy;
  a["proxy_reason"] = s.proxy ? nlohmann::json(s.proxy_reason) : nlohmann::json(nullptr);
  a["tensors"] = s.tensors;
  a["elements"] = s.elements;
  a["skipped"] = s.skipped;
  a["select"] = plan.options.select;
  j["accuracy"] = a;
  j["candidates"] = nlohmann::json::array();
  for (const PlanCandidate& c : plan.candidates) {
    nlohmann::json cj;
    cj["format"] = c.format;
    cj["linear_bits_per_parameter"] = JsonNumber(c.linear_bits_per_parameter);
    cj["weight_bits_per_parameter"] = JsonNumber(c.weight_bits_per_parameter);
    cj["weight_bytes"] = c.weight_bytes;
    cj["saving_vs_bf16"] = JsonNumber(c.saving_vs_bf16);
    cj["pareto"] = c.pareto;
    nlohmann::json e = QuantReportJson(c.error, plan.options.measure.relative_floor, false);
    e["relative_rmse"] = JsonNumber(c.relative_rmse());
    e["clipped_fraction"] = JsonNumber(c.clipped_fraction());
    cj["error"] = e;
    cj["devices"] = nlohmann::json::array();
    for (const PlanFit& f : c.fits) {
      nlohmann::json fj;
      fj["device"] = f.device.name;
      fj["possible"] = f.possible;
      fj["reason"] = f.possible ? nlohmann::json(nullptr) : nlohmann::json(f.reason);
      if (f.report.capacity_bytes > 0) {
        const SizingReport& r = f.report;
        fj["per_device"] = BytesJson(r.per_device);
        fj["whole"] = BytesJson(r.whole);
        fj["capacity_bytes"] = r.capacity_bytes;
        fj["usable_bytes"] = r.usable_bytes;
        fj["fits"] = r.fits;
        fj["devices_needed_exact"] = JsonNumber(r.devices_needed_exact);
        fj["devices_needed"] = f.possible ? nlohmann::json(r.devices_needed) : nullptr;
        fj["max_seq"] = r.max_seq;
        fj["max_batch"] = r.max_batch;
        fj["bytes_read_per_step"] = r.bytes_read_per_step;
        fj["decode_tokens_per_s_per_sequence"] = JsonNumber(r.decode_tokens_per_s_per_sequence);
        fj["decode_tokens_per_s"] = JsonNumber(r.decode_tokens_per_s);
      } else {
        fj["fits"] = false;
        fj["devices_needed"] = nullptr;
      }
      if (f.smallest_share_bytes > 0) {
        fj["smallest_share"] = {{"tp", f.smallest_share_tp},
                                {"pp", f.smallest_share_pp},
                                {"per_device_bytes", f.smallest_share_bytes}};
      }
      cj["devices"].push_back(fj);
    }
    j["candidates"].push_back(cj);
  }
  return j;
}

// Writes `text` to `path` through a temporary renamed into place: the file
// appears whole or not at all.
absl::Status WriteWhole(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".lowp-partial";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) return absl::InvalidArgumentError(absl::StrCat("--html ", path, ": cannot write"));
    out << text;
    out.close();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(temporary, ec);
      return absl::InvalidArgumentError(absl::StrCat("--html ", path, ": write failed"));
    }
  }
  std::error_code ec;
  std::filesystem::rename(temporary, path, ec);
  if (ec) {
    std::filesystem::remove(temporary, ec);
    return absl::InvalidArgumentError(absl::StrCat("--html ", path, ": cannot rename into place"));
  }
  return absl::OkStatus();
}

}  // namespace

int PlanCommand(const std::vector<std::string>& argv) {
  std::vector<std::string> value_options = SizingValueOptions();
  for (const char* o : {"device", "formats", "tensors", "select", "html", "threads"}) {
    value_options.push_back(o);
  }
  absl::StatusOr<Args> args = Args::Parse(
      argv, value_options, {"sequence-parallel", "no-flash-attention", "json", "csv", "quiet"});
  if (!args.ok()) return Fail(args.status());
  if (!args->positional().empty()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("plan takes no positional arguments (got '",
                                                        args->positional()[0], "'); see --help")));
  }
  if (args->Has("json") && args->Has("csv")) {
    return Fail(absl::InvalidArgumentError("--json and --csv exclude each other"));
  }
  if (args->Value("weights")) {
    return Fail(absl::InvalidArgumentError(
        "--weights: plan compares weight formats; list them with --formats"));
  }
  const Output output = args->Has("json")  ? Output::kJson
                        : args->Has("csv") ? Output::kCsv
                                           : Output::kTable;
  std::optional<std::string> model_name = args->Value("model");
  if (!model_name) {
    return Fail(absl::InvalidArgumentError(
        "--model is required: a preset (e.g. llama-3.1-8b) or a config.json"));
  }
  PlanOptions options;
  if (absl::Status s = ReadSizingOptions(*args, &options.sizing); !s.ok()) return Fail(s);
  absl::StatusOr<ModelConfig> model = FindModel(*model_name);
  if (!model.ok()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("--model: ", model.status().message())));
  }
  auto list = [&](const char* name) -> absl::StatusOr<std::vector<std::string>> {
    std::vector<std::string> items;
    std::optional<std::string> text = args->Value(name);
    if (!text) return items;
    for (absl::string_view item : absl::StrSplit(*text, ',')) {
      if (item.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " '", *text, "': empty name in the list"));
      }
      items.emplace_back(item);
    }
    return items;
  };
  absl::StatusOr<std::vector<std::string>> formats = list("formats");
  if (!formats.ok()) return Fail(formats.status());
  options.formats = *formats;
  absl::StatusOr<std::vector<std::string>> devices = list("device");
  if (!devices.ok()) return Fail(devices.status());
  if (devices->empty()) devices->push_back("h100-sxm");
  for (const std::string& name : *devices) {
    absl::StatusOr<Device> device = FindDevice(name);
    if (!device.ok()) {
      return Fail(
          absl::InvalidArgumentError(absl::StrCat("--device: ", device.status().message())));
    }
    options.devices.push_back(*device);
  }
  absl::StatusOr<std::vector<std::string>> files = list("tensors");
  if (!files.ok()) return Fail(files.status());
  options.tensor_files = *files;
  options.select = args->Value("select").value_or("");
  if (std::optional<std::string> t = args->Value("threads")) {
    if (!absl::SimpleAtoi(*t, &options.measure.threads) || options.measure.threads < 0 ||
        options.measure.threads > 1024) {
      return Fail(
          absl::InvalidArgumentError(absl::StrCat("--threads '", *t, "': want 0 (all) to 1024")));
    }
  }
  std::optional<Progress> progress;
  options.progress = [&](size_t done, size_t total, const std::string& name) {
    if (!progress) progress.emplace(total, args->Has("quiet"));
    (void)done;
    progress->Step(name);
  };

  absl::StatusOr<Plan> plan = MakePlan(*model, options);
  progress.reset();
  if (!plan.ok()) return Fail(plan.status());
  if (std::optional<std::string> html = args->Value("html")) {
    if (absl::Status s = WriteWhole(
            *html, PlanHtml(*plan, absl::StrCat("lowp plan ", absl::StrJoin(argv, " "))));
        !s.ok()) {
      return Fail(s);
    }
  }
  switch (output) {
    case Output::kJson:
      std::printf("%s\n", PlanJson(*plan).dump(2).c_str());
      break;
    case Output::kCsv: {
      std::vector<Row> rows;
      for (size_t d = 0; d < plan->options.devices.size(); ++d) {
        std::vector<Row> part = DeviceRows(*plan, d, /*csv=*/true);
        rows.insert(rows.end(), part.begin() + (d == 0 ? 0 : 1), part.end());
      }
      PrintCsv(rows);
      break;
    }
    case Output::kTable:
      PrintPlan(*plan);
      if (std::optional<std::string> html = args->Value("html")) {
        std::printf("\nreport   %s\n", html->c_str());
      }
      break;
  }
  return 0;
}

}  // namespace lowp::cli
