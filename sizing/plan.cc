#include "sizing/plan.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "formats/format.h"
#include "formats/option_error.h"
#include "quant/calibration.h"
#include "quant/scheme.h"
#include "io/bundled.h"
#include "io/tensor_set.h"

namespace lowp {
namespace {

absl::Status Invalid(absl::string_view field, absl::string_view message) {
  return OptionError(field, message);
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// Whether the measured tensors are the model's linear layers: each has the
// shape of one of them, [out, in] either way round (Conv1D checkpoints store
// [in, out]) or [experts, out, in] for stacked experts. Sets `reason` to the
// first that does not.
bool TensorsAreTheModels(const ModelConfig& model, const std::vector<const TensorView*>& tensors,
                         std::string* reason) {
  std::set<std::vector<int64_t>> shapes;
  for (const LayerKind& kind : LayerKinds(model)) {
    for (const TensorSpec& t : kind.tensors) {
      if (!t.linear) continue;
      shapes.insert({t.rows, t.cols});
      shapes.insert({t.cols, t.rows});
      if (t.count > 1) shapes.insert({t.count, t.rows, t.cols});
    }
  }
  for (const TensorView* t : tensors) {
    if (!shapes.contains(t->shape)) {
      *reason = absl::StrCat(t->name, " ", ShapeText(t->shape),
                             " has the shape of no linear layer of ", model.name);
      return false;
    }
  }
  return true;
}

// Why `device` cannot hold any job under `o` whatever the number of devices
// (its buffers take all the memory the headroom leaves), or nothing.
std::optional<std::string> NoRoom(const SizingOptions& o, const Device& device) {
  if (!(o.headroom >= 0 && o.headroom < 1) || device.memory_bytes <= 0) {
    return std::nullopt;  // EstimateMemory names the bad option
  }
  const int64_t capacity = static_cast<int64_t>(
      std::floor(static_cast<double>(device.memory_bytes) * (1.0 - o.headroom)));
  if (capacity > o.buffers_bytes) return std::nullopt;
  return absl::StrFormat(
      "cannot fit on any number of %s: %.2f GB of buffers per device leave nothing of its %.2f GB",
      device.name, static_cast<double>(o.buffers_bytes) / 1e9, static_cast<double>(capacity) / 1e9);
}

// The largest tensor-parallel degree the memory model accepts for `model`.
int64_t LargestTp(const ModelConfig& model) {
  for (int64_t tp = model.num_heads; tp > 1; --tp) {
    const int64_t kv = model.num_kv_heads;
    if (model.num_heads % tp == 0 && model.intermediate_size % tp == 0 &&
        (kv >= tp ? kv % tp == 0 : tp % kv == 0)) {
      return tp;
    }
  }
  return 1;
}

// The job's sizing on `device` with nothing reserved: what does not depend
// on the device (weight bytes and bits, the KV cache's format), even for a
// device whose buffers leave no room.
absl::StatusOr<SizingReport> Unreserved(const ModelConfig& model, SizingOptions o,
                                        const Device& device) {
  o.buffers_bytes = 0;
  o.headroom = 0;
  return EstimateMemory(model, o, device);
}

// The smallest share `o`'s job can be cut into, for the "cannot fit on any
// number of devices" verdict: the largest tp, one layer per pipeline stage,
// and under ZeRO (which partitions states over dp) as many data-parallel
// ranks as 2^20 devices allow.
SizingOptions SmallestShare(const ModelConfig& model, SizingOptions o) {
  o.tp = LargestTp(model);
  o.pp = model.num_layers;
  if (o.zero > 0) o.dp = std::max<int64_t>(o.dp, (int64_t{1} << 20) / (o.tp * o.pp));
  return o;
}

// Memory of one candidate on each device.
absl::Status SizeCandidate(const ModelConfig& model, const PlanOptions& options,
                           const std::string& kv, const std::string& scheme, PlanCandidate& c) {
  SizingOptions o = options.sizing;
  o.weights = scheme;
  o.kv = kv;
  absl::StatusOr<SizingReport> unreserved = Unreserved(model, o, options.devices.front());
  if (!unreserved.ok()) return unreserved.status();
  c.kv = unreserved->options.kv;
  c.kv_cache_bytes = unreserved->whole.kv_cache;
  c.linear_bits_per_parameter = unreserved->linear_bits_per_parameter;
  c.weight_bits_per_parameter = unreserved->weight_bits_per_parameter;
  c.weight_bytes = unreserved->whole.weights;
  for (const Device& device : options.devices) {
    PlanFit fit;
    fit.device = device;
    if (std::optional<std::string> reason = NoRoom(o, device)) {
      // EstimateMemory refuses this device; the plan says so and goes on.
      fit.possible = false;
      fit.reason = *std::move(reason);
      c.fits.push_back(std::move(fit));
      continue;
    }
    absl::StatusOr<SizingReport> r = EstimateMemory(model, o, device);
    if (!r.ok()) return r.status();
    fit.report = *std::move(r);
    if (!fit.report.fits) {
      // Would more devices help?
      const SizingOptions split = SmallestShare(model, o);
      absl::StatusOr<SizingReport> smallest = EstimateMemory(model, split, device);
      if (!smallest.ok()) return smallest.status();
      fit.smallest_share_dp = split.dp;
      fit.smallest_share_tp = split.tp;
      fit.smallest_share_pp = split.pp;
      fit.smallest_share_bytes = smallest->per_device.total();
      if (!smallest->fits) {
        fit.possible = false;
        fit.reason = absl::StrFormat(
            "cannot fit on any number of %s: cut as finely as the model allows (dp %d x tp %d x "
            "pp %d, one layer per stage) a device still needs %.2f GB of its %.2f GB",
            device.name, split.dp, split.tp, split.pp,
            static_cast<double>(fit.smallest_share_bytes) / 1e9,
            static_cast<double>(smallest->capacity_bytes) / 1e9);
      }
    }
    c.fits.push_back(std::move(fit));
  }
  return absl::OkStatus();
}

}  // namespace

double PlanCandidate::relative_rmse() const { return error.relative_rmse(); }

double PlanCandidate::sqnr_db() const { return error.sqnr_db(); }

namespace {
// NaN when nothing was measured (a calibrated candidate).
double OverFinite(const QuantReport& r, uint64_t n) {
  if (r.elements == 0) return std::numeric_limits<double>::quiet_NaN();
  const uint64_t finite = r.elements - r.stats.nan_inputs - r.stats.inf_inputs;
  return finite == 0 ? 0 : static_cast<double>(n) / static_cast<double>(finite);
}
}  // namespace

double PlanCandidate::clipped_fraction() const { return OverFinite(error, error.counts.clipped); }
double PlanCandidate::overflow_fraction() const {
  return OverFinite(error, error.stats.nonfinite_outputs);
}

const std::vector<std::string>& DefaultPlanFormats(Mode mode) {
  static const std::vector<std::string> stored = {"bf16", "fp8_e4m3fn", "int8-channel", "int4-g128",
                                                  "nf4",  "mxfp4",      "q4_0"};
  static const std::vector<std::string> trained = {"fp32", "bf16", "fp16", "fp8_e4m3fn"};
  return mode == Mode::kPretrain || mode == Mode::kFinetune ? trained : stored;
}

std::vector<bool> ParetoOptimal(const std::vector<double>& bytes,
                                const std::vector<double>& error) {
  // a is smaller than b beyond the tolerance.
  auto smaller = [](double a, double b) { return a < b * (1 - kParetoSizeTolerance); };
  std::vector<bool> optimal(bytes.size(), false);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (!std::isfinite(error[i])) continue;
    bool dominated = false;
    for (size_t j = 0; j < bytes.size() && !dominated; ++j) {
      if (j == i || !std::isfinite(error[j]) || smaller(bytes[i], bytes[j])) continue;
      // j is at most about as large as i.
      dominated = smaller(bytes[j], bytes[i]) ? error[j] <= error[i] : error[j] < error[i];
    }
    optimal[i] = !dominated;
  }
  return optimal;
}

bool IsLinearWeightName(absl::string_view name) {
  if (!absl::EndsWith(name, "weight") || name == "output.weight" ||
      absl::EndsWith(name, ".gate.weight")) {
    return false;
  }
  for (absl::string_view part : {"embed", "embd", "lm_head", "wte", "wpe", "router", "vision",
                                 "visual", "image", "audio", "projector"}) {
    if (absl::StrContains(name, part)) return false;
  }
  return true;
}

absl::StatusOr<Plan> MakePlan(const ModelConfig& model, const PlanOptions& options) {
  Plan plan;
  plan.model = model;
  plan.options = options;
  PlanOptions& o = plan.options;
  o.progress = nullptr;
  if (o.formats.empty()) o.formats = DefaultPlanFormats(o.sizing.mode);
  if (o.devices.empty()) return Invalid("device", "no device given");
  const bool full_training = o.sizing.mode == Mode::kPretrain || o.sizing.mode == Mode::kFinetune;
  // The schemes measured on the tensors, and for each its candidate's index;
  // a calibrated candidate is sized as its scheme and measured end to end only.
  std::vector<std::unique_ptr<Scheme>> schemes;
  std::vector<size_t> measured_candidate;
  std::vector<std::pair<std::string, Calibration>> sized_as;  // the scheme, how calibrated
  for (const std::string& format : o.formats) {
    absl::StatusOr<std::pair<std::string, Calibration>> split = SplitCalibration(format);
    if (!split.ok()) return Invalid(absl::StrCat("formats ", format), split.status().message());
    absl::StatusOr<std::unique_ptr<Scheme>> scheme = ParseScheme(split->first);
    if (!scheme.ok()) return Invalid(absl::StrCat("formats ", format), scheme.status().message());
    const absl::StatusOr<Format> cast = FindFormat(format);
    if (full_training && !(cast.ok() && cast->is_float())) {
      return Invalid(absl::StrCat("formats ", format),
                     absl::StrCat("full training (`mode` ", ModeName(o.sizing.mode),
                                  ") updates the weights themselves, so candidates are floating "
                                  "casts (fp32, bf16, fp16, fp8_e4m3fn, ...); quantized storage "
                                  "is for `mode` inference, lora or qlora"));
    }
    sized_as.push_back(*split);
    if (split->second.active()) continue;
    measured_candidate.push_back(sized_as.size() - 1);
    schemes.push_back(*std::move(scheme));
  }

  // Memory first: it is quick and rejects bad options before any file is read.
  SizingOptions reference = o.sizing;
  reference.weights = "bf16";
  reference.embed.clear();
  absl::StatusOr<SizingReport> bf16 = Unreserved(model, reference, o.devices.front());
  if (!bf16.ok()) return bf16.status();
  const std::string kv = bf16->options.kv;
  plan.kv = kv;
  const int64_t reference_weight_bytes = bf16->whole.weights;
  for (size_t i = 0; i < o.formats.size(); ++i) {
    PlanCandidate c;
    c.format = o.formats[i];
    c.calibrated = sized_as[i].second.active();
    if (absl::Status s = SizeCandidate(model, o, kv, sized_as[i].first, c); !s.ok()) return s;
    c.saving_vs_bf16 =
        1.0 - static_cast<double>(c.weight_bytes) / static_cast<double>(reference_weight_bytes);
    plan.candidates.push_back(std::move(c));
  }

  if (!o.kv_formats.empty()) {
    if (o.sizing.mode != Mode::kInference) {
      return Invalid("kv", "a KV cache study sizes a served model: give `mode` inference");
    }
    PlanKvStudy study;
    for (const std::string& kv : o.kv_formats) {
      if (std::count(o.kv_formats.begin(), o.kv_formats.end(), kv) > 1) {
        return Invalid("kv", absl::StrCat(kv, " given twice"));
      }
      SizingOptions s = reference;
      s.kv = kv;
      absl::StatusOr<SizingReport> r = Unreserved(model, s, o.devices.front());
      if (!r.ok()) return r.status();
      study.formats.push_back({r->options.kv, r->whole.kv_cache, std::nullopt});
    }
    for (size_t i = 0; i < o.formats.size(); ++i) {
      for (const PlanKvFormat& kv : study.formats) {
        PlanCandidate c;
        c.format = o.formats[i];
        c.calibrated = sized_as[i].second.active();
        if (absl::Status s = SizeCandidate(model, o, kv.format, sized_as[i].first, c); !s.ok()) {
          return s;
        }
        c.saving_vs_bf16 = plan.candidates[i].saving_vs_bf16;
        study.pairs.push_back(std::move(c));
      }
    }
    plan.kv_study = std::move(study);
  }

  // Accuracy.
  PlanSource& source = plan.source;
  source.files = o.tensor_files;
  if (source.files.empty()) {
    absl::StatusOr<std::string> bundled = BundledCheckpoint();
    if (!bundled.ok()) return bundled.status();
    source.files = {*bundled};
    source.bundled = true;
  }
  absl::StatusOr<TensorSet> set = TensorSet::OpenAll(source.files);
  if (!set.ok()) return set.status();
  std::vector<const TensorView*> selected;
  for (const TensorView& t : set->tensors()) {
    const bool chosen = o.select.empty() ? (t.shape.size() == 2 || t.shape.size() == 3) &&
                                               IsLinearWeightName(t.name)
                                         : MatchesPattern(o.select, t.name);
    if (!chosen) continue;
    if (!IsFloating(t.dtype)) {
      source.skipped.push_back(t.name);
      continue;
    }
    selected.push_back(&t);
  }
  if (selected.empty()) {
    return Invalid(o.select.empty() ? "tensors" : "select",
                   absl::StrCat("no floating ",
                                o.select.empty() ? std::string("linear-layer weights")
                                                 : absl::StrCat("tensor matches '", o.select, "'"),
                                " in ", absl::StrJoin(source.files, ", ")));
  }
  source.proxy = !TensorsAreTheModels(model, selected, &source.proxy_reason);
  if (!schemes.empty()) {
    absl::StatusOr<SetReports> measured = MeasureTensors(*set, selected, schemes, o.measure,
                                                         options.progress, /*keep_results=*/false);
    if (!measured.ok()) return measured.status();
    for (size_t s = 0; s < schemes.size(); ++s) {
      plan.candidates[measured_candidate[s]].error = std::move(measured->aggregates[s]);
    }
  }
  for (const TensorView* tensor : selected) {
    source.tensors.push_back(tensor->name);
    source.elements += static_cast<uint64_t>(tensor->elements());
  }

  std::vector<double> bytes, error;
  for (const PlanCandidate& c : plan.candidates) {
    bytes.push_back(static_cast<double>(c.weight_bytes));
    error.push_back(c.relative_rmse());
  }
  const std::vector<bool> pareto = ParetoOptimal(bytes, error);
  for (size_t i = 0; i < pareto.size(); ++i) plan.candidates[i].pareto = pareto[i];
  if (plan.kv_study) {  // each pair's error is its format's, until measured end to end
    const size_t K = plan.kv_study->formats.size();
    for (size_t p = 0; p < plan.kv_study->pairs.size(); ++p) {
      plan.kv_study->pairs[p].error = plan.candidates[p / K].error;
    }
  }
  return plan;
}

void MarkKvPareto(PlanKvStudy& study) {
  std::vector<double> bytes, kl;
  for (const PlanCandidate& c : study.pairs) {
    bytes.push_back(static_cast<double>(c.weight_bytes + c.kv_cache_bytes));
    kl.push_back(c.end_to_end ? c.end_to_end->kl_mean : NAN);
  }
  const std::vector<bool> pareto = ParetoOptimal(bytes, kl);
  for (size_t i = 0; i < pareto.size(); ++i) study.pairs[i].pareto = pareto[i];
}

}  // namespace lowp
