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
#include "absl/strings/str_split.h"
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

// lowp plan --kv's pairs and formats (sizing/plan.h PlanKvStudy).
nlohmann::ordered_json KvStudyJson(const PlanKvStudy& k) {
  nlohmann::ordered_json kj;
  kj["model"] = k.model;
  kj["tokens"] = k.tokens;
  kj["context"] = k.context;
  kj["positions"] = k.positions;
  kj["reference_perplexity"] = JsonNumber(k.reference_perplexity);
  kj["formats"] = nlohmann::ordered_json::array();
  for (const PlanKvFormat& f : k.formats) {
    nlohmann::ordered_json fj;
    fj["kv"] = f.format;
    fj["kv_cache_bytes"] = f.kv_cache_bytes;
    fj["end_to_end"] = f.end_to_end ? nlohmann::ordered_json(EndToEndJson(*f.end_to_end))
                                    : nlohmann::ordered_json();
    kj["formats"].push_back(fj);
  }
  // Pareto over weight_bytes + kv_cache_bytes and end_to_end.kl_mean.
  kj["pairs"] = nlohmann::ordered_json::array();
  for (const PlanCandidate& c : k.pairs) {
    nlohmann::ordered_json pj;
    pj["format"] = c.format;
    pj["kv"] = c.kv;
    pj["weight_bytes"] = c.weight_bytes;
    pj["kv_cache_bytes"] = c.kv_cache_bytes;
    pj["end_to_end"] = c.end_to_end ? nlohmann::ordered_json(EndToEndJson(*c.end_to_end))
                                    : nlohmann::ordered_json();
    pj["pareto"] = c.pareto;
    pj["devices"] = nlohmann::ordered_json::array();
    for (const PlanFit& f : c.fits) {
      nlohmann::ordered_json fj;
      fj["device"] = f.device.name;
      fj["possible"] = f.possible;
      fj["fits"] = f.report.fits;
      fj["devices_needed"] = f.possible ? nlohmann::ordered_json(f.report.devices_needed)
                                        : nlohmann::ordered_json();
      if (Sized(f)) {
        fj["per_device_bytes"] = f.report.per_device.total();
        fj["per_device_kv_cache"] = f.report.per_device.kv_cache;
        fj["capacity_bytes"] = f.report.capacity_bytes;
        fj["max_seq"] = f.report.max_seq;
        fj["max_batch"] = f.report.max_batch;
      }
      pj["devices"].push_back(fj);
    }
    kj["pairs"].push_back(pj);
  }
  return kj;
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
    mj["sensitivity_method"] = m.sensitivity;
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
  j["kv_study"] = plan.kv_study ? nlohmann::json(KvStudyJson(*plan.kv_study)) : nlohmann::json();
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

// lowp eval for the plan: `e` (its sites and tokens set) with the plan's
// seed, imatrix, calibration and threads, progress named `stage`; errors on
// the tokens name plan's options (eval_model, `sample` for eval's sample,
// eval_text, ...).
absl::StatusOr<EvalResult> RunEval(const PlanJobOptions& o, EvalOptions e, const char* stage,
                                   const char* sample) {
  e.seed = o.eval_seed;
  e.imatrix = o.eval_imatrix;
  e.calibration = o.calibration;
  e.threads = o.threads;
  if (o.progress) {
    e.progress = [&o, stage](int64_t, int64_t total, const std::string& what) {
      o.progress(static_cast<size_t>(total), absl::StrCat(stage, ": ", what));
    };
  }
  absl::StatusOr<EvalResult> r = Eval(e);
  if (r.ok()) return r;
  const std::string field = OptionOf(r.status()).value_or("");
  if (field == "model") return OptionError("eval_model", r.status().message());
  if (field == "sample") return OptionError(sample, r.status().message());
  if (field == "text" || field == "ctx" || field == "chunks" || field == "tokenizer") {
    return OptionError(absl::StrCat("eval_", field), r.status().message());
  }
  return r.status();
}

// Candidate i of an evaluation as the plan's columns.
PlanCandidate::EndToEnd EndToEndOf(const EvalResult& r, size_t i) {
  const CandidateResult& c = r.report.candidates[i];
  return {c.kl.mean, c.kl.p99, c.top1_agreement, c.perplexity,
          c.perplexity / r.report.reference_perplexity};
}

// lowp eval with each candidate's format on the linear layers; the Pareto
// front is then taken on mean KL.
absl::Status AddEndToEnd(const PlanJobOptions& o, const std::string& model,
                         std::vector<EvalCandidate> mixes, Plan& plan) {
  EvalOptions e;
  e.model = model;
  e.sample = o.eval_sample;
  e.text_file = o.eval_text;
  e.ctx = o.eval_ctx;
  e.chunks = o.eval_chunks;
  std::vector<std::string> formats;
  for (const PlanCandidate& c : plan.candidates) formats.push_back(c.format);
  e.weights = absl::StrJoin(formats, ",");
  e.candidates = std::move(mixes);
  absl::StatusOr<EvalResult> r = RunEval(o, std::move(e), "eval", "eval_sample");
  if (!r.ok()) return r.status();
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
    plan.candidates[i].end_to_end = EndToEndOf(*r, i);
    bytes.push_back(static_cast<double>(plan.candidates[i].weight_bytes));
    kl.push_back(plan.candidates[i].end_to_end->kl_mean);
  }
  const std::vector<bool> pareto = ParetoOptimal(bytes, kl);
  for (size_t i = 0; i < pareto.size(); ++i) plan.candidates[i].pareto = pareto[i];
  if (plan.mix) {
    size_t next = plan.candidates.size();
    for (PlanMix& m : plan.mix->devices) {
      if (!m.possible) continue;
      m.end_to_end = EndToEndOf(*r, next++);
    }
  }
  return absl::OkStatus();
}

// plan --kv A,B,...: each candidate format with each KV cache format, and
// each KV format with float32 weights, evaluated on sequences as long as the
// evaluated model allows (kPlanKvContext at most); the pairs' Pareto front.
absl::Status AddKvEndToEnd(const PlanJobOptions& o, std::string model, Plan& plan) {
  PlanKvStudy& study = *plan.kv_study;
  if (model.empty()) {
    absl::StatusOr<std::string> bundled = BundledModel();
    if (!bundled.ok()) return OptionError("eval_model", bundled.status().message());
    model = *bundled;
  }
  std::string sample = o.kv_sample;
  if (sample.empty()) {
    absl::StatusOr<Checkpoint> checkpoint = Checkpoint::OpenModel(model, {});
    if (!checkpoint.ok()) return OptionError("eval_model", checkpoint.status().message());
    const int64_t allowed = checkpoint->config().max_position_embeddings;
    sample = absl::StrCat(4, ":", allowed > 0 ? std::min(allowed, kPlanKvContext) : kPlanKvContext);
  }
  EvalOptions e;
  e.model = model;
  e.sample = sample;
  std::vector<std::string> weights = {"none"}, kv;
  for (const PlanCandidate& c : plan.candidates) weights.push_back(c.format);
  for (const PlanKvFormat& f : study.formats) kv.push_back(f.format);
  e.weights = absl::StrJoin(weights, ",");
  e.kv = absl::StrJoin(kv, ",");
  absl::StatusOr<EvalResult> r = RunEval(o, std::move(e), "kv", "kv_sample");
  if (!r.ok()) return r.status();
  // Weights outer, KV inner: row 0 the float32 weights.
  const size_t K = study.formats.size();
  for (size_t k = 0; k < K; ++k) study.formats[k].end_to_end = EndToEndOf(*r, k);
  for (size_t p = 0; p < study.pairs.size(); ++p) {
    study.pairs[p].end_to_end = EndToEndOf(*r, K + p);
  }
  study.model = r->model;
  study.tokens = r->tokens;
  study.context = r->report.sequence_length;
  study.positions = r->report.positions;
  study.reference_perplexity = r->report.reference_perplexity;
  MarkKvPareto(study);
  return absl::OkStatus();
}

// The option of plan's a mix error belongs to.
absl::Status MixError(const absl::Status& s) {
  const std::string field = OptionOf(s).value_or("");
  std::string why(s.message());
  if (absl::StartsWith(why, absl::StrCat(field, ": "))) why.erase(0, field.size() + 2);
  if (field == "types") return OptionError("mix_types", why);
  if (field == "imatrix") return OptionError("eval_imatrix", why);
  if (field == "sensitivity") return OptionError("mix_sensitivity", why);
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
  absl::StatusOr<MixSensitivity> method = ParseMixSensitivity(o.mix_sensitivity);
  if (!method.ok()) return MixError(method.status());
  table->method = *method;
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
  mixes.sensitivity = MixSensitivityName(table->method);
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
  if (o.sizing.kv.find(',') != std::string::npos) {  // the KV study
    options.kv_formats = absl::StrSplit(o.sizing.kv, ',');
    options.sizing.kv.clear();
    for (const std::string& kv : options.kv_formats) {
      if (kv.empty()) return OptionError("kv", absl::StrCat("'", o.sizing.kv, "': an empty item"));
    }
  } else if (!o.kv_sample.empty()) {
    return OptionError("kv_sample", "the tokens of a KV study: give `kv` a list of formats");
  }
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
  if (o.eval || o.mix || plan->kv_study) {
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
    if (plan->kv_study) {
      if (absl::Status s = AddKvEndToEnd(o, model, *plan); !s.ok()) return s;
    }
  }
  if (html) {
    if (absl::Status s = html->Write(PlanHtml(*plan, o.html_command)); !s.ok()) return s;
    if (absl::Status s = html->Commit(); !s.ok()) return s;
  }
  return plan;
}

}  // namespace lowp::api
