#include "cli/shared.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/table.h"

namespace lowp::cli {
namespace {

constexpr double kGB = 1e9;
constexpr double kGiB = 1073741824.0;

}  // namespace

std::string Grouped(int64_t v) {
  const uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  const std::string digits = absl::StrCat(magnitude);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string Gb(int64_t bytes) { return absl::StrFormat("%.2f", static_cast<double>(bytes) / kGB); }
std::string Gib(int64_t bytes) {
  return absl::StrFormat("%.2f", static_cast<double>(bytes) / kGiB);
}
std::string TbPerS(double bytes_per_s) {
  return bytes_per_s > 0 ? absl::StrFormat("%.4g", bytes_per_s / 1e12) : std::string("-");
}

// Bandwidth as an exact integer when it is one (every catalog device).
nlohmann::json JsonBandwidth(double v) {
  if (v >= 0 && v < 9.2e18 && v == std::floor(v)) return static_cast<int64_t>(v);
  return JsonNumber(v);
}

nlohmann::json JsonFormat(const std::string& name) {
  return name.empty() ? nlohmann::json(nullptr) : nlohmann::json(name);
}

nlohmann::json DeviceJson(const Device& d) {
  nlohmann::json j;
  j["name"] = d.name;
  j["description"] = d.description;
  j["memory_bytes"] = d.memory_bytes;
  j["bandwidth_bytes_per_s"] = JsonBandwidth(d.bandwidth_bytes_per_s);
  j["source"] = d.source;
  return j;
}

// The value of --name as an integer; `out` is left alone when absent.
template <typename Int>
absl::Status ReadInt(const Args& args, const char* name, Int* out) {
  std::optional<std::string> text = args.Value(name);
  if (!text) return absl::OkStatus();
  if (!absl::SimpleAtoi(*text, out)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " '", *text, "': want an integer"));
  }
  return absl::OkStatus();
}

const std::vector<std::string>& SizingValueOptions() {
  static const std::vector<std::string> options = {"model",
                                                   "mode",
                                                   "weights",
                                                   "embed",
                                                   "grads",
                                                   "master",
                                                   "optimizer",
                                                   "opt-state",
                                                   "kv",
                                                   "seq",
                                                   "batch",
                                                   "zero",
                                                   "dp",
                                                   "tp",
                                                   "pp",
                                                   "recompute",
                                                   "offload",
                                                   "lora-rank",
                                                   "lora-targets",
                                                   "prefill-tokens",
                                                   "buffers",
                                                   "headroom",
                                                   "activation-bytes"};
  return options;
}

absl::Status ReadSizingOptions(const Args& args, SizingOptions* o) {
  std::optional<std::string> mode = args.Value("mode");
  if (!mode) {
    return absl::InvalidArgumentError(
        "--mode is required (pretrain, finetune, lora, qlora, inference)");
  }
  absl::StatusOr<Mode> m = ParseMode(*mode);
  if (!m.ok()) return m.status();
  o->mode = *m;
  struct {
    const char* name;
    std::string* field;
  } const formats[] = {{"weights", &o->weights}, {"embed", &o->embed},         {"grads", &o->grads},
                       {"master", &o->master},   {"opt-state", &o->opt_state}, {"kv", &o->kv}};
  for (const auto& f : formats) {
    if (std::optional<std::string> v = args.Value(f.name)) {
      if (v->empty()) return absl::InvalidArgumentError(absl::StrCat("--", f.name, " is empty"));
      *f.field = *v;
    }
  }
  if (std::optional<std::string> v = args.Value("optimizer")) {
    absl::StatusOr<Optimizer> opt = ParseOptimizer(*v);
    if (!opt.ok()) return opt.status();
    o->optimizer = *opt;
  }
  if (std::optional<std::string> v = args.Value("recompute")) {
    absl::StatusOr<Recompute> r = ParseRecompute(*v);
    if (!r.ok()) return r.status();
    o->recompute = *r;
  }
  for (absl::Status s :
       {ReadInt(args, "seq", &o->seq), ReadInt(args, "batch", &o->batch),
        ReadInt(args, "dp", &o->dp), ReadInt(args, "tp", &o->tp), ReadInt(args, "pp", &o->pp),
        ReadInt(args, "zero", &o->zero), ReadInt(args, "lora-rank", &o->lora_rank),
        ReadInt(args, "prefill-tokens", &o->prefill_tokens),
        ReadInt(args, "activation-bytes", &o->activation_bytes)}) {
    if (!s.ok()) return s;
  }
  o->sequence_parallel = args.Has("sequence-parallel");
  o->flash_attention = !args.Has("no-flash-attention");
  if (std::optional<std::string> v = args.Value("offload")) {
    if (*v != "optimizer") {
      return absl::InvalidArgumentError(
          absl::StrCat("--offload '", *v, "': only 'optimizer' can be offloaded"));
    }
    o->offload_optimizer = true;
  }
  if (std::optional<std::string> v = args.Value("lora-targets")) {
    for (absl::string_view target : absl::StrSplit(*v, ',')) {
      if (target.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--lora-targets '", *v, "': empty name in the list"));
      }
      o->lora_targets.emplace_back(target);
    }
  }
  if (std::optional<std::string> v = args.Value("buffers")) {
    absl::StatusOr<int64_t> bytes = ParseBytes(*v, "--buffers");
    if (!bytes.ok()) return bytes.status();
    o->buffers_bytes = *bytes;
  }
  if (std::optional<std::string> v = args.Value("headroom")) {
    if (!absl::SimpleAtod(*v, &o->headroom) || !std::isfinite(o->headroom)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--headroom '", *v, "': want a fraction in [0, 1), e.g. 0.3"));
    }
  }
  return absl::OkStatus();
}

nlohmann::json BytesJson(const Bytes& b) {
  nlohmann::json j;
  j["weights"] = b.weights;
  j["gradients"] = b.gradients;
  j["master"] = b.master;
  j["optimizer"] = b.optimizer;
  j["activations"] = b.activations;
  j["kv_cache"] = b.kv_cache;
  j["workspace"] = b.workspace;
  j["buffers"] = b.buffers;
  j["model_states"] = b.model_states();
  j["total"] = b.total();
  return j;
}

nlohmann::json ModelJson(const ModelConfig& m) {
  nlohmann::json j;
  j["name"] = m.name;
  j["model_type"] = m.model_type;
  j["hidden_size"] = m.hidden_size;
  j["intermediate_size"] = m.intermediate_size;
  j["num_layers"] = m.num_layers;
  j["num_heads"] = m.num_heads;
  j["num_kv_heads"] = m.num_kv_heads;
  j["head_dim"] = m.head_dim;
  j["vocab_size"] = m.vocab_size;
  j["max_position_embeddings"] = m.max_position_embeddings;
  j["tie_word_embeddings"] = m.tie_word_embeddings;
  j["num_experts"] = m.num_experts;
  j["experts_per_token"] = m.experts_per_token;
  j["gated_mlp"] = m.gated_mlp;
  j["attention_bias"] = m.attention_bias;
  j["output_bias"] = m.output_bias;
  j["mlp_bias"] = m.mlp_bias;
  j["qk_norm"] = m.qk_norm;
  j["norms_per_layer"] = m.norms_per_layer;
  j["norm_bias"] = m.norm_bias;
  j["linear_bias"] = m.linear_bias;
  j["learned_positions"] = m.learned_positions;
  j["dropout"] = m.dropout;
  return j;
}

nlohmann::json OptionsJson(const SizingOptions& o) {
  nlohmann::json j;
  j["mode"] = std::string(ModeName(o.mode));
  j["weights"] = JsonFormat(o.weights);
  j["embed"] = JsonFormat(o.embed);
  j["grads"] = JsonFormat(o.grads);
  j["master"] = JsonFormat(o.master);
  j["optimizer"] = std::string(OptimizerName(o.optimizer));
  j["opt_state"] = JsonFormat(o.opt_state);
  j["kv"] = JsonFormat(o.kv);
  j["activation_bytes"] = o.activation_bytes;
  j["seq"] = o.seq;
  j["batch"] = o.batch;
  j["dp"] = o.dp;
  j["tp"] = o.tp;
  j["pp"] = o.pp;
  j["zero"] = o.zero;
  j["sequence_parallel"] = o.sequence_parallel;
  j["recompute"] = std::string(RecomputeName(o.recompute));
  j["flash_attention"] = o.flash_attention;
  j["offload_optimizer"] = o.offload_optimizer;
  j["lora_rank"] = o.lora_rank;
  j["lora_targets"] = o.lora_targets;
  j["prefill_tokens"] = o.prefill_tokens;
  j["buffers_bytes"] = o.buffers_bytes;
  j["headroom"] = o.headroom;
  return j;
}

nlohmann::json SizingReportJson(const SizingReport& r) {
  nlohmann::json j;
  j["model"] = ModelJson(r.model);
  nlohmann::json p;
  p["embedding"] = r.parameters.embedding;
  p["attention"] = r.parameters.attention;
  p["mlp"] = r.parameters.mlp;
  p["router"] = r.parameters.router;
  p["norms"] = r.parameters.norms;
  p["lm_head"] = r.parameters.lm_head;
  p["total"] = r.parameters.total;
  p["active"] = r.parameters.active;
  j["parameters"] = p;
  j["trainable_parameters"] = r.trainable_parameters;
  j["options"] = OptionsJson(r.options);
  j["device"] = DeviceJson(r.device);
  j["weight_bits_per_parameter"] = JsonNumber(r.weight_bits_per_parameter);
  j["linear_bits_per_parameter"] = JsonNumber(r.linear_bits_per_parameter);
  j["whole"] = BytesJson(r.whole);
  j["per_device"] = BytesJson(r.per_device);
  j["pipeline_stage"] = r.pipeline_stage;
  j["host_bytes_per_device"] = r.host_bytes_per_device;
  j["capacity_bytes"] = r.capacity_bytes;
  j["usable_bytes"] = r.usable_bytes;
  j["fits"] = r.fits;
  j["devices_in_layout"] = r.devices_in_layout;
  j["devices_for_states_exact"] = JsonNumber(r.devices_for_states_exact);
  j["devices_for_states"] = r.devices_for_states;
  j["devices_needed_exact"] = JsonNumber(r.devices_needed_exact);
  j["devices_needed"] = r.devices_needed;
  j["max_seq"] = r.max_seq;
  j["max_batch"] = r.max_batch;
  j["bytes_read_per_step"] = r.bytes_read_per_step;
  j["decode_tokens_per_s_per_sequence"] = JsonNumber(r.decode_tokens_per_s_per_sequence);
  j["decode_tokens_per_s"] = JsonNumber(r.decode_tokens_per_s);
  return j;
}

absl::StatusOr<int> ParseThreads(const Args& args) {
  int threads = 0;
  if (std::optional<std::string> t = args.Value("threads")) {
    if (!absl::SimpleAtoi(*t, &threads) || threads < 0 || threads > 1024) {
      return absl::InvalidArgumentError(absl::StrCat("--threads '", *t, "': want 0 (all) to 1024"));
    }
  }
  return threads;
}

nlohmann::json QuantReportJson(const QuantReport& r, float relative_floor, bool histogram) {
  nlohmann::json j;
  j["tensor"] = r.tensor;
  j["scheme"] = r.scheme;
  if (!r.dtype.empty()) j["dtype"] = r.dtype;
  if (r.tensor != "(all)") j["shape"] = r.shape;
  j["elements"] = r.elements;
  j["bits_per_weight"] = r.bits_per_weight();
  j["bytes"] = r.storage_bytes();
  j["mse"] = r.mse();
  j["rmse"] = r.rmse();
  j["sqnr_db"] = JsonNumber(r.sqnr_db());
  j["max_abs_error"] = r.max_abs_error();
  j["mean_abs_error"] = r.mean_abs_error();
  j["max_relative_error"] = r.max_relative_error();
  j["mean_relative_error"] = r.mean_relative_error();
  j["rms_relative_error"] = r.rms_relative_error();
  j["relative_floor"] = relative_floor;
  j["relative_count"] = r.stats.relative_count;
  j["cosine"] = r.cosine();
  j["measured"] = r.stats.measured;
  j["nan_inputs"] = r.stats.nan_inputs;
  j["inf_inputs"] = r.stats.inf_inputs;
  j["overflow"] = r.stats.nonfinite_outputs;
  j["clipped"] = r.counts.clipped;
  j["zeroed"] = r.stats.zeroed;
  j["subnormal"] = r.counts.subnormal;
  if (histogram) {
    nlohmann::json h = nlohmann::json::object();
    for (const auto& [key, n] : r.histogram) {
      h[key == INT_MIN ? std::string("exact") : std::to_string(key)] = n;
    }
    j["abs_error_log2_histogram"] = h;
  }
  return j;
}

std::string PercentText(double fraction) {
  if (std::isnan(fraction)) return "-";
  return std::isinf(fraction) ? (fraction > 0 ? "inf" : "-inf")
                              : absl::StrFormat("%.3g%%", 100 * fraction);
}

std::string SqnrText(double db) {
  if (std::isnan(db)) return "-";
  return std::isinf(db) ? (db > 0 ? "inf" : "-inf") : absl::StrFormat("%.2f", db);
}

bool PlanAnyOverflow(const Plan& plan) {
  for (const PlanCandidate& c : plan.candidates) {
    if (c.error.stats.nonfinite_outputs > 0) return true;
  }
  return false;
}

double PlanDecode(const Plan& plan, const PlanFit& f) {
  return plan.options.sizing.mode == Mode::kInference && f.report.fits
             ? f.report.decode_tokens_per_s_per_sequence
             : 0;
}

std::vector<std::string> PlanCells(const Plan& plan, const PlanCandidate& c, size_t d,
                                   std::string (*count)(int64_t)) {
  const PlanFit& f = c.fits[d];
  const SizingReport& r = f.report;
  const double decode = PlanDecode(plan, f);
  std::vector<std::string> cells = {
      c.format,
      absl::StrFormat("%.4g", c.linear_bits_per_parameter),
      Gb(c.weight_bytes),
      r.capacity_bytes > 0 ? Gb(r.per_device.total()) : "-",  // "-": no room to size
      r.fits ? "yes" : "no",
      f.possible ? absl::StrCat(r.devices_needed) : "never",
      r.max_seq > 0 ? count(r.max_seq) : "none",
      r.max_batch > 0 ? count(r.max_batch) : "none",
      decode > 0 ? absl::StrFormat("%.1f", decode) : "-",
      SqnrText(c.sqnr_db()),
      PercentText(c.relative_rmse()),
      c.error.stats.measured > 0 ? absl::StrFormat("%.3g", c.error.max_abs_error()) : "-",
      PercentText(c.clipped_fraction())};
  if (PlanAnyOverflow(plan)) cells.push_back(PercentText(c.overflow_fraction()));
  return cells;
}

std::vector<std::pair<std::string, std::vector<std::string>>> NoFitReasons(const Plan& plan,
                                                                           size_t d) {
  std::vector<std::pair<std::string, std::vector<std::string>>> reasons;
  for (const PlanCandidate& c : plan.candidates) {
    const PlanFit& f = c.fits[d];
    if (f.possible) continue;
    auto it = std::find_if(reasons.begin(), reasons.end(),
                           [&](const auto& r) { return r.first == f.reason; });
    if (it == reasons.end()) it = reasons.insert(reasons.end(), {f.reason, {}});
    it->second.push_back(c.format);
  }
  return reasons;
}

std::vector<std::string> SplitNames(absl::string_view text) {
  std::vector<std::string> items(1);
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')' && depth > 0) --depth;
    if (c == ',' && depth == 0) {
      items.emplace_back();
    } else {
      items.back() += c;
    }
  }
  return items;
}

absl::StatusOr<std::vector<std::string>> SplitList(const Args& args, absl::string_view name) {
  std::vector<std::string> items;
  std::optional<std::string> text = args.Value(name);
  if (!text) return items;
  for (const std::string& item : SplitNames(*text)) {
    if (item.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, " '", *text, "': empty name in the list"));
    }
    for (const std::string& seen : items) {
      if (seen == item) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " '", *text, "': ", item, " is given twice"));
      }
    }
    items.emplace_back(item);
  }
  return items;
}

}  // namespace lowp::cli
