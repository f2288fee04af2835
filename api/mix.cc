#include "api/mix.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/inputs.h"
#include "api/json.h"
#include "api/quant.h"
#include "api/quantize_model.h"
#include "mix/sensitivity.h"
#include "mix/table_file.h"
#include "formats/option_error.h"
#include "io/bundled.h"
#include "quant/recipe.h"
#include "sizing/devices.h"

namespace lowp::api {

absl::StatusOr<MixResult> Mix(const MixOptions& o) {
  if (absl::Status s = CheckThreads(o.threads); !s.ok()) return s;
  if (!o.out.empty() && !absl::EndsWith(o.out, ".gguf") && !absl::EndsWith(o.out, ".safetensors")) {
    return OptionError("out", absl::StrCat("'", o.out, "': want a .gguf or .safetensors file"));
  }
  const MixBudgetOptions budget{o.bits_per_weight, o.bytes, o.device, o.job};
  if (absl::Status s = CheckMixBudget(budget); !s.ok()) return s;
  if (o.shard.empty() != o.table_out.empty()) {
    return OptionError(o.shard.empty() ? "table_out" : "shard",
                       "shard and table_out go together: a shard of the sweep is written there");
  }
  std::optional<MixShard> shard;
  if (!o.shard.empty()) {
    absl::StatusOr<MixShard> parsed = ParseMixShard(o.shard);
    if (!parsed.ok()) return parsed.status();
    shard = *parsed;
    if (!o.tables.empty()) return OptionError("tables", "a shard run measures; it reads no tables");
    if (!o.out.empty()) return OptionError("out", "a shard run chooses no mix to write");
  }
  if (o.random_mixes < 0 || o.random_mixes > kMaxRandomMixes) {
    return OptionError("random_mixes", absl::StrCat(o.random_mixes, " is not in 0..",
                                                    kMaxRandomMixes));
  }
  std::string path = o.model;
  if (path.empty()) {
    absl::StatusOr<std::string> bundled = BundledMixModel();
    if (!bundled.ok()) return OptionError("model", bundled.status().message());
    path = *bundled;
  }
  absl::StatusOr<Checkpoint> model = Checkpoint::OpenModel(path, o.tensors);
  if (!model.ok()) return model.status();
  // Every option fault before the work (sampling, tokenizing) starts.
  if (absl::Status s = CheckMixTokenOptions(o.verify, "", model->config()); !s.ok()) return s;
  if (absl::Status s = CheckMixTokenOptions(o.tune, "tune_", model->config()); !s.ok()) return s;
  absl::StatusOr<std::shared_ptr<const ImportanceMap>> importance = OpenImportance(o.imatrix);
  if (!importance.ok()) return importance.status();
  if (o.expert_groups != "layer" && o.expert_groups != "each") {
    return OptionError("expert_groups",
                       absl::StrCat("'", o.expert_groups, "' is not layer or each"));
  }
  absl::StatusOr<MixTable> table =
      MakeMixTable(*model, path, o.types, *importance,
                   o.expert_groups == "each" ? ExpertGroups::kEach : ExpertGroups::kLayer);
  if (!table.ok()) return table.status();
  if (table->Calibrates()) {
    if (absl::Status s = CheckCalibrationOptions(o.calibration, model->config()); !s.ok()) {
      return s;
    }
  }
  absl::StatusOr<MixSensitivity> method = ParseMixSensitivity(o.sensitivity);
  if (!method.ok()) return method.status();
  table->method = *method;
  MixResult result;
  static_cast<MixTable&>(result) = *std::move(table);
  result.imatrix = o.imatrix;
  absl::StatusOr<MixBudget> b =
      ResolveMixBudget(budget, model->config(), result.weights, result.SmallestBytes());
  if (!b.ok()) return b.status();
  result.budget_bytes = b->bytes;
  result.device = b->device;
  absl::StatusOr<std::vector<Baseline>> baselines = ParseBaselines(o.baselines);
  if (!baselines.ok()) return baselines.status();
  absl::StatusOr<MixTokens> verify = ReadMixTokens(o.verify, "", o.threads, *model, path);
  if (!verify.ok()) return verify.status();
  result.verify_tokens = verify->description;
  absl::StatusOr<MixTokens> tune = ReadMixTokens(o.tune, "tune_", o.threads, *model, path);
  if (!tune.ok()) return tune.status();
  if (absl::Status s = SetCalibration(result, o.calibration, o.threads, *model, path); !s.ok()) {
    return s;
  }

  const MixRun run{.threads = o.threads, .progress = o.progress};
  if (shard.has_value()) {
    const std::function<bool(int64_t)> takes = [&](int64_t k) { return shard->Takes(k); };
    if (absl::Status s = MeasureSensitivity(*model, *tune, run, result, takes); !s.ok()) return s;
    if (absl::Status s = WriteMixShard(result, *tune, *shard, o.table_out); !s.ok()) return s;
    result.shard = o.shard;
    result.table_written = o.table_out;
    return result;
  }
  if (!o.tables.empty()) {
    if (absl::Status s = ReadMixShards(o.tables, *tune, result); !s.ok()) return s;
  } else if (absl::Status s = MeasureSensitivity(*model, *tune, run, result); !s.ok()) {
    return s;
  }
  absl::StatusOr<Allocation> chosen = result.Allocate(result.budget_bytes);
  if (!chosen.ok()) return OptionError(b->field, chosen.status().message());
  result.allocation = *chosen;
  absl::StatusOr<Verification> verified = VerifyMixes(
      *model, result, *chosen, {*baselines, o.random_mixes, o.seed}, *verify, run);
  if (!verified.ok()) return verified.status();
  result.rows = std::move(verified->rows);
  result.verify_positions = verified->positions;
  result.reference_perplexity = verified->reference_perplexity;
  result.spearman = verified->spearman;
  result.median_relative_error = verified->median_relative_error;

  result.rules = MixRules(result.groups, result.rows[0].schemes);
  absl::StatusOr<LlamaQuantizeCommand> command =
      LlamaQuantizeArguments(result.groups, result.rows[0].schemes);
  if (!command.ok()) {
    result.llama_quantize_error = std::string(command.status().message());
  } else {
    result.llama_quantize = *std::move(command);
    if (!result.imatrix.empty()) {
      // The same importance in llama-quantize (it reads both formats).
      result.llama_quantize.options.insert(result.llama_quantize.options.begin(),
                                           {"--imatrix", result.imatrix});
    }
  }
  if (!o.out.empty()) {
    QuantizeModelOptions q;
    q.model = path;
    q.weights = absl::StrJoin(result.rules, ",");
    q.output = o.out;
    q.tokenizer = o.verify.tokenizer;
    q.imatrix = o.imatrix;
    q.calibration = o.calibration;
    q.summary = true;
    q.threads = o.threads;
    absl::StatusOr<QuantErrorResult> written = QuantizeModel(q);
    if (!written.ok()) return written.status();
    result.written = o.out;
  }
  return result;
}

nlohmann::json ToJson(const MixResult& r) {
  nlohmann::ordered_json j;
  j["model"] = r.model;
  if (!r.shard.empty()) {
    j["shard"] = r.shard;
    j["table_out"] = r.table_written;
    j["types"] = r.types;
    j["groups"] = r.groups.size();
    j["sensitivity_method"] = MixSensitivityName(r.method);
    if (!r.Probe().empty()) j["probe"] = r.Probe();
    j["tokens"] = {{"tune", r.tune_tokens}, {"tune_positions", r.tune_positions}};
    j["candidates_measured"] = r.candidates_measured;
    return j;
  }
  j["weights"] = r.weights;
  j["budget_bytes"] = r.budget_bytes;
  if (r.device) {
    const DeviceBudget& d = *r.device;
    j["device"] = {{"name", d.device.name},
                   {"memory_bytes", d.device.memory_bytes},
                   {"capacity_bytes", d.capacity_bytes},
                   {"seq", d.sizing.seq},
                   {"batch", d.sizing.batch},
                   {"kv", d.sizing.kv},
                   {"kv_cache_bytes", d.kv_cache_bytes},
                   {"other_bytes", d.other_bytes},
                   {"matrices_bytes", d.matrices_bytes}};
  }
  const MixRow& mix = r.rows.front();
  nlohmann::ordered_json rules = nlohmann::ordered_json::array();
  for (size_t g = 0; g < r.groups.size(); ++g) {
    rules.push_back({{"pattern", r.groups[g].pattern()}, {"scheme", mix.schemes[g]}});
  }
  j["rules"] = rules;
  j["weights_option"] = absl::StrJoin(r.rules, ",");
  if (!r.written.empty()) j["written"] = r.written;
  if (r.llama_quantize_error.empty()) {
    if (!r.imatrix.empty()) j["imatrix"] = r.imatrix;
    j["llama_quantize"] = {{"options", r.llama_quantize.options},
                           {"type", r.llama_quantize.type},
                           {"command", r.llama_quantize.Line("MODEL-F32.gguf", "OUT.gguf")}};
  } else {
    j["llama_quantize"] = {{"error", r.llama_quantize_error}};
  }
  j["bits_per_weight"] = JsonNumber(mix.bits_per_weight);
  j["bytes"] = mix.bytes;
  j["predicted"] = {{"kl_mean", JsonNumber(mix.predicted_kl)}};
  j["measured"] = {{"kl_mean", JsonNumber(mix.kl_mean)},
                   {"top1_agreement", JsonNumber(mix.top1_agreement)},
                   {"perplexity", JsonNumber(mix.perplexity)}};
  j["allocation"] = {{"exact", r.allocation.exact},
                     {"lower_bound", JsonNumber(r.allocation.lower_bound)},
                     {"nodes", r.allocation.nodes}};
  nlohmann::ordered_json rows = nlohmann::ordered_json::array();
  nlohmann::ordered_json baselines = nlohmann::ordered_json::array();
  for (const MixRow& row : r.rows) {
    nlohmann::ordered_json x;
    x["kind"] = row.kind;
    x["recipe"] = row.label;
    x["bits_per_weight"] = JsonNumber(row.bits_per_weight);
    x["bytes"] = row.bytes;
    x["predicted_kl_mean"] = JsonNumber(row.predicted_kl);
    x["kl_mean"] = JsonNumber(row.kl_mean);
    x["top1_agreement"] = JsonNumber(row.top1_agreement);
    x["perplexity"] = JsonNumber(row.perplexity);
    double kld_99 = NAN;
    for (const auto& [fraction, value] : row.llama_cpp.kld_percentiles) {
      if (fraction == 0.99) kld_99 = value;
    }
    x["kld_99"] = JsonNumber(kld_99);
    x["ppl_ratio"] = JsonNumber(row.llama_cpp.ppl_ratio.value);
    if (row.kind == "recipe") baselines.push_back(x);
    if (row.kind != "recipe") x["schemes"] = row.schemes;
    rows.push_back(std::move(x));
  }
  j["baselines"] = baselines;
  j["rows"] = rows;
  j["prediction"] = {{"random_mixes", std::count_if(r.rows.begin(), r.rows.end(),
                                                     [](const MixRow& x) {
                                                       return x.kind == "random";
                                                     })},
                     {"spearman", JsonNumber(r.spearman)},
                     {"median_relative_error", JsonNumber(r.median_relative_error)}};
  const bool predicted = r.method == MixSensitivity::kPredicted;
  nlohmann::ordered_json sens = nlohmann::ordered_json::array();
  for (size_t g = 0; g < r.groups.size(); ++g) {
    nlohmann::ordered_json kl, bytes, error, measured = nlohmann::ordered_json::array();
    for (size_t t = 0; t < r.types.size(); ++t) {
      kl[r.types[t]] = JsonNumber(r.sensitivity[g][t]);
      bytes[r.types[t]] = r.bytes[g][t];
      if (predicted) error[r.types[t]] = JsonNumber(r.weight_error[g][t]);
      if (r.measured[g][t]) measured.push_back(r.types[t]);
    }
    nlohmann::ordered_json x = {{"tensor", r.groups[g].name},
                                {"llama_cpp", r.groups[g].llama_cpp},
                                {"weights", r.groups[g].weights()},
                                {"kl_mean", kl},
                                {"bytes", bytes}};
    if (predicted) {
      x["kl_measured"] = measured;  // the others predicted
      x["weight_error"] = error;
    }
    sens.push_back(std::move(x));
  }
  j["types"] = r.types;
  j["sensitivity_method"] = MixSensitivityName(r.method);
  if (!r.Probe().empty()) j["probe"] = r.Probe();
  j["sensitivity"] = sens;
  j["tokens"] = {{"tune", r.tune_tokens},
                 {"tune_positions", r.tune_positions},
                 {"verify", r.verify_tokens},
                 {"verify_positions", r.verify_positions},
                 {"reference_perplexity", JsonNumber(r.reference_perplexity)}};
  j["candidates_measured"] = r.candidates_measured;
  return j;
}

}  // namespace lowp::api
