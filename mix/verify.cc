#include "mix/verify.h"

#include <algorithm>
#include <numeric>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "formats/option_error.h"
#include "mix/budget.h"
#include "quant/recipe.h"

namespace lowp {
namespace {

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

const std::vector<std::string>& DefaultMixBaselines() {
  static const auto* recipes = new std::vector<std::string>{
      "Q2_K", "Q3_K_S", "Q3_K_M", "Q3_K_L", "Q4_K_S", "Q4_K_M", "Q5_K_S", "Q5_K_M", "Q6_K", "Q8_0"};
  return *recipes;
}

absl::StatusOr<std::vector<Baseline>> ParseBaselines(const std::vector<std::string>& given) {
  std::vector<std::string> names = given.empty() ? DefaultMixBaselines() : given;
  if (names.size() == 1 && names[0] == "none") names.clear();
  std::vector<Baseline> out;
  for (const std::string& name : names) {
    absl::StatusOr<std::unique_ptr<Scheme>> s = ParseScheme(name);
    if (!s.ok() || AsRecipe(**s) == nullptr) {
      return OptionError("baselines", absl::StrCat(name, " is not one of llama.cpp's recipes (",
                                                   absl::StrJoin(RecipeNames(), " "), ")"));
    }
    out.push_back({name, std::shared_ptr<const Scheme>(*std::move(s))});
  }
  return out;
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

absl::StatusOr<Verification> VerifyMixes(const Checkpoint& model, const MixTable& table,
                                         const Allocation& chosen, const VerifyOptions& options,
                                         const MixTokens& tokens, const MixRun& run) {
  Verification v;
  std::vector<EvalCandidate> candidates;
  auto add_row = [&](MixRow row, EvalCandidate c) {
    row.bits_per_weight = BitsPerWeight(row.bytes, table.weights);
    v.rows.push_back(std::move(row));
    candidates.push_back(std::move(c));
  };
  auto allocated_row = [&](const std::string& kind, const std::string& label,
                           const Allocation& a) {
    MixRow row = Row(kind, label);
    row.schemes = table.Assignment(a);
    row.bytes = table.Bytes(a);
    row.predicted_kl = a.cost;
    EvalCandidate c = table.Candidate(row.label, row.schemes);
    add_row(std::move(row), std::move(c));
  };
  allocated_row("mix", "lowp mix", chosen);
  const std::vector<TensorView> shapes = model.MatrixShapes();
  RecipeModel recipe_model = RecipeModel::Of(shapes);
  recipe_model.has_imatrix = table.importance != nullptr;
  const uint64_t smallest = table.SmallestBytes();
  for (const Baseline& baseline : options.baselines) {
    MixRow row = Row("recipe", baseline.name);
    for (const TensorView& m : shapes) {
      RecipeChoice choice;
      const Scheme& s = SchemeForTensor(*baseline.recipe, m, recipe_model, &choice);
      if (absl::Status st = CheckImatrixRequirement(*baseline.recipe, choice, m.name,
                                                    table.importance != nullptr);
          !st.ok()) {
        return OptionError("baselines", st.message());
      }
      row.schemes.push_back(s.name());
      row.bytes += (s.StorageBits(m.rows(), m.cols()) + 7) / 8;
    }
    row.predicted_kl = table.Predict(row.schemes);
    const uint64_t size = row.bytes;
    add_row(std::move(row), RulesCandidate(baseline.name, {{"", baseline.recipe, {}}}));
    if (size < smallest) continue;  // lowp's types cannot be that small
    absl::StatusOr<Allocation> at = table.Allocate(size);
    if (!at.ok()) return at.status();
    allocated_row("lowp", absl::StrCat("lowp @ ", baseline.name), *at);
  }
  std::mt19937_64 random(options.seed);
  const size_t G = table.groups.size(), T = table.types.size();
  for (int i = 0; i < options.random_mixes; ++i) {
    MixRow row = Row("random", absl::StrCat("random ", i + 1));
    for (size_t g = 0; g < G; ++g) {
      const size_t t = static_cast<size_t>(random() % T);
      row.schemes.push_back(table.types[t]);
      row.bytes += table.bytes[g][t];
    }
    row.predicted_kl = table.Predict(row.schemes);
    EvalCandidate c = table.Candidate(row.label, row.schemes);
    add_row(std::move(row), std::move(c));
  }

  EvalReport report;
  absl::StatusOr<std::vector<CandidateResult>> verified =
      EvaluateInRounds(model, tokens, candidates, table.importance, run, "verification", &report);
  if (!verified.ok()) return verified.status();
  v.positions = report.positions;
  v.reference_perplexity = report.reference_perplexity;
  std::vector<double> predicted, observed, relative;
  for (size_t i = 0; i < v.rows.size(); ++i) {
    MixRow& row = v.rows[i];
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
  v.spearman = SpearmanCorrelation(predicted, observed);
  if (relative.size() >= 3) {
    std::sort(relative.begin(), relative.end());
    const size_t n = relative.size();
    v.median_relative_error =
        n % 2 == 1 ? relative[n / 2] : (relative[n / 2 - 1] + relative[n / 2]) / 2;
  }
  return v;
}

}  // namespace lowp
