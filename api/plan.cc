#include "api/plan.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <system_error>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/eval.h"
#include "api/json.h"
#include "api/inputs.h"
#include "api/plan_html.h"
#include "api/plan_table.h"
#include "api/text.h"
#include "formats/option_error.h"
#include "io/input_files.h"
#include "io/bundled.h"
#include "io/output_file.h"
#include "mix/budget.h"
#include "mix/groups.h"
#include "mix/sensitivity.h"
#include "mix/table.h"
#include "model/checkpoint.h"
#include "sizing/devices.h"
#include "model/config.h"
#include "model/weights.h"
#include "quant/calibration.h"

namespace lowp::api {
namespace {

// The device could be sized at all (not a device whose buffers leave nothing).
bool Sized(const PlanFit& f) { return f.report.capacity_bytes > 0; }

// A number for JSON; null where unknown (NaN) or zero meaning "none".
nlohmann::json Known(double v) { return v > 0 || v < 0 ? JsonNumber(v) : nlohmann::json(nullptr); }

nlohmann::json EndToEndJson(const PlanCandidate::EndToEnd& x) {
  return {{"kl_mean", JsonNumber(x.kl_mean)},
          {"kl_p99", JsonNumber(x.kl_p99)},
          {"top1_agreement", JsonNumber(x.top1_agreement)},
          {"perplexity", JsonNumber(x.perplexity)},
          {"perplexity_ratio", JsonNumber(x.perplexity_ratio)}};
}

}  // namespace

nlohmann::json ToJson(const Plan& plan) {
  nlohmann::json j;
  j["model"] = plan.model.name;
  j["parameters"] = CountParameters(plan.model).total;
  nlohmann::json options = SizingOptionsJson(plan.options.sizing);
  options["weights"] = nullptr;
  options["kv"] = plan.kv;
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
  if (plan.eval) {
    const PlanEval& e = *plan.eval;
    j["eval"] = {{"model", e.model},
                 {"tokens", e.tokens},
                 {"positions", e.positions},
                 {"reference_perplexity", JsonNumber(e.reference_perplexity)},
                 {"proxy", e.proxy},
                 {"proxy_reason", e.proxy ? nlohmann::json(e.proxy_reason) : nlohmann::json()}};
  } else {
    j["eval"] = nullptr;
  }
  if (plan.mix) {
    const PlanMixes& m = *plan.mix;
    nlohmann::ordered_json mj;
    mj["model"] = m.model;
    mj["types"] = m.types;
    mj["tune_tokens"] = m.tune_tokens;
    mj["tune_positions"] = m.tune_positions;
    mj["candidates_measured"] = m.candidates_measured;
    mj["devices"] = nlohmann::ordered_json::array();
    for (const PlanMix& d : m.devices) {
      nlohmann::ordered_json dj;
      dj["device"] = d.device.name;
      dj["capacity_bytes"] = d.capacity_bytes;
      dj["other_bytes"] = d.other_bytes;
      dj["budget_bytes"] = d.budget_bytes;
      dj["budget_bits_per_weight"] = JsonNumber(d.budget_bits_per_weight);
      dj["possible"] = d.possible;
      dj["reason"] = d.possible ? nlohmann::ordered_json() : nlohmann::ordered_json(d.reason);
      if (d.possible) {
        dj["bits_per_weight"] = JsonNumber(d.bits_per_weight);
        dj["weight_bytes"] = d.weight_bytes;
        dj["per_device_bytes"] = d.per_device_bytes;
        dj["predicted_kl_mean"] = JsonNumber(d.predicted_kl);
        dj["end_to_end"] = EndToEndJson(*d.end_to_end);
        dj["weights_option"] = d.weights_option;
      }
      mj["devices"].push_back(dj);
    }
    j["mix"] = mj;
  } else {
    j["mix"] = nullptr;
  }
  j["pareto_on"] = plan.eval ? "kl_mean" : "relative_rmse";
  j["pareto_size_tolerance"] = kParetoSizeTolerance;
  j["candidates"] = nlohmann::json::array();
  for (const PlanCandidate& c : plan.candidates) {
    nlohmann::json cj;
    cj["format"] = c.format;
    cj["linear_bits_per_parameter"] = JsonNumber(c.linear_bits_per_parameter);
    cj["weight_bits_per_parameter"] = JsonNumber(c.weight_bits_per_parameter);
    cj["weight_bytes"] = c.weight_bytes;
    cj["saving_vs_bf16"] = JsonNumber(c.saving_vs_bf16);
    // The candidate's error (infinite with any overflow, null when nothing
    // was measured); "error" is quant-error's row for the measured tensors,
    // its bits_per_weight and bytes theirs, not the model's.
    cj["sqnr_db"] = JsonNumber(c.sqnr_db());
    cj["relative_rmse"] = JsonNumber(c.relative_rmse());
    cj["clipped_fraction"] = JsonNumber(c.clipped_fraction());
    cj["overflow_fraction"] = JsonNumber(c.overflow_fraction());
    if (c.end_to_end) {
      cj["end_to_end"] = EndToEndJson(*c.end_to_end);
    } else {
      cj["end_to_end"] = nullptr;
    }
    cj["pareto"] = c.pareto;
    // A calibrated candidate's error is its end_to_end: none on the tensors alone.
    cj["error"] = c.calibrated ? nlohmann::json(nullptr)
                               : QuantReportJson(c.error, plan.options.measure.relative_floor,
                                                 false);
    cj["devices"] = nlohmann::json::array();
    for (const PlanFit& f : c.fits) {
      nlohmann::json fj;
      fj["device"] = f.device.name;
      fj["possible"] = f.possible;
      fj["reason"] = f.possible ? nlohmann::json(nullptr) : nlohmann::json(f.reason);
      fj["fits"] = f.report.fits;
      fj["devices_needed"] = f.possible ? nlohmann::json(f.report.devices_needed) : nullptr;
      if (Sized(f)) {
        const SizingReport& r = f.report;
        fj["per_device"] = BytesJson(r.per_device);
        fj["whole"] = BytesJson(r.whole);
        fj["capacity_bytes"] = r.capacity_bytes;
        fj["usable_bytes"] = r.usable_bytes;
        fj["devices_needed_exact"] = JsonNumber(r.devices_needed_exact);
        fj["max_seq"] = r.max_seq;
        fj["max_batch"] = r.max_batch;
        fj["bytes_read_per_step"] = r.bytes_read_per_step;
        // Only for inference that fits, as the table (lowp size gives the
        // bound for any layout).
        const double decode = PlanDecode(plan, f);
        fj["decode_tokens_per_s_per_sequence"] = Known(decode);
        fj["decode_tokens_per_s"] = Known(decode * static_cast<double>(plan.options.sizing.batch));
      }
      if (f.smallest_share_bytes > 0) {
        fj["smallest_share"] = {{"dp", f.smallest_share_dp},
                                {"tp", f.smallest_share_tp},
                                {"pp", f.smallest_share_pp},
                                {"per_device_bytes", f.smallest_share_bytes}};
      }
      cj["devices"].push_back(fj);
    }
    j["candidates"].push_back(cj);
  }
  return j;
}


namespace {

// Whether two configs describe the same network (names aside).
bool SameShape(const ModelConfig& a, const ModelConfig& b) {
  return a.model_type == b.model_type && a.hidden_size == b.hidden_size &&
         a.intermediate_size == b.intermediate_size && a.num_layers == b.num_layers &&
         a.num_heads == b.num_heads && a.num_kv_heads == b.num_kv_heads &&
         a.head_dim == b.head_dim && a.vocab_size == b.vocab_size &&
         a.num_experts == b.num_experts;
}

// lowp eval with each candidate's format on the linear layers; the Pareto
// front is then taken on mean KL.
absl::Status AddEndToEnd(const PlanJobOptions& o, const std::string& model,
                         std::vector<EvalCandidate> mixes, Plan& plan) {
  EvalOptions e;
  e.model = model;
  e.sample = o.eval_sample;
  e.seed = o.eval_seed;
  e.text_file = o.eval_text;
  e.ctx = o.eval_ctx;
  e.chunks = o.eval_chunks;
  e.imatrix = o.eval_imatrix;
  e.calibration = o.calibration;
  e.threads = o.threads;
  std::vector<std::string> formats;
  for (const PlanCandidate& c : plan.candidates) formats.push_back(c.format);
  e.weights = absl::StrJoin(formats, ",");
  e.candidates = std::move(mixes);
  if (o.progress) {
    e.progress = [&o](int64_t, int64_t total, const std::string& what) {
      o.progress(static_cast<size_t>(total), absl::StrCat("eval: ", what));
    };
  }
  absl::StatusOr<EvalResult> r = Eval(e);
  if (!r.ok()) {
    const std::string field = OptionOf(r.status()).value_or("");
    if (field == "model") return OptionError("eval_model", r.status().message());
    if (field == "sample") return OptionError("eval_sample", r.status().message());
    if (field == "text" || field == "ctx" || field == "chunks" || field == "tokenizer") {
      return OptionError(absl::StrCat("eval_", field), r.status().message());
    }
    return r.status();
  }
  PlanEval pe;
  pe.model = r->model;
  pe.tokens = r->tokens;
  pe.positions = r->report.positions;
  pe.reference_perplexity = r->report.reference_perplexity;
  pe.proxy = !SameShape(r->config, plan.model);
  if (pe.proxy) {
    pe.proxy_reason = absl::StrCat("measured on ", r->config.model_type, " with ",
                                   r->config.num_layers, " layers of width ",
                                   r->config.hidden_size, ", not ", plan.model.name);
  }
  plan.eval = pe;
  std::vector<double> bytes, kl;
  for (size_t i = 0; i < plan.candidates.size(); ++i) {
    const CandidateResult& c = r->report.candidates[i];
    PlanCandidate::EndToEnd x;
    x.kl_mean = c.kl.mean;
    x.kl_p99 = c.kl.p99;
    x.top1_agreement = c.top1_agreement;
    x.perplexity = c.perplexity;
    x.perplexity_ratio = c.perplexity / r->report.reference_perplexity;
    plan.candidates[i].end_to_end = x;
    bytes.push_back(static_cast<double>(plan.candidates[i].weight_bytes));
    kl.push_back(x.kl_mean);
  }
  const std::vector<bool> pareto = ParetoOptimal(bytes, kl);
  for (size_t i = 0; i < pareto.size(); ++i) plan.candidates[i].pareto = pareto[i];
  if (plan.mix) {
    size_t next = plan.candidates.size();
    for (PlanMix& m : plan.mix->devices) {
      if (!m.possible) continue;
      const CandidateResult& c = r->report.candidates[next++];
      m.end_to_end = PlanCandidate::EndToEnd{c.kl.mean, c.kl.p99, c.top1_agreement, c.perplexity,
                                             c.perplexity / r->report.reference_perplexity};
    }
  }
  return absl::OkStatus();
}

// The option of plan's a mix error belongs to.
absl::Status MixError(const absl::Status& s) {
  const std::string field = OptionOf(s).value_or("");
  std::string why(s.message());
  if (absl::StartsWith(why, absl::StrCat(field, ": "))) why.erase(0, field.size() + 2);
  if (field == "types") return OptionError("mix_types", why);
  if (field == "imatrix") return OptionError("eval_imatrix", why);
  return s;
}

// plan --mix: the sensitivity sweep on the evaluated model, then per device
// the mix for what the device leaves beside the job. Returns the mixes as
// candidates to evaluate beside the formats (the possible ones, in device
// order).
absl::StatusOr<std::vector<EvalCandidate>> PrepareMixes(const PlanJobOptions& o,
                                                        const std::string& path, Plan& plan) {
  const SizingOptions& job = plan.options.sizing;
  if (job.mode != Mode::kInference) {
    return OptionError("mix", "a mix is chosen to serve a model: give mode inference");
  }
  if (job.dp * job.tp * job.pp != 1) {
    return OptionError("mix", "a mix is chosen for one device per replica (dp, tp and pp 1)");
  }
  MixRun run;
  run.threads = o.threads;
  if (o.progress) {
    run.progress = [&o](int64_t, int64_t total, const std::string& what) {
      o.progress(static_cast<size_t>(total), absl::StrCat("mix ", what));
    };
  }
  absl::StatusOr<Checkpoint> model = Checkpoint::OpenModel(path, {});
  if (!model.ok()) return OptionError("eval_model", model.status().message());
  absl::StatusOr<std::shared_ptr<const ImportanceMap>> importance =
      OpenImportance(o.eval_imatrix);
  if (!importance.ok()) return MixError(importance.status());
  absl::StatusOr<MixTable> table = MakeMixTable(*model, path, o.mix_types, *importance);
  if (!table.ok()) return MixError(table.status());
  if (absl::Status s = SetCalibration(*table, o.calibration, o.threads, *model, path); !s.ok()) {
    return s;
  }
  EvalOptions tune;
  tune.sample = o.mix_tune_sample;
  tune.seed = o.mix_tune_seed;
  absl::StatusOr<MixTokens> tokens = ReadMixTokens(tune, "mix_tune_", o.threads, *model, path);
  if (!tokens.ok()) return tokens.status();
  if (absl::Status s = MeasureSensitivity(*model, *tokens, run, *table); !s.ok()) return s;
  PlanMixes mixes;
  mixes.model = path;
  mixes.types = table->types;
  mixes.tune_tokens = table->tune_tokens;
  mixes.tune_positions = table->tune_positions;
  mixes.candidates_measured = table->candidates_measured;
  const uint64_t planned = MixMatrixWeights(plan.model);
  const uint64_t smallest = table->SmallestBytes();
  std::vector<EvalCandidate> candidates;
  for (const Device& device : plan.options.devices) {
    SizingOptions s = job;
    s.kv = plan.kv;
    absl::StatusOr<DeviceBudget> b = BudgetOnDevice(plan.model, planned, device, s);
    if (!b.ok()) return b.status();
    PlanMix pm;
    pm.device = device;
    pm.capacity_bytes = b->capacity_bytes;
    pm.other_bytes = b->other_bytes;
    pm.other_weight_bytes = b->other_weight_bytes;
    pm.budget_bytes = static_cast<int64_t>(b->budget_bytes);
    pm.budget_bits_per_weight = BitsPerWeight(b->budget_bytes, planned);
    // The same matrices (a snapshot planning itself): the bytes exactly.
    const uint64_t budget = table->weights == planned
                                ? b->budget_bytes
                                : BudgetBytes(pm.budget_bits_per_weight, table->weights);
    if (budget < smallest) {
      pm.possible = false;
      pm.reason = absl::StrFormat(
          "%.4g bits per weight left beside the job, below the smallest mix of the types (%.4g)",
          pm.budget_bits_per_weight, BitsPerWeight(smallest, table->weights));
      mixes.devices.push_back(std::move(pm));
      continue;
    }
    absl::StatusOr<Allocation> a = table->Allocate(budget);
    if (!a.ok()) return a.status();
    const MixAssignment assignment = table->Assignment(*a);
    pm.bits_per_weight = BitsPerWeight(table->Bytes(*a), table->weights);
    pm.predicted_kl = a->cost;
    pm.weights_option = absl::StrJoin(MixRules(table->groups, assignment), ",");
    const auto matrices = static_cast<int64_t>(StoredBytes(pm.bits_per_weight, planned));
    pm.weight_bytes = matrices + pm.other_weight_bytes;
    pm.per_device_bytes = pm.other_bytes + std::min(matrices, pm.budget_bytes);
    candidates.push_back(table->Candidate(absl::StrCat("lowp mix @ ", device.name), assignment));
    mixes.devices.push_back(std::move(pm));
  }
  plan.mix = std::move(mixes);
  return candidates;
}

}  // namespace

absl::StatusOr<Plan> PlanJob(const PlanJobOptions& o) {
  const InputScope scope;  // --html never replaces a file the plan reads
  if (!o.sizing.weights.empty()) {
    return OptionError("weights", "plan compares weight formats; list them with `formats`");
  }
  if (absl::Status s = CheckThreads(o.threads); !s.ok()) return s;
  absl::StatusOr<ModelConfig> model = FindModel(o.model);
  if (!model.ok()) return OptionError("model", model.status().message());
  PlanOptions options;
  options.sizing = o.sizing;
  options.formats = o.formats;
  if (!o.eval && !o.mix) {
    for (const std::string& format : o.formats) {
      absl::StatusOr<std::pair<std::string, Calibration>> split = SplitCalibration(format);
      if (split.ok() && split->second.active()) {
        return OptionError(
            "formats", absl::StrCat(format, ": calibrated on the inputs the model's layers see, "
                                            "so measured on its outputs only: add `eval`"));
      }
    }
  }
  for (const std::string& name :
       o.devices.empty() ? std::vector<std::string>{"h100-sxm"} : o.devices) {
    absl::StatusOr<Device> device = FindDevice(name);
    if (!device.ok()) return OptionError("device", device.status().message());
    options.devices.push_back(*device);
  }
  options.tensor_files = o.tensor_files;
  std::error_code ec;
  const bool snapshot = std::filesystem::is_directory(o.model, ec);
  // A snapshot directory's own weights are what the error is measured on,
  // and what is evaluated.
  if (snapshot && options.tensor_files.empty()) {
    absl::StatusOr<std::vector<std::string>> files = SnapshotCheckpoint(o.model);
    if (!files.ok()) return files.status();
    options.tensor_files = *files;
  }
  options.select = o.select;
  options.measure.threads = o.threads;
  options.progress = o.progress;
  if (o.html && o.html->empty()) return OptionError("html", "empty file name");
  absl::StatusOr<Plan> plan = MakePlan(*model, options);
  if (!plan.ok()) return plan.status();
  // Opened before the evaluation, so that an --html naming a file read so
  // far is refused before the long part (and at Commit for the rest).
  std::unique_ptr<OutputFile> html;
  if (o.html) {
    absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(*o.html, "html");
    if (!out.ok()) return out.status();
    html = *std::move(out);
  }
  if (o.eval || o.mix) {
    // A snapshot directory evaluates itself unless another model is named;
    // a mix needs rows llama.cpp's types apply to (the bundled stories3M-hf).
    std::string model = o.eval_model.empty() && snapshot ? o.model : o.eval_model;
    std::vector<EvalCandidate> mixes;
    if (o.mix) {
      if (model.empty()) {
        absl::StatusOr<std::string> bundled = BundledMixModel();
        if (!bundled.ok()) return OptionError("eval_model", bundled.status().message());
        model = *bundled;
      }
      absl::StatusOr<std::vector<EvalCandidate>> made = PrepareMixes(o, model, *plan);
      if (!made.ok()) return made.status();
      mixes = *std::move(made);
    }
    if (absl::Status s = AddEndToEnd(o, model, std::move(mixes), *plan); !s.ok()) return s;
  }
  if (html) {
    if (absl::Status s = html->Write(PlanHtml(*plan, o.html_command)); !s.ok()) return s;
    if (absl::Status s = html->Commit(); !s.ok()) return s;
  }
  return plan;
}

}  // namespace lowp::api
