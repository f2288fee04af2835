#include "mix/sensitivity.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "mix/weight_errors.h"
#include "model/weights.h"

namespace lowp {

absl::StatusOr<std::vector<CandidateResult>> EvaluateInRounds(
    const Checkpoint& model, const MixTokens& tokens, const std::vector<EvalCandidate>& all,
    std::shared_ptr<const ImportanceMap> importance, const MixRun& run, const std::string& stage,
    EvalReport* last) {
  std::vector<CandidateResult> out;
  const size_t rounds = (all.size() + kMixRound - 1) / kMixRound;
  for (size_t r = 0; r < rounds; ++r) {
    std::vector<EvalCandidate> round(
        all.begin() + static_cast<ptrdiff_t>(r * kMixRound),
        all.begin() + static_cast<ptrdiff_t>(std::min(all.size(), (r + 1) * kMixRound)));
    for (EvalCandidate& c : round) c.importance = importance;
    EvalRun e;
    e.scored_from = tokens.scored_from;
    e.threads = run.threads;
    e.share_prefix = true;
    if (run.progress) {
      e.progress = [&](int64_t done, int64_t total, const std::string& what) {
        run.progress(done, total,
                     absl::StrCat(stage, rounds > 1 ? absl::StrCat(" ", r + 1, "/", rounds) : "",
                                  ": ", what));
      };
    }
    absl::StatusOr<EvalReport> report = Evaluate(model, tokens.ids, tokens.length, round, e);
    if (!report.ok()) return report.status();
    for (CandidateResult& c : report->candidates) out.push_back(std::move(c));
    report->candidates.clear();
    if (last != nullptr) *last = *std::move(report);
  }
  return out;
}

namespace {

// The candidates (g, t) measured in rounds into table.sensitivity and
// table.measured.
absl::Status MeasureCells(const Checkpoint& model, const MixTokens& tune, const MixRun& run,
                          const std::vector<std::pair<size_t, size_t>>& cells, MixTable& table) {
  if (cells.empty()) return absl::OkStatus();
  std::vector<EvalCandidate> singles;
  for (const auto& [g, t] : cells) singles.push_back(table.Single(g, t));
  EvalReport report;
  absl::StatusOr<std::vector<CandidateResult>> measured =
      EvaluateInRounds(model, tune, singles, table.importance, run, "sensitivity", &report);
  if (!measured.ok()) return measured.status();
  table.tune_positions = report.positions;
  for (size_t i = 0; i < cells.size(); ++i) {
    table.sensitivity[cells[i].first][cells[i].second] = (*measured)[i].kl.mean;
    table.measured[cells[i].first][cells[i].second] = 1;
  }
  table.candidates_measured += static_cast<int64_t>(cells.size());
  return absl::OkStatus();
}

absl::Status Predict(const Checkpoint& model, const MixTokens& tune, const MixRun& run,
                     MixTable& table, const std::function<bool(int64_t)>& takes) {
  const size_t G = table.groups.size(), T = table.types.size();
  const int probe = table.ProbeType();
  std::vector<bool> plain(T);
  for (size_t t = 0; t < T; ++t) plain[t] = !table.calibrations[t].active();
  const std::function<bool(size_t)> taken = [&](size_t g) {
    return !takes || takes(static_cast<int64_t>(g));
  };
  absl::StatusOr<std::vector<std::vector<double>>> errors =
      MeasureWeightErrors(model, table, plain, taken, run);
  if (!errors.ok()) return errors.status();
  table.weight_error = *std::move(errors);
  // A probe that leaves no error (or overflows) predicts nothing, nor does
  // a router's (its error switches which experts a token takes, a step, not
  // a small perturbation): such a group is measured in every type.
  auto predictable = [&](size_t g) {
    const double e = probe < 0 ? NAN : table.weight_error[g][static_cast<size_t>(probe)];
    return e > 0 && std::isfinite(e) && !IsRouter(table.groups[g].name);
  };
  std::vector<std::pair<size_t, size_t>> cells;
  for (size_t g = 0; g < G; ++g) {
    if (!taken(g)) continue;
    for (size_t t = 0; t < T; ++t) {
      if (static_cast<int>(t) == probe || !plain[t] || !predictable(g)) cells.push_back({g, t});
    }
  }
  if (absl::Status s = MeasureCells(model, tune, run, cells, table); !s.ok()) return s;
  // A probe whose KL is not finite predicts nothing either.
  cells.clear();
  const size_t p = static_cast<size_t>(std::max(probe, 0));
  for (size_t g = 0; g < G; ++g) {
    if (!taken(g) || !predictable(g)) continue;
    if (std::isfinite(table.sensitivity[g][p])) continue;
    for (size_t t = 0; t < T; ++t) {
      if (!table.measured[g][t]) cells.push_back({g, t});
    }
  }
  if (absl::Status s = MeasureCells(model, tune, run, cells, table); !s.ok()) return s;
  for (size_t g = 0; g < G; ++g) {
    if (!taken(g)) continue;
    for (size_t t = 0; t < T; ++t) {
      if (table.measured[g][t]) continue;
      // A type that overflows a weight costs without bound, even where the
      // probe cost nothing (an expert no token takes: 0 * inf).
      const double e = table.weight_error[g][t];
      table.sensitivity[g][t] =
          std::isinf(e) ? INFINITY : table.sensitivity[g][p] * (e / table.weight_error[g][p]);
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MeasureSensitivity(const Checkpoint& model, const MixTokens& tune, const MixRun& run,
                                MixTable& table,
                                const std::function<bool(int64_t unit)>& takes) {
  table.tune_tokens = tune.description;
  const size_t G = table.groups.size(), T = table.types.size();
  table.sensitivity.assign(G, std::vector<double>(T, NAN));
  table.measured.assign(G, std::vector<uint8_t>(T, 0));
  table.weight_error.clear();
  table.candidates_measured = 0;
  if (table.method == MixSensitivity::kPredicted) return Predict(model, tune, run, table, takes);
  std::vector<std::pair<size_t, size_t>> cells;
  for (size_t g = 0; g < G; ++g) {
    for (size_t t = 0; t < T; ++t) {
      if (!takes || takes(static_cast<int64_t>(g * T + t))) cells.push_back({g, t});
    }
  }
  return MeasureCells(model, tune, run, cells, table);
}

}  // namespace lowp
