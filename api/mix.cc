#include "api/mix.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "api/json.h"
#include "api/quant.h"
#include "formats/option_error.h"
#include "io/bundled.h"
#include "quant/recipe.h"
#include "sizing/devices.h"

namespace lowp::api {
namespace {

// Candidates per pass over the checkpoint: their hidden states stay within
// the evaluator's activation memory on large models too.
constexpr size_t kRound = 64;
constexpr int kMaxRandomMixes = 1000;

struct Tokens {
  TokenArray array;
  EvalRun run;  // scored_from
  std::string description;
};

// The tokens of `given` (the tune or verify set, whose options the errors
// name with `prefix`: "tune_" or "").
absl::StatusOr<Tokens> ReadInput(const EvalOptions& given, absl::string_view prefix,
                                 const MixOptions& o, const Checkpoint& model,
                                 const std::string& path) {
  EvalOptions e = given;
  e.threads = o.threads;
  EvalResult described;
  Tokens t;
  absl::StatusOr<TokenArray> array = EvalTokens(e, model, path, described, t.run);
  if (!array.ok()) return PrefixOption(array.status(), prefix);
  t.array = *std::move(array);
  t.description = described.tokens;
  return t;
}

// Evaluate in rounds of kRound candidates, progress over them all.
absl::StatusOr<std::vector<CandidateResult>> EvaluateAll(const Checkpoint& model,
                                                         const Tokens& tokens,
                                                         const std::vector<EvalCandidate>& all,
                                                         const MixOptions& o,
                                                         const std::string& stage,
                                                         EvalReport* last,
                                                         std::shared_ptr<const ImportanceMap>
                                                             importance) {
  std::vector<CandidateResult> out;
  const size_t rounds = (all.size() + kRound - 1) / kRound;
  for (size_t r = 0; r < rounds; ++r) {
    std::vector<EvalCandidate> round(
        all.begin() + static_cast<ptrdiff_t>(r * kRound),
        all.begin() + static_cast<ptrdiff_t>(std::min(all.size(), (r + 1) * kRound)));
    for (EvalCandidate& c : round) c.importance = importance;
    EvalRun run = tokens.run;
    run.threads = o.threads;
    run.share_prefix = true;
    if (o.progress) {
      run.progress = [&](int64_t done, int64_t total, const std::string& what) {
        o.progress(done, total,
                   absl::StrCat(stage, rounds > 1 ? absl::StrCat(" ", r + 1, "/", rounds) : "",
                                ": ", what));
      };
    }
    absl::StatusOr<EvalReport> report =
        Evaluate(model, tokens.array.ids, tokens.array.length, round, run);
    if (!report.ok()) return report.status();
    for (CandidateResult& c : report->candidates) out.push_back(std::move(c));
    report->candidates.clear();
    if (last != nullptr) *last = *std::move(report);
  }
  return out;
}

MixRow Row(const std::string& kind, const std::string& label) {
  MixRow row;
  row.kind = kind;
  row.label = label;
  return row;
}

// Average ranks, 1-based.
std::vector<double> Ranks(const std::vector<double>& x) {
  std::vector<size_t> order(x.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return x[a] < x[b]; });
  std::vector<double> rank(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) rank[order[k]] = (static_cast<double>(i + j) / 2) + 1;
    i = j + 1;
  }
  return rank;
}

}  // namespace

const std::vector<std::string>& DefaultMixTypes() {
  static const auto* types = new std::vector<std::string>{"q2_K", "q3_K", "q4_K", "q5_K",
                                                          "q6_K", "q8_0", "iq4_xs", "fp16"};
  return *types;
}

const std::vector<std::string>& DefaultMixBaselines() {
  static const auto* recipes = new std::vector<std::string>{
      "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "Q8_0"};
  return *recipes;
}

double SpearmanCorrelation(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size() || a.size() < 3) return NAN;
  const std::vector<double> ra = Ranks(a), rb = Ranks(b);
  const double n = static_cast<double>(a.size()), mean = (n + 1) / 2;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (ra[i] - mean) * (rb[i] - mean);
    saa += (ra[i] - mean) * (ra[i] - mean);
    sbb += (rb[i] - mean) * (rb[i] - mean);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : NAN;
}

uint64_t MixTable::SmallestBytes() const {
  uint64_t smallest = 0;
  for (const std::vector<uint64_t>& b : bytes) smallest += *std::min_element(b.begin(), b.end());
  return smallest;
}

absl::StatusOr<Allocation> MixTable::Allocate(uint64_t budget) const {
  std::vector<std::vector<MixOption>> options(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t t = 0; t < types.size(); ++t) options[g].push_back({bytes[g][t], sensitivity[g][t]});
  }
  return lowp::Allocate(options, budget);
}

MixAssignment MixTable::Assignment(const Allocation& a) const {
  MixAssignment out(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) out[g] = types[static_cast<size_t>(a.choice[g])];
  return out;
}

uint64_t MixTable::Bytes(const Allocation& a) const {
  uint64_t b = 0;
  for (size_t g = 0; g < groups.size(); ++g) b += bytes[g][static_cast<size_t>(a.choice[g])];
  return b;
}

double MixTable::Predict(const MixAssignment& a) const {
  double kl = 0;
  for (size_t g = 0; g < groups.size(); ++g) {
    auto it = std::find(types.begin(), types.end(), a[g]);
    if (it == types.end()) return NAN;
    kl += sensitivity[g][static_cast<size_t>(it - types.begin())];
  }
  return kl;
}

EvalCandidate MixTable::Candidate(const std::string& label, const MixAssignment& a) const {
  std::vector<WeightRule> rules;
  for (size_t g = 0; g < groups.size(); ++g) {
    const size_t t = static_cast<size_t>(std::find(types.begin(), types.end(), a[g]) -
                                         types.begin());
    rules.push_back({groups[g].name, schemes[t]});
  }
  return RulesCandidate(label, std::move(rules));
}

absl::StatusOr<MixTable> MixTypes(const MixOptions& o, const Checkpoint& model,
                                  const std::string& path) {
  MixTable table;
  table.model = path;
  absl::StatusOr<std::shared_ptr<const ImportanceMap>> importance = OpenImportance(o.imatrix);
  if (!importance.ok()) return importance.status();
  table.imatrix = o.imatrix;
  table.importance = *importance;
  table.groups = MixGroups(model);
  const size_t G = table.groups.size();
  for (const MixGroup& g : table.groups) table.weights += static_cast<uint64_t>(g.weights());
  // The types, each applying to every matrix's rows.
  const bool defaults = o.types.empty();
  table.bytes.resize(G);
  for (const std::string& name : defaults ? DefaultMixTypes() : o.types) {
    absl::StatusOr<std::unique_ptr<Scheme>> s = ParseScheme(name);
    if (!s.ok()) return OptionError("types", absl::StrCat(name, ": ", s.status().message()));
    if (AsRecipe(**s) != nullptr) {
      return OptionError("types", absl::StrCat(name, " is a recipe (a whole mix), not a type"));
    }
    std::vector<uint64_t> bytes;
    absl::Status applies;
    if (table.importance == nullptr && (*s)->NeedsImportance(256)) {
      applies = absl::InvalidArgumentError(
          absl::StrCat(name, " needs an importance matrix (imatrix)"));
    }
    for (const MixGroup& g : table.groups) {
      if (!applies.ok()) break;
      absl::StatusOr<uint64_t> b = GroupBytes(**s, g);
      if (!b.ok()) {
        applies = b.status();
        break;
      }
      bytes.push_back(*b);
    }
    if (!applies.ok()) {
      if (defaults) continue;
      return OptionError("types", applies.message());
    }
    table.types.push_back((*s)->name());
    table.schemes.push_back(std::shared_ptr<const Scheme>(*std::move(s)));
    for (size_t g = 0; g < G; ++g) table.bytes[g].push_back(bytes[g]);
  }
  if (table.schemes.empty()) return OptionError("types", "no type applies to every matrix");
  // Every matrix is measured in every type: the imatrix must weigh one.
  const std::vector<TensorView> matrices = model.MatrixShapes();
  std::vector<QuantizedTensor> quantized;
  for (const TensorView& m : matrices) {
    for (const std::shared_ptr<const Scheme>& scheme : table.schemes) {
      quantized.push_back({&m, scheme.get()});
    }
  }
  if (absl::Status s = CheckImportanceUsed(table.importance.get(), quantized); !s.ok()) return s;
  return table;
}

absl::Status MeasureSensitivity(const MixOptions& o, const Checkpoint& model, MixTable& table) {
  absl::StatusOr<Tokens> tune = ReadInput(o.tune, "tune_", o, model, table.model);
  if (!tune.ok()) return tune.status();
  table.tune_tokens = tune->description;
  const size_t G = table.groups.size(), T = table.types.size();
  std::vector<EvalCandidate> singles;
  for (size_t g = 0; g < G; ++g) {
    for (size_t t = 0; t < T; ++t) {
      singles.push_back(RulesCandidate(absl::StrCat(table.groups[g].name, "=", table.types[t]),
                                       {{table.groups[g].name, table.schemes[t]}}));
    }
  }
  EvalReport report;
  absl::StatusOr<std::vector<CandidateResult>> measured =
      EvaluateAll(model, *tune, singles, o, "sensitivity", &report, table.importance);
  if (!measured.ok()) return measured.status();
  table.tune_positions = report.positions;
  table.sensitivity.assign(G, std::vector<double>(T));
  for (size_t g = 0; g < G; ++g) {
    for (size_t t = 0; t < T; ++t) table.sensitivity[g][t] = (*measured)[g * T + t].kl.mean;
  }
  table.candidates_measured = static_cast<int64_t>(singles.size());
  return absl::OkStatus();
}

absl::StatusOr<MixResult> Mix(const MixOptions& o) {
  if (absl::Status s = CheckThreads(o.threads); !s.ok()) return s;
  if ((o.bits_per_weight > 0) + (o.bytes > 0) + !o.device.empty() != 1) {
    return OptionError("bits_per_weight",
                       "give the budget as bits per weight, as bytes or as a device (one)");
  }
  if (o.bits_per_weight < 0 || !std::isfinite(o.bits_per_weight)) {
    return OptionError("bits_per_weight", absl::StrCat(o.bits_per_weight, " is not a budget"));
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
  absl::StatusOr<MixTable> table = MixTypes(o, *model, path);
  if (!table.ok()) return table.status();
  MixResult result;
  static_cast<MixTable&>(result) = *std::move(table);
  const size_t G = result.groups.size(), T = result.types.size();

  // The budget.
  const char* field = o.bytes > 0 ? "bytes" : !o.device.empty() ? "device" : "bits_per_weight";
  const double weights = static_cast<double>(result.weights);
  if (o.bits_per_weight > 32 || o.bytes > 4 * result.weights) {
    return OptionError(field, absl::StrCat("is above float32 (",
                                           4 * result.weights, " bytes for these ",
                                           result.weights, " weights)"));
  }
  if (!o.device.empty()) {
    absl::StatusOr<Device> device = FindDevice(o.device);
    if (!device.ok()) return OptionError("device", device.status().message());
    absl::StatusOr<DeviceBudget> budget =
        BudgetOnDevice(model->config(), result.weights, *device, o.job);
    if (!budget.ok()) return budget.status();
    result.device = *budget;
    result.budget_bytes = budget->budget_bytes;
  } else {
    result.budget_bytes = o.bytes > 0 ? o.bytes
                                      : static_cast<uint64_t>(std::floor(o.bits_per_weight *
                                                                         weights / 8));
  }
  const uint64_t smallest = result.SmallestBytes();
  if (result.budget_bytes < smallest) {
    const std::string beside =
        result.device
            ? absl::StrCat(result.device->device.name,
                           result.device->matrices_bytes > 0
                               ? absl::StrCat(" leaves ", result.device->matrices_bytes, " bytes")
                               : std::string(" has no room"),
                           " beside the job's ", result.device->other_bytes, " (KV cache ",
                           result.device->kv_cache_bytes, "): ")
            : "";
    return OptionError(field, absl::StrCat(beside, result.budget_bytes, " bytes (",
                                           8 * static_cast<double>(result.budget_bytes) / weights,
                                           " bits per weight) is below the smallest mix of these "
                                           "types, ", smallest, " bytes (",
                                           8 * static_cast<double>(smallest) / weights, ")"));
  }
  std::vector<std::string> baselines = o.baselines.empty() ? DefaultMixBaselines() : o.baselines;
  if (baselines.size() == 1 && baselines[0] == "none") baselines.clear();
  std::vector<std::shared_ptr<const Scheme>> recipes;
  for (const std::string& name : baselines) {
    absl::StatusOr<std::unique_ptr<Scheme>> s = ParseScheme(name);
    if (!s.ok() || AsRecipe(**s) == nullptr) {
      return OptionError("baselines", absl::StrCat(name, " is not one of llama.cpp's recipes (",
                                                   absl::StrJoin(RecipeNames(), " "), ")"));
    }
    recipes.push_back(std::shared_ptr<const Scheme>(*std::move(s)));
  }
  absl::StatusOr<Tokens> verify = ReadInput(o.verify, "", o, *model, path);
  if (!verify.ok()) return verify.status();
  result.verify_tokens = verify->description;

  // Sensitivity: each matrix alone in each type.
  if (absl::Status s = MeasureSensitivity(o, *model, result); !s.ok()) return s;

  // The allocation, and the rows to verify.
  absl::StatusOr<Allocation> chosen = result.Allocate(result.budget_bytes);
  if (!chosen.ok()) return OptionError(field, chosen.status().message());
  result.allocation = *chosen;
  std::vector<EvalCandidate> candidates;
  auto add_row = [&](MixRow row, EvalCandidate c) {
    row.bits_per_weight = 8 * static_cast<double>(row.bytes) / weights;
    result.rows.push_back(std::move(row));
    candidates.push_back(std::move(c));
  };
  auto allocated_row = [&](const std::string& kind, const std::string& label,
                           const Allocation& a) {
    MixRow row = Row(kind, label);
    row.schemes = result.Assignment(a);
    row.bytes = result.Bytes(a);
    row.predicted_kl = a.cost;
    EvalCandidate c = result.Candidate(row.label, row.schemes);
    add_row(std::move(row), std::move(c));
  };
  allocated_row("mix", "lowp mix", *chosen);
  const std::vector<TensorView> shapes = model->MatrixShapes();
  RecipeModel recipe_model = RecipeModel::Of(shapes);
  recipe_model.has_imatrix = result.importance != nullptr;
  for (size_t r = 0; r < recipes.size(); ++r) {
    MixRow row = Row("recipe", baselines[r]);
    for (const TensorView& m : shapes) {
      RecipeChoice choice;
      const Scheme& s = SchemeForTensor(*recipes[r], m, recipe_model, &choice);
      if (absl::Status st = CheckImatrixRequirement(*recipes[r], choice, m.name,
                                                    result.importance != nullptr);
          !st.ok()) {
        return OptionError("baselines", st.message());
      }
      row.schemes.push_back(s.name());
      row.bytes += (s.StorageBits(m.rows(), m.cols()) + 7) / 8;
    }
    row.predicted_kl = result.Predict(row.schemes);
    const uint64_t size = row.bytes;
    add_row(std::move(row), RulesCandidate(baselines[r], {{"", recipes[r]}}));
    if (size < smallest) continue;  // lowp's types cannot be that small
    absl::StatusOr<Allocation> at = result.Allocate(size);
    if (!at.ok()) return at.status();
    allocated_row("lowp", absl::StrCat("lowp @ ", baselines[r]), *at);
  }
  std::mt19937_64 random(o.seed);
  for (int i = 0; i < o.random_mixes; ++i) {
    MixRow row = Row("random", absl::StrCat("random ", i + 1));
    for (size_t g = 0; g < G; ++g) {
      const size_t t = static_cast<size_t>(random() % T);
      row.schemes.push_back(result.types[t]);
      row.bytes += result.bytes[g][t];
    }
    row.predicted_kl = result.Predict(row.schemes);
    EvalCandidate c = result.Candidate(row.label, row.schemes);
    add_row(std::move(row), std::move(c));
  }

  // Verification on tokens the mix was not tuned on.
  EvalReport verify_report;
  absl::StatusOr<std::vector<CandidateResult>> verified =
      EvaluateAll(*model, *verify, candidates, o, "verification", &verify_report,
                  result.importance);
  if (!verified.ok()) return verified.status();
  result.verify_positions = verify_report.positions;
  result.reference_perplexity = verify_report.reference_perplexity;
  std::vector<double> predicted, observed, relative;
  for (size_t i = 0; i < result.rows.size(); ++i) {
    MixRow& row = result.rows[i];
    const CandidateResult& c = (*verified)[i];
    row.kl_mean = c.kl.mean;
    row.top1_agreement = c.top1_agreement;
    row.perplexity = c.perplexity;
    row.llama_cpp = c.llama_cpp;
    if (row.kind == "random") {
      predicted.push_back(row.predicted_kl);
      observed.push_back(row.kl_mean);
      relative.push_back(std::abs(row.predicted_kl - row.kl_mean) / row.kl_mean);
    }
  }
  result.spearman = SpearmanCorrelation(predicted, observed);
  if (relative.size() >= 3) {
    std::sort(relative.begin(), relative.end());
    const size_t n = relative.size();
    result.median_relative_error =
        n % 2 == 1 ? relative[n / 2] : (relative[n / 2 - 1] + relative[n / 2]) / 2;
  }
  result.rules = MixRules(result.groups, result.rows[0].schemes);
  absl::StatusOr<LlamaQuantizeCommand> command =
      LlamaQuantizeArguments(result.groups, result.rows[0].schemes);
  if (command.ok()) {
    result.llama_quantize = *std::move(command);
    if (!result.imatrix.empty()) {
      // The same importance in llama-quantize (it reads both formats).
      result.llama_quantize.options.insert(result.llama_quantize.options.begin(),
                                           {"--imatrix", result.imatrix});
    }
  } else {
    result.llama_quantize_error = std::string(command.status().message());
  }
  return result;
}

nlohmann::json ToJson(const MixResult& r) {
  nlohmann::ordered_json j;
  j["model"] = r.model;
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
    rules.push_back({{"pattern", r.groups[g].name}, {"scheme", mix.schemes[g]}});
  }
  j["rules"] = rules;
  j["weights_option"] = absl::StrJoin(r.rules, ",");
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
  nlohmann::ordered_json sens = nlohmann::ordered_json::array();
  for (size_t g = 0; g < r.groups.size(); ++g) {
    nlohmann::ordered_json kl, bytes;
    for (size_t t = 0; t < r.types.size(); ++t) {
      kl[r.types[t]] = JsonNumber(r.sensitivity[g][t]);
      bytes[r.types[t]] = r.bytes[g][t];
    }
    sens.push_back({{"tensor", r.groups[g].name},
                    {"llama_cpp", r.groups[g].llama_cpp},
                    {"weights", r.groups[g].weights()},
                    {"kl_mean", kl},
                    {"bytes", bytes}});
  }
  j["types"] = r.types;
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
