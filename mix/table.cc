#include "mix/table.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "formats/option_error.h"
#include "quant/recipe.h"

namespace lowp {

absl::StatusOr<MixSensitivity> ParseMixSensitivity(absl::string_view name) {
  if (name == "predicted") return MixSensitivity::kPredicted;
  if (name == "exact") return MixSensitivity::kExact;
  return OptionError("sensitivity", absl::StrCat("'", name, "' is not predicted or exact"));
}

const char* MixSensitivityName(MixSensitivity method) {
  return method == MixSensitivity::kExact ? "exact" : "predicted";
}

const std::vector<std::string>& DefaultMixTypes() {
  static const auto* types = new std::vector<std::string>{"q2_K", "q3_K", "q4_K", "q5_K",
                                                          "q6_K", "q8_0", "iq4_xs", "fp16"};
  return *types;
}

uint64_t MixTable::SmallestBytes() const {
  uint64_t smallest = 0;
  for (const std::vector<uint64_t>& b : bytes) smallest += *std::min_element(b.begin(), b.end());
  return smallest;
}

absl::StatusOr<Allocation> MixTable::Allocate(uint64_t budget) const {
  // A type whose cost is not finite (it turns a weight or a logit into inf
  // or NaN) is no option for that group.
  std::vector<std::vector<MixOption>> options(groups.size());
  std::vector<std::vector<int>> type_of(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    for (size_t t = 0; t < types.size(); ++t) {
      if (!std::isfinite(sensitivity[g][t])) continue;
      options[g].push_back({bytes[g][t], sensitivity[g][t]});
      type_of[g].push_back(static_cast<int>(t));
    }
    if (options[g].empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          groups[g].name, ": every type gives it a KL that is not finite (a weight or a logit "
                          "beyond the types' range)"));
    }
  }
  absl::StatusOr<Allocation> a = lowp::Allocate(options, budget);
  if (!a.ok()) return a;
  for (size_t g = 0; g < groups.size(); ++g) a->choice[g] = type_of[g][a->choice[g]];
  return a;
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
  bool calibrated = false;
  for (size_t g = 0; g < groups.size(); ++g) {
    const size_t t = static_cast<size_t>(std::find(types.begin(), types.end(), a[g]) -
                                         types.begin());
    rules.push_back({groups[g].pattern(), schemes[t], calibrations[t]});
    calibrated |= calibrations[t].active();
  }
  EvalCandidate c = RulesCandidate(label, std::move(rules));
  if (calibrated) c.calibration = calibration;
  return c;
}

EvalCandidate MixTable::Single(size_t g, size_t t) const {
  EvalCandidate c = RulesCandidate(absl::StrCat(groups[g].name, "=", types[t]),
                                   {{groups[g].pattern(), schemes[t], calibrations[t]}});
  if (calibrations[t].active()) c.calibration = calibration;
  return c;
}

int MixTable::ProbeType() const {
  std::vector<std::pair<uint64_t, int>> plain;  // (bytes of the model, type)
  for (size_t t = 0; t < types.size(); ++t) {
    if (calibrations[t].active()) continue;
    uint64_t b = 0;
    for (const std::vector<uint64_t>& g : bytes) b += g[t];
    plain.push_back({b, static_cast<int>(t)});
  }
  if (plain.empty()) return -1;
  std::stable_sort(plain.begin(), plain.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  return plain[(plain.size() - 1) / 2].second;
}

std::string MixTable::Probe() const {
  const int t = method == MixSensitivity::kPredicted ? ProbeType() : -1;
  return t < 0 ? "" : types[static_cast<size_t>(t)];
}

bool MixTable::Calibrates() const {
  return std::any_of(calibrations.begin(), calibrations.end(),
                     [](const Calibration& c) { return c.active(); });
}

absl::StatusOr<MixTable> MakeMixTable(const Checkpoint& model, const std::string& path,
                                      const std::vector<std::string>& types,
                                      std::shared_ptr<const ImportanceMap> importance,
                                      ExpertGroups experts) {
  MixTable table;
  table.model = path;
  table.importance = std::move(importance);
  table.groups = MixGroups(model, experts);
  const size_t G = table.groups.size();
  for (const MixGroup& g : table.groups) table.weights += static_cast<uint64_t>(g.weights());
  // The types, each applying to every matrix's rows.
  const bool defaults = types.empty();
  table.bytes.resize(G);
  for (const std::string& name : defaults ? DefaultMixTypes() : types) {
    absl::StatusOr<std::pair<std::string, Calibration>> split = SplitCalibration(name);
    if (!split.ok()) return OptionError("types", split.status().message());
    absl::StatusOr<std::unique_ptr<Scheme>> s = ParseScheme(split->first);
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
    table.types.push_back((*s)->name() + split->second.Suffix());
    if (std::count(table.types.begin(), table.types.end(), table.types.back()) > 1) {
      return OptionError("types", absl::StrCat(table.types.back(), " given twice"));
    }
    table.schemes.push_back(std::shared_ptr<const Scheme>(*std::move(s)));
    table.calibrations.push_back(split->second);
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

}  // namespace lowp
