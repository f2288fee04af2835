// lowp size | devices: the memory model and the device catalog.
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api/catalog.h"
#include "api/size.h"
#include "cli/commands.h"
#include "cli/shared.h"
#include "cli/table.h"
#include "nlohmann/json.hpp"
#include "sizing/devices.h"
#include "sizing/memory.h"
#include "model/config.h"

namespace lowp::cli {

const char kSizeHelp[] =
    "usage: lowp size --model PRESET|config.json --mode pretrain|finetune|lora|qlora|inference\n"
    "                 [--device NAME|NAME:MEMORY[:BANDWIDTH]] [--json | --csv] [options]\n"
    "       lowp size --compare-formats [--formats F,F,...] --model M --mode inference|lora|qlora\n"
    "       lowp size --compare-recipes [--recipes R,R,...] --model M --mode pretrain|finetune\n"
    "\n"
    "The memory a job takes: bytes per component (weights, gradients, master weights,\n"
    "optimizer states, activations, KV cache, workspace, buffers) on the most loaded\n"
    "device of the layout and for the whole job; whether it fits; how many devices the\n"
    "model states and the whole job need at least; the longest sequence and largest\n"
    "batch that fit; for inference, the decode speed memory bandwidth allows. Every\n"
    "count is exact bytes; GB = 10^9 bytes, GiB = 2^30 bytes. The conventions are in\n"
    "docs/sizing.md.\n"
    "\n"
    "formats (any name 'lowp schemes' or 'lowp formats' accepts; defaults by mode):\n"
    "  --weights F        linear layers of the decoder (bf16; qlora: nf4)\n"
    "  --embed F          embeddings, lm_head, norms, biases, router\n"
    "  --grads F          gradients (the trained weights' format)\n"
    "  --master F|none    master weights (fp32 when the trained weights are narrower)\n"
    "  --optimizer O      adamw (default), adamw8bit, sgd, adafactor\n"
    "  --opt-state F      optimizer states (fp32)\n"
    "  --kv F             KV cache (the embeddings' format)\n"
    "  --activation-bytes 2|4   bytes per activation value (2)\n"
    "job and layout:\n"
    "  --seq N            tokens per sequence; context length for inference (4096)\n"
    "  --batch N          micro-batch per data-parallel rank; sequences for inference (1)\n"
    "  --dp N --tp N --pp N     data, tensor and pipeline parallel degrees (1)\n"
    "  --zero 0-3         ZeRO stage across the dp ranks (0)\n"
    "  --sequence-parallel      Megatron sequence parallelism (with --tp)\n"
    "  --recompute none|selective|full   activation recomputation (none)\n"
    "  --no-flash-attention     keep the s x s attention scores\n"
    "  --offload optimizer      master weights and optimizer states in host memory\n"
    "  --lora-rank N      adapter rank (16)\n"
    "  --lora-targets L   comma-separated of q,k,v,o,gate,up,down (all)\n"
    "  --prefill-tokens N tokens per prefill chunk (min(seq x batch, 8192))\n"
    "device:\n"
    "  --device D         a 'lowp devices' name (h100-sxm) or NAME:MEMORY[:BANDWIDTH],\n"
    "                     e.g. mygpu:96GB:4TB/s\n"
    "  --buffers BYTES    per device for CUDA context, NCCL, allocator (2GB)\n"
    "  --headroom F       fraction of each device's memory kept free, in [0, 1) (0)\n"
    "output:\n"
    "  --json             the whole report, every byte and parameter count an exact integer\n"
    "  --csv              the component table (or the comparison) as CSV\n"
    "  --compare-formats  one row per weight format: bits per parameter, weight bytes,\n"
    "                     saving vs bf16, per-device GB, fits, devices needed, max seq,\n"
    "                     decode tokens/s; --formats picks them (default\n"
    "                     fp32,bf16,fp8_e4m3fn,int8-channel,int4-g128,nf4,mxfp4,q4_0)\n"
    "  --compare-recipes  (pretrain, finetune) one row per training-state recipe of\n"
    "                     `lowp update-error --list`: its bytes per parameter, the\n"
    "                     model states, GB per device, fits, devices, beside what it\n"
    "                     does to AdamW's updates on real tensors (updates lost,\n"
    "                     update ratio, weight and moment errors); --recipes R,...\n"
    "                     (default the 16-to-6-byte ladder), --recipe-tensors FILES\n"
    "                     (default the bundled stories260K), --steps N (100),\n"
    "                     --lr X (1e-4), --seed N; --quiet\n";

const char kDevicesHelp[] =
    "usage: lowp devices [--json]\n"
    "\n"
    "Lists the built-in devices: memory as the datasheet gives it (GB = 10^9 bytes;\n"
    "also shown in GiB = 2^30 bytes), peak memory bandwidth, and the datasheet the\n"
    "numbers come from. --json gives memory in exact bytes and bandwidth in bytes/s.\n"
    "\n"
    "Names are case-insensitive; aliases: h100 = h100-sxm, a100 = a100-80gb,\n"
    "4090 = rtx-4090. Wherever a device is named, NAME:MEMORY[:BANDWIDTH] defines\n"
    "another, e.g. mygpu:96GB:4TB/s or card:24GiB:1008GB/s (units B, kB, MB, GB, TB,\n"
    "KiB, MiB, GiB, TiB; bandwidth per second).\n";

namespace {

// Byte counts for people (1,234,567) or for CSV (1234567).
std::string Count(int64_t v, bool csv) { return csv ? absl::StrCat(v) : Grouped(v); }

std::vector<Row> ComponentRows(const SizingReport& r, bool csv) {
  const bool inference = r.options.mode == Mode::kInference;
  struct {
    const char* name;
    int64_t per_device, whole;
  } const components[] = {
      {"weights", r.per_device.weights, r.whole.weights},
      {"gradients", r.per_device.gradients, r.whole.gradients},
      {"master weights", r.per_device.master, r.whole.master},
      {"optimizer states", r.per_device.optimizer, r.whole.optimizer},
      {inference ? "activations (forward pass)" : "activations", r.per_device.activations,
       r.whole.activations},
      {"kv cache", r.per_device.kv_cache, r.whole.kv_cache},
      {"workspace", r.per_device.workspace, r.whole.workspace},
      {"buffers", r.per_device.buffers, r.whole.buffers},
      {"total", r.per_device.total(), r.whole.total()},
  };
  std::vector<Row> rows = {{"component", "per device bytes", "per device GB", "per device GiB",
                            "whole job bytes", "whole job GB"}};
  for (const auto& c : components) {
    rows.push_back({c.name, Count(c.per_device, csv), Gb(c.per_device), Gib(c.per_device),
                    Count(c.whole, csv), Gb(c.whole)});
  }
  return rows;
}

std::string OnOff(bool b) { return b ? "on" : "off"; }

void PrintReport(const SizingReport& r) {
  const SizingOptions& o = r.options;
  const ParameterCounts& p = r.parameters;
  const bool training = o.mode != Mode::kInference;
  auto line = [](const char* label, const std::string& text) {
    std::printf("%-11s %s\n", label, Printable(text).c_str());
  };
  line("model", absl::StrFormat(
                    "%s (%s): %s parameters%s", r.model.name, r.model.model_type, Grouped(p.total),
                    p.active != p.total ? absl::StrCat(", ", Grouped(p.active), " active per token")
                                        : std::string()));
  std::vector<std::string> parts = {absl::StrCat("embedding ", Grouped(p.embedding)),
                                    absl::StrCat("attention ", Grouped(p.attention)),
                                    absl::StrCat("mlp ", Grouped(p.mlp))};
  if (p.router > 0) parts.push_back(absl::StrCat("router ", Grouped(p.router)));
  parts.push_back(absl::StrCat("norms ", Grouped(p.norms)));
  parts.push_back(p.lm_head > 0 ? absl::StrCat("lm_head ", Grouped(p.lm_head))
                                : std::string("lm_head tied to the embedding"));
  line("", absl::StrJoin(parts, ", "));
  std::string mode = std::string(ModeName(o.mode));
  if (training) {
    absl::StrAppend(&mode, ": ", Grouped(r.trainable_parameters), " trainable parameters, ",
                    OptimizerName(o.optimizer), " optimizer");
    if (o.mode == Mode::kLora || o.mode == Mode::kQlora) {
      absl::StrAppend(&mode, ", rank ", o.lora_rank, " adapters on ",
                      o.lora_targets.empty() ? std::string("every linear layer")
                                             : absl::StrJoin(o.lora_targets, ","));
    }
  }
  line("mode", mode);
  std::string formats = absl::StrFormat(
      "weights %s (%.4g bits per parameter on the linear layers, %.4g over all), embed %s",
      o.weights, r.linear_bits_per_parameter, r.weight_bits_per_parameter, o.embed);
  if (training) {
    absl::StrAppend(&formats, ", grads ", o.grads, ", master ", o.master, ", optimizer states ",
                    o.opt_state);
  }
  if (!training) absl::StrAppend(&formats, ", kv cache ", o.kv);
  absl::StrAppend(&formats, ", activations ", o.activation_bytes, " bytes per value");
  line("formats", formats);
  std::string layout =
      absl::StrCat("dp ", o.dp, " x tp ", o.tp, " x pp ", o.pp, " = ", r.devices_in_layout,
                   r.devices_in_layout == 1 ? " device" : " devices");
  if (training) absl::StrAppend(&layout, "; ZeRO stage ", o.zero);
  absl::StrAppend(&layout, "; sequence parallel ", OnOff(o.sequence_parallel));
  if (training) {
    absl::StrAppend(&layout, "; recompute ", RecomputeName(o.recompute), "; optimizer offload ",
                    OnOff(o.offload_optimizer));
  }
  absl::StrAppend(&layout, "; flash attention ", OnOff(o.flash_attention));
  line("layout", layout);
  line("job", training ? absl::StrCat("seq ", o.seq, " tokens, micro-batch ", o.batch,
                                      " (sequences per data-parallel rank)")
                       : absl::StrCat("context ", o.seq, " tokens, batch ", o.batch,
                                      " (concurrent sequences), prefill chunk ", o.prefill_tokens,
                                      " tokens"));
  const Device& d = r.device;
  line("device",
       absl::StrFormat("%s (%s): %s bytes = %s GB = %s GiB, bandwidth %s", d.name, d.description,
                       Grouped(d.memory_bytes), Gb(d.memory_bytes), Gib(d.memory_bytes),
                       d.bandwidth_bytes_per_s > 0
                           ? absl::StrCat(TbPerS(d.bandwidth_bytes_per_s), " TB/s")
                           : std::string("unknown")));
  line("", absl::StrCat("source: ", d.source));
  line("reserved",
       absl::StrFormat("per device: headroom %.4g%% of memory, buffers %s bytes "
                       "(%s GB)",
                       100 * o.headroom, Grouped(o.buffers_bytes), Gb(o.buffers_bytes)));
  std::printf("\n");
  if (o.pp > 1) {
    std::printf("per device: the most loaded device, in pipeline stage %d (stages 0 to %lld)\n",
                r.pipeline_stage, static_cast<long long>(o.pp - 1));
  }
  PrintTable(ComponentRows(r, /*csv=*/false), {0});
  std::printf("\n");

  const int64_t capacity = r.capacity_bytes;  // memory x (1 - headroom)
  auto result = [](const char* label, const std::string& text) {
    std::printf("%-20s %s\n", label, Printable(text).c_str());
  };
  result("fits", absl::StrFormat("%s: the most loaded device needs %s bytes (%s GB) of %s "
                                 "(%s GB) after headroom; usable for the job after buffers: %s "
                                 "bytes (%s GB)",
                                 r.fits ? "yes" : "no", Grouped(r.per_device.total()),
                                 Gb(r.per_device.total()), Grouped(capacity), Gb(capacity),
                                 Grouped(r.usable_bytes), Gb(r.usable_bytes)));
  result("devices in layout", absl::StrCat(r.devices_in_layout));
  result("devices for states",
         absl::StrFormat("%.2f -> %d (model states %s bytes over %s bytes per device; no "
                         "activations, no buffers)",
                         r.devices_for_states_exact, r.devices_for_states,
                         Grouped(r.whole.model_states()), Grouped(r.capacity_bytes)));
  result("devices for the job",
         absl::StrFormat("%.2f -> %d (whole job %s bytes over %s usable bytes per device, "
                         "everything divided evenly)",
                         r.devices_needed_exact, r.devices_needed, Grouped(r.whole.total()),
                         Grouped(r.usable_bytes)));
  std::string seq_note;
  if (r.max_seq == r.model.max_position_embeddings) {
    seq_note = " (the model's max_position_embeddings)";
  } else if (r.max_seq == kSizingMaxSeq) {
    seq_note = " (the search's 2^24 cap)";
  }
  result("max seq", r.max_seq > 0 ? absl::StrCat(r.max_seq, " tokens at batch ", o.batch, seq_note)
                                  : absl::StrCat("none fits at batch ", o.batch));
  result("max batch",
         r.max_batch > 0
             ? absl::StrCat(r.max_batch, " at seq ", o.seq,
                            r.max_batch == kSizingMaxBatch ? " (the search's 2^20 cap)" : "")
             : absl::StrCat("none fits at seq ", o.seq));
  if (o.offload_optimizer) {
    result("host per device",
           absl::StrFormat("%s bytes (%s GB) offloaded to host memory",
                           Grouped(r.host_bytes_per_device), Gb(r.host_bytes_per_device)));
  }
  if (!training) {
    if (r.decode_tokens_per_s_per_sequence > 0) {
      result("decode bound",
             absl::StrFormat("%.1f tokens/s per sequence, %.1f tokens/s for the batch of %d "
                             "(upper bound from bandwidth: %s bytes read per step)",
                             r.decode_tokens_per_s_per_sequence, r.decode_tokens_per_s, o.batch,
                             Grouped(r.bytes_read_per_step)));
    } else {
      result("decode bound", absl::StrFormat("unknown without the device's bandwidth (%s bytes "
                                             "read per step)",
                                             Grouped(r.bytes_read_per_step)));
    }
  }
}

std::vector<Row> CompareRows(const std::vector<FormatRow>& rows, bool csv) {
  std::vector<Row> table = {{"format", "bits/param (linear)", "weight bytes", "weight GB",
                             "saving vs bf16", "per device GB", "fits", "devices needed", "max seq",
                             "decode tok/s"}};
  for (const FormatRow& r : rows) {
    table.push_back({r.format, absl::StrFormat("%.4g", r.linear_bits_per_parameter),
                     Count(r.weight_bytes, csv), Gb(r.weight_bytes),
                     absl::StrFormat("%.1f%%", 100 * r.saving_vs_bf16), Gb(r.per_device_bytes),
                     r.fits ? "yes" : "no", absl::StrCat(r.devices_needed), absl::StrCat(r.max_seq),
                     r.decode_tokens_per_s_per_sequence > 0
                         ? absl::StrFormat("%.1f", r.decode_tokens_per_s_per_sequence)
                         : std::string("-")});
  }
  return table;
}

}  // namespace

int SizeCommand(const std::vector<std::string>& argv) {
  std::vector<std::string> value_options = SizingValueOptions();
  value_options.push_back("device");
  value_options.push_back("formats");
  for (const std::string& name : RecipeOptionNames()) value_options.push_back(name);
  absl::StatusOr<Args> args =
      Args::Parse(argv, value_options,
                  {"sequence-parallel", "no-flash-attention", "json", "csv", "compare-formats",
                   "compare-recipes", "quiet"});
  if (!args.ok()) return Fail(args.status());
  if (!args->positional().empty()) {
    return Fail(absl::InvalidArgumentError(absl::StrCat("size takes no positional arguments (got '",
                                                        args->positional()[0], "'); see --help")));
  }
  if (args->Has("json") && args->Has("csv")) {
    return Fail(absl::InvalidArgumentError("--json and --csv exclude each other"));
  }
  const bool compare = args->Has("compare-formats");
  if (args->Value("formats") && !compare) {
    return Fail(absl::InvalidArgumentError("--formats goes with --compare-formats"));
  }
  if (compare && args->Value("weights")) {
    return Fail(absl::InvalidArgumentError(
        "--weights and --compare-formats exclude each other (--formats lists the weights' "
        "formats to compare)"));
  }
  std::optional<std::string> model_name = args->Value("model");
  if (!model_name) {
    return Fail(absl::InvalidArgumentError(
        "--model is required: a preset (e.g. llama-3.1-8b) or a config.json"));
  }
  api::SizeOptions options;
  options.model = *model_name;
  if (absl::Status s = ReadSizingOptions(*args, &options.sizing); !s.ok()) return Fail(s);
  options.device = args->Value("device").value_or("h100-sxm");

  const bool recipes = args->Has("compare-recipes");
  for (const std::string& name : RecipeOptionNames()) {
    if (args->Value(name) && !recipes) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--", name, " goes with --compare-recipes")));
    }
  }
  if (recipes) {
    if (compare) {
      return Fail(absl::InvalidArgumentError(
          "--compare-formats and --compare-recipes exclude each other"));
    }
    api::TrainingPlanOptions t;
    t.size = options;
    if (absl::Status s = ReadRecipeOptions(*args, t.measure); !s.ok()) return Fail(s);
    std::optional<Progress> line;
    t.measure.progress = ProgressLine(line, args->Has("quiet"));
    absl::StatusOr<api::TrainingPlanResult> result = api::TrainingPlan(t);
    if (!result.ok()) return Fail(result.status());
    if (args->Has("json")) {
      EmitJson(api::ToJson(*result));
    } else {
      PrintTrainingPlan(*result, args->Has("csv"));
    }
    return 0;
  }

  if (compare) {
    api::CompareFormatsOptions c{options, {}};
    absl::StatusOr<std::vector<std::string>> formats = SplitList(*args, "formats");
    if (!formats.ok()) return Fail(formats.status());
    c.formats = *formats;
    absl::StatusOr<api::FormatComparison> result = api::CompareFormats(c);
    if (!result.ok()) return Fail(result.status());
    if (args->Has("json")) {
      EmitJson(api::ToJson(*result));
      return 0;
    }
    if (args->Has("csv")) {
      PrintCsv(CompareRows(result->rows, /*csv=*/true));
      return 0;
    }
    const SizingOptions& o = result->sizing;
    std::printf(
        "%s, %s, seq %lld, batch %lld, dp %lld x tp %lld x pp %lld on %s (%s GB = %s "
        "GiB); GB = 10^9 bytes\n\n",
        Printable(result->model.name).c_str(), std::string(ModeName(o.mode)).c_str(),
        static_cast<long long>(o.seq), static_cast<long long>(o.batch),
        static_cast<long long>(o.dp), static_cast<long long>(o.tp),
        static_cast<long long>(o.pp), Printable(result->device.name).c_str(),
        Gb(result->device.memory_bytes).c_str(), Gib(result->device.memory_bytes).c_str());
    PrintTable(CompareRows(result->rows, /*csv=*/false), {0, 6});
    return 0;
  }

  absl::StatusOr<SizingReport> report = api::Size(options);
  if (!report.ok()) return Fail(report.status());
  if (args->Has("json")) {
    EmitJson(api::ToJson(*report));
  } else if (args->Has("csv")) {
    PrintCsv(ComponentRows(*report, /*csv=*/true));
  } else {
    PrintReport(*report);
  }
  return 0;
}

int DevicesCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {}, {"json"});
  if (!args.ok()) return Fail(args.status());
  if (!args->positional().empty()) {
    return Fail(absl::InvalidArgumentError(
        "devices takes no positional arguments; see lowp devices --help"));
  }
  if (args->Has("json")) {
    EmitJson(api::ToJson(api::Devices()));
    return 0;
  }
  std::vector<Row> rows = {{"name", "description", "memory GB (10^9 B)", "memory GiB (2^30 B)",
                            "bandwidth TB/s (10^12 B/s)", "source"}};
  for (const Device& d : api::Devices().devices) {
    rows.push_back({d.name, d.description, Gb(d.memory_bytes), Gib(d.memory_bytes),
                    TbPerS(d.bandwidth_bytes_per_s), d.source});
  }
  PrintTable(rows, {0, 1, 5});
  std::printf(
      "\naliases: h100 = h100-sxm, a100 = a100-80gb, 4090 = rtx-4090; "
      "NAME:MEMORY[:BANDWIDTH] defines another (see --help)\n");
  return 0;
}

}  // namespace lowp::cli
