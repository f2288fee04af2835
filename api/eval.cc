#include "api/eval.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "api/json.h"
#include "api/quant.h"
#include "api/tokenize.h"
#include "formats/format.h"
#include "formats/option_error.h"
#include "io/bundled.h"
#include "io/tensor_set.h"
#include "kernels/hadamard.h"
#include "kernels/thread_pool.h"
#include "model/checkpoint.h"
#include "eval/tokens.h"
#include "eval/variant.h"

namespace lowp::api {

namespace {

nlohmann::json DistributionJson(const Distribution& d) {
  return {{"mean", JsonNumber(d.mean)},     {"rms", JsonNumber(d.rms)}, {"min", JsonNumber(d.min)},
          {"p1", JsonNumber(d.p1)},         {"p5", JsonNumber(d.p5)},   {"p10", JsonNumber(d.p10)},
          {"median", JsonNumber(d.median)}, {"p90", JsonNumber(d.p90)}, {"p95", JsonNumber(d.p95)},
          {"p99", JsonNumber(d.p99)},       {"max", JsonNumber(d.max)}};
}

nlohmann::json CensusJson(const Census& census) {
  nlohmann::json out = nlohmann::json::object();
  for (int i = 0; i < kSiteCount; ++i) {
    const SiteCounts& s = census.sites[i];
    if (s.values == 0) continue;
    out[std::string(SiteName(static_cast<Site>(i)))] = {{"values", s.values},
                                                        {"overflow", s.overflow},
                                                        {"saturated", s.saturated},
                                                        {"flushed", s.flushed},
                                                        {"nonfinite", s.nonfinite}};
  }
  return out;
}

nlohmann::json NullableName(const std::string& s) {
  return s.empty() ? nlohmann::json(nullptr) : nlohmann::json(s);
}

}  // namespace

absl::StatusOr<std::vector<EvalCandidate>> EvalCandidates(const EvalOptions& o) {
  return MakeCandidates(
      {.weights = o.weights, .weights_files = o.weights_files, .activations = o.activations,
       .kv = o.kv, .compute = o.compute});
}

absl::StatusOr<EvalResult> Eval(const EvalOptions& o) {
  if (absl::Status s = CheckThreads(o.threads); !s.ok()) return s;
  if (o.batch_tokens < 0) {
    return OptionError("batch_tokens", absl::StrCat(o.batch_tokens, " is negative"));
  }
  EvalRun run;
  if (o.matrices == "whole") {
    run.reads = EvalRun::Reads::kWhole;
  } else if (o.matrices == "one-at-a-time") {
    run.reads = EvalRun::Reads::kOneAtATime;
  } else if (o.matrices != "auto") {
    return OptionError("matrices", absl::StrCat("'", o.matrices,
                                                "' is not auto, whole or one-at-a-time"));
  }
  absl::StatusOr<std::vector<EvalCandidate>> candidates = EvalCandidates(o);
  if (!candidates.ok()) return candidates.status();
  candidates->insert(candidates->end(), o.candidates.begin(), o.candidates.end());
  absl::StatusOr<std::shared_ptr<const ImportanceMap>> importance = OpenImportance(o.imatrix);
  if (!importance.ok()) return importance.status();
  for (EvalCandidate& c : *candidates) {
    if (!c.weight_rules.empty() && c.importance == nullptr) c.importance = *importance;
  }
  absl::StatusOr<std::string> path = ModelPath(o.model);
  if (!path.ok()) return path.status();
  absl::StatusOr<Checkpoint> model = Checkpoint::OpenModel(*path, o.tensors);
  if (!model.ok()) return model.status();
  if (*importance != nullptr) {
    // An imatrix only the rules' quantizers read: it must weigh one of them.
    std::vector<RuleMatch> matches;
    for (const EvalCandidate& c : *candidates) {
      if (c.importance != *importance) continue;
      std::vector<RuleMatch> m = MatricesByRule(*model, c.weight_rules, true);
      matches.insert(matches.end(), m.begin(), m.end());
    }
    std::vector<QuantizedTensor> quantized;
    for (const RuleMatch& m : matches) quantized.push_back({&m.matrix, m.scheme});
    if (absl::Status s = CheckImportanceUsed(importance->get(), quantized,
                                             "its weights weigh the quantizers of --weights "
                                             "schemes; a --weights-file is measured as stored");
        !s.ok()) {
      return s;
    }
  }
  const bool calibrates = std::any_of(candidates->begin(), candidates->end(),
                                     [](const EvalCandidate& c) { return Calibrates(c); });
  if (calibrates) {
    if (absl::Status s = CheckCalibrationOptions(o.calibration, model->config()); !s.ok()) {
      return s;
    }
  }
  EvalResult result;
  result.model = *path;
  result.config = model->config();
  result.imatrix = o.imatrix;
  absl::StatusOr<Tokens> tokens = ReadTokens(o, o.threads, *model, *path);
  if (!tokens.ok()) return tokens.status();
  if (absl::Status s = SetCalibration(*candidates, o.calibration, o.threads, *model, *path);
      !s.ok()) {
    return s;
  }
  for (const EvalCandidate& c : *candidates) {
    if (c.calibration != nullptr) {
      result.calibration = c.calibration->source;
      result.calibration_tokens = c.calibration->ids.size();
      break;
    }
  }
  result.tokens = tokens->description;
  result.tokenizer = tokens->tokenizer;
  result.text_tokens = tokens->text_tokens;
  run.scored_from = tokens->scored_from;
  run.threads = o.threads;
  run.batch_tokens = o.batch_tokens;
  run.progress = o.progress;
  absl::StatusOr<EvalReport> report =
      Evaluate(*model, tokens->array.ids, tokens->array.length, *candidates, run);
  if (!report.ok()) return report.status();
  result.report = *std::move(report);
  result.blas = BlasSetup();
  return result;
}

nlohmann::json EstimateJson(const Estimate& e) {
  return {{"value", JsonNumber(e.value)}, {"uncertainty", JsonNumber(e.uncertainty)}};
}

// Percentiles as {"99.9": v, ...}, maximum and minimum by name.
nlohmann::json PercentilesJson(const std::vector<std::pair<double, double>>& p) {
  nlohmann::ordered_json j;
  for (const auto& [f, v] : p) {
    const std::string key = f == 1   ? "maximum"
                            : f == 0 ? "minimum"
                            : f == .5 ? "median"
                                      : absl::StrFormat("%.1f", 100 * f);
    j[key] = JsonNumber(v);
  }
  return j;
}

nlohmann::json LlamaCppJson(const LlamaCppStats& s) {
  return {{"count", s.count},
          {"ppl_q", EstimateJson(s.ppl_q)},
          {"ppl_base", EstimateJson(s.ppl_base)},
          {"ln_ppl_correlation", JsonNumber(s.ln_ppl_correlation)},
          {"ln_ppl_ratio", EstimateJson(s.ln_ppl_ratio)},
          {"ppl_ratio", EstimateJson(s.ppl_ratio)},
          {"ppl_difference", EstimateJson(s.ppl_difference)},
          {"kld", EstimateJson(s.kld)},
          {"kld_percentiles", PercentilesJson(s.kld_percentiles)},
          {"delta_p", EstimateJson(s.delta_p)},
          {"rms_delta_p", EstimateJson(s.rms_delta_p)},
          {"delta_p_percentiles", PercentilesJson(s.delta_p_percentiles)},
          {"same_top", EstimateJson(s.same_top)}};
}

nlohmann::json ToJson(const EvalResult& r) {
  nlohmann::json j;
  j["model"] = r.model;
  j["model_config"] = ModelJson(r.config);
  j["tokens"] = r.tokens;
  if (!r.imatrix.empty()) j["imatrix"] = r.imatrix;
  if (!r.calibration.empty()) {
    j["calibration"] = {{"tokens", r.calibration}, {"count", r.calibration_tokens}};
  }
  const EvalReport& e = r.report;
  if (e.scored_from >= 0) {
    j["text"] = {{"tokenizer", ToJson(r.tokenizer)},
                 {"tokens", r.text_tokens},
                 {"ctx", e.sequence_length},
                 {"chunks", e.sequences},
                 {"scored_from", e.scored_from}};
  }
  j["blas"] = {{"core", r.blas.core}, {"chosen_by", r.blas.chosen_by}};
  j["sequences"] = e.sequences;
  j["sequence_length"] = e.sequence_length;
  j["positions"] = e.positions;
  j["batches"] = e.batches;
  j["predictions"] = e.predictions;
  j["reference"] = {{"cross_entropy", JsonNumber(e.reference_cross_entropy)},
                    {"perplexity", JsonNumber(e.reference_perplexity)},
                    {"nonfinite_values", e.reference_census.nonfinite()}};
  nlohmann::json list = nlohmann::json::array();
  for (const CandidateResult& c : e.candidates) {
    nlohmann::json x;
    x["label"] = c.candidate.label;
    x["weights"] = NullableName(c.candidate.weights);
    x["weights_file"] = !c.candidate.weights_file.empty();
    x["activations"] = NullableName(c.candidate.activations);
    x["kv"] = NullableName(c.candidate.kv);
    x["compute"] = NullableName(c.candidate.compute);
    if (c.weights.tensors.empty()) {
      x["weight_matrices"] = 0;
      x["weights_bits_per_weight"] = nullptr;
      x["weights_sqnr_db"] = nullptr;
    } else {
      x["weight_matrices"] = c.weights.tensors.size();
      x["weights_bits_per_weight"] = JsonNumber(c.weights.total.bits_per_weight());
      x["weights_sqnr_db"] = JsonNumber(c.weights.total.sqnr_db());
    }
    x["kl_mean"] = JsonNumber(c.kl.mean);
    x["kl_median"] = JsonNumber(c.kl.median);
    x["kl_p90"] = JsonNumber(c.kl.p90);
    x["kl_p99"] = JsonNumber(c.kl.p99);
    x["kl_max"] = JsonNumber(c.kl.max);
    x["top1_agreement"] = c.top1_agreement;
    x["delta_p"] = DistributionJson(c.delta_p);
    x["cross_entropy"] = JsonNumber(c.cross_entropy);
    x["perplexity"] = JsonNumber(c.perplexity);
    x["perplexity_ratio"] = JsonNumber(c.perplexity / e.reference_perplexity);
    x["nonfinite_positions"] = c.nonfinite_positions;
    x["llama_cpp"] = LlamaCppJson(c.llama_cpp);
    nlohmann::json layers = nlohmann::json::array();
    for (double v : c.layer_relative_rmse) layers.push_back(JsonNumber(v));
    x["layer_relative_rmse"] = layers;
    x["census"] = CensusJson(c.census);
    if (!c.routing.empty()) {
      nlohmann::json routing = nlohmann::json::array();
      for (const RoutingResult& r : c.routing) {
        routing.push_back({{"layer", r.layer},
                           {"tokens", r.tokens},
                           {"topk_set_agreement", JsonNumber(r.set_agreement)},
                           {"topk_order_agreement", JsonNumber(r.order_agreement)},
                           {"top1_changed", JsonNumber(r.top1_changed)},
                           {"max_load_change", JsonNumber(r.max_load_change)},
                           {"expert_load", r.load},
                           {"reference_expert_load", r.reference_load}});
      }
      x["routing"] = routing;
    }
    list.push_back(std::move(x));
  }
  j["candidates"] = list;
  j["perplexity"] = JsonNumber(e.reference_perplexity);
  return j;
}

absl::StatusOr<std::vector<float>> ForwardLogits(const std::string& model,
                                                 const std::vector<std::string>& tensors,
                                                 const TokenArray& tokens, int threads) {
  if (absl::Status s = CheckThreads(threads); !s.ok()) return s;
  absl::StatusOr<std::string> path = ModelPath(model);
  if (!path.ok()) return path.status();
  absl::StatusOr<Checkpoint> w = Checkpoint::OpenModel(*path, tensors);
  if (!w.ok()) return w.status();
  if (tokens.length < 1 || tokens.ids.empty() || tokens.ids.size() % tokens.length != 0) {
    return OptionError("tokens", "want a non-empty [sequences, length] array");
  }
  if (absl::Status s = CheckTokenArray(tokens, w->config()); !s.ok()) return s;
  EvalRun run;
  run.threads = threads;
  return ReferenceLogits(*w, tokens.ids, tokens.length, run);
}

absl::StatusOr<TokenArray> Sample(const std::string& model, const std::vector<std::string>& tensors,
                                  const SampleOptions& options) {
  if (absl::Status s = CheckThreads(options.threads); !s.ok()) return s;
  absl::StatusOr<std::string> path = ModelPath(model);
  if (!path.ok()) return path.status();
  absl::StatusOr<Checkpoint> w = Checkpoint::OpenModel(*path, tensors);
  if (!w.ok()) return w.status();
  absl::StatusOr<std::vector<int32_t>> ids = SampleTokens(*w, options);
  if (!ids.ok()) return ids.status();
  return TokenArray{*std::move(ids), options.length};
}

}  // namespace lowp::api
