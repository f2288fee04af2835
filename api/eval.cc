#include "api/eval.h"

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

absl::StatusOr<std::string> ModelPath(const std::string& model) {
  if (!model.empty()) return model;
  absl::StatusOr<std::string> bundled = BundledModel();
  if (!bundled.ok()) return OptionError("model", bundled.status().message());
  return bundled;
}

namespace {

constexpr int64_t kMaxSequences = int64_t{1} << 20;

absl::StatusOr<TokenArray> ReadTokens(const std::string& path) {
  absl::StatusOr<TensorSet> set = TensorSet::Open(path);
  if (!set.ok()) return OptionError("tokens", set.status().message());
  if (set->tensors().size() != 1) {
    return OptionError("tokens", absl::StrCat(path, ": holds ", set->tensors().size(),
                                              " tensors; want one array of token ids"));
  }
  const TensorView& t = set->tensors()[0];
  if (t.dtype != DType::kI32 && t.dtype != DType::kI64) {
    return OptionError("tokens", absl::StrCat(path, ": token ids are ", DTypeName(t.dtype),
                                              "; want int32 or int64"));
  }
  if (t.shape.empty() || t.shape.size() > 2 || t.elements() == 0) {
    return OptionError("tokens", absl::StrCat(path, ": shape [", absl::StrJoin(t.shape, ", "),
                                              "]; want [sequences, length] or [length]"));
  }
  TokenArray out;
  out.length = t.shape.back();
  out.ids.resize(static_cast<size_t>(t.elements()));
  for (size_t i = 0; i < out.ids.size(); ++i) {
    int64_t v = 0;
    if (t.dtype == DType::kI32) {
      int32_t x;
      std::memcpy(&x, t.bytes.data() + 4 * i, 4);
      v = x;
    } else {
      std::memcpy(&v, t.bytes.data() + 8 * i, 8);
    }
    if (v < 0 || v > INT32_MAX) {
      return OptionError("tokens",
                         absl::StrCat(path, ": token ", v, " at sequence ", i / out.length,
                                      ", position ", i % out.length, " is not a token id"));
    }
    out.ids[i] = static_cast<int32_t>(v);
  }
  if (absl::Status s = set->CheckIntact(); !s.ok()) return s;
  return out;
}

absl::StatusOr<std::pair<int64_t, int64_t>> ParseSample(const std::string& text) {
  std::pair<std::string, std::string> parts = absl::StrSplit(text, absl::MaxSplits(':', 1));
  int64_t n = 0, len = 0;
  if (!absl::SimpleAtoi(parts.first, &n) || !absl::SimpleAtoi(parts.second, &len) || n < 1 ||
      len < 2 || n > kMaxSequences || len > kMaxSequences) {
    return OptionError("sample",
                       absl::StrCat("'", text, "' is not N:LEN (N sequences of LEN tokens, ",
                                    "1 <= N, 2 <= LEN <= ", kMaxSequences, ")"));
  }
  return std::make_pair(n, len);
}

// Which options a token array's faults are the user's: the one that set
// the sequences' length and the one the ids came from.
struct TokenSource {
  std::string length = "tokens";  // "ctx" for a text, "sample" for sampled tokens
  std::string ids = "tokens";      // for a text: "tokenizer", or "model" for its own
  std::string ids_from;            // for a text: "the tokenizer FILE gives "
};

// Every id below the model's vocabulary and sequences no longer than its
// positions (eval/tokens.h): an option error on the option the tokens came
// from (Evaluate checks too, as a library contract; this gives the front
// ends the field).
absl::Status CheckEvalTokens(const TokenArray& tokens, const ModelConfig& config,
                         const TokenSource& source = {}) {
  const TokenFault fault = FindTokenFault(config, tokens.ids, tokens.length);
  switch (fault.kind) {
    case TokenFault::kNone:
      return absl::OkStatus();
    case TokenFault::kLength:
      return OptionError(source.length,
                         source.length == "tokens"
                             ? absl::StrCat(fault.message, "; give [sequences, length] with ",
                                            "shorter sequences")
                             : fault.message);
    case TokenFault::kId:
      if (source.ids_from.empty()) return OptionError(source.ids, fault.message);
      // "the tokenizer FILE gives token N at ..., which is not ..."
      return OptionError(source.ids,
                         absl::StrCat(source.ids_from,
                                      absl::StrReplaceAll(fault.message,
                                                          {{" is not a token id", ", which is not a token id"}})));
    case TokenFault::kShape:
      break;
  }
  return OptionError("tokens", fault.message);
}

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

// The text's chunks by llama.cpp's perplexity protocol (EvalOptions).
absl::StatusOr<TokenArray> TextChunks(const EvalOptions& o, const std::string& model,
                                      const ModelConfig& config, EvalResult& result,
                                      TokenSource& source) {
  if (!o.text_file.empty() && o.text.has_value()) {
    return OptionError("text", "give either a text file or a text");
  }
  if (o.ctx < 4) return OptionError("ctx", absl::StrCat(o.ctx, " is below 4"));
  if (absl::Status s = CheckSequenceLength(config, o.ctx); !s.ok()) {
    return OptionError("ctx", s.message());
  }
  if (o.chunks == 0 || o.chunks < -1) {
    return OptionError("chunks", absl::StrCat(o.chunks, " is not a count (-1: all)"));
  }
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = FindTokenizer(model, o.tokenizer);
  if (!tokenizer.ok()) return tokenizer.status();
  absl::StatusOr<std::string> read = ReadText(o.text, o.text_file);
  if (!read.ok()) return read.status();
  std::string text = *std::move(read);
  // llama.cpp's -f drops one trailing newline.
  if (!text.empty() && text.back() == '\n') text.pop_back();
  absl::StatusOr<std::vector<int32_t>> ids = (*tokenizer)->Tokenize(text);
  if (!ids.ok()) {
    return OptionError("text", absl::StrCat(o.text ? "the text" : o.text_file, ": ",
                                            ids.status().message()));
  }
  const TokenizerInfo& info = (*tokenizer)->info();
  result.tokenizer = info;
  source = {.length = "ctx",
            .ids = o.tokenizer.empty() ? "model" : "tokenizer",
            .ids_from = absl::StrCat("the tokenizer ", info.path, " gives ")};
  result.text_tokens = ids->size();
  result.tokens = absl::StrCat("text ", o.text ? "(given)" : o.text_file);
  int64_t n = static_cast<int64_t>(ids->size()) / o.ctx;
  if (n == 0) {
    return OptionError("text", absl::StrCat("gives ", ids->size(),
                                            " tokens, fewer than one chunk of --ctx ", o.ctx));
  }
  if (o.chunks > 0) n = std::min(n, o.chunks);
  TokenArray out;
  out.length = o.ctx;
  out.ids.assign(ids->begin(), ids->begin() + n * o.ctx);
  if (info.add_bos) {
    for (int64_t c = 0; c < n; ++c) out.ids[c * o.ctx] = info.bos;
  }
  return out;
}

absl::StatusOr<TokenArray> EvalTokens(const EvalOptions& o, const Checkpoint& model,
                                      const std::string& path, EvalResult& result, EvalRun& run) {
  TokenArray tokens;
  TokenSource source;
  if (!o.text_file.empty() || o.text.has_value()) {
    absl::StatusOr<TokenArray> chunks = TextChunks(o, path, model.config(), result, source);
    if (!chunks.ok()) return chunks.status();
    tokens = *std::move(chunks);
    run.scored_from = o.ctx / 2;
  } else if (!o.tokens_file.empty()) {
    absl::StatusOr<TokenArray> read = ReadTokens(o.tokens_file);
    if (!read.ok()) return read.status();
    tokens = *std::move(read);
    result.tokens = o.tokens_file;
  } else if (!o.token_array.ids.empty()) {
    tokens = o.token_array;
    result.tokens = "array";
  } else {
    absl::StatusOr<std::pair<int64_t, int64_t>> sample = ParseSample(o.sample);
    if (!sample.ok()) return sample.status();
    SampleOptions s;
    s.count = sample->first;
    s.length = sample->second;
    s.seed = o.seed;
    s.threads = o.threads;
    absl::StatusOr<std::vector<int32_t>> ids = SampleTokens(model, s);
    if (!ids.ok()) {
      if (OptionOf(ids.status()) == "length") {
        // "length: why": the option is --sample's LEN here.
        return OptionError("sample", ids.status().message().substr(sizeof("length: ") - 1));
      }
      return ids.status();
    }
    tokens.ids = *std::move(ids);
    tokens.length = s.length;
    result.tokens = absl::StrCat("sampled ", o.sample, " seed ", o.seed);
    source.length = "sample";
  }
  if (tokens.length < 2) {
    return OptionError(source.length, "sequences need at least 2 tokens (one prediction)");
  }
  if (absl::Status s = CheckEvalTokens(tokens, model.config(), source); !s.ok()) return s;
  return tokens;
}

absl::StatusOr<EvalResult> Eval(const EvalOptions& o) {
  if (absl::Status s = CheckThreads(o.threads); !s.ok()) return s;
  if (o.batch_tokens < 0) {
    return OptionError("batch_tokens", absl::StrCat(o.batch_tokens, " is negative"));
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
  EvalResult result;
  result.model = *path;
  result.config = model->config();
  result.imatrix = o.imatrix;
  EvalRun run;
  absl::StatusOr<TokenArray> tokens = EvalTokens(o, *model, *path, result, run);
  if (!tokens.ok()) return tokens.status();
  run.threads = o.threads;
  run.batch_tokens = o.batch_tokens;
  run.progress = o.progress;
  absl::StatusOr<EvalReport> report = Evaluate(*model, tokens->ids, tokens->length, *candidates, run);
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
  if (absl::Status s = CheckEvalTokens(tokens, w->config()); !s.ok()) return s;
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
