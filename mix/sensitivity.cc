#include "mix/sensitivity.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

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

absl::Status MeasureSensitivity(const Checkpoint& model, const MixTokens& tune, const MixRun& run,
                                MixTable& table,
                                const std::function<bool(int64_t candidate)>& takes) {
  table.tune_tokens = tune.description;
  const size_t G = table.groups.size(), T = table.types.size();
  std::vector<EvalCandidate> singles;
  std::vector<size_t> which;  // each single's candidate number
  for (size_t g = 0; g < G; ++g) {
    for (size_t t = 0; t < T; ++t) {
      if (takes && !takes(static_cast<int64_t>(g * T + t))) continue;
      singles.push_back(table.Single(g, t));
      which.push_back(g * T + t);
    }
  }
  EvalReport report;
  absl::StatusOr<std::vector<CandidateResult>> measured =
      EvaluateInRounds(model, tune, singles, table.importance, run, "sensitivity", &report);
  if (!measured.ok()) return measured.status();
  table.tune_positions = report.positions;
  table.sensitivity.assign(G, std::vector<double>(T, NAN));
  for (size_t i = 0; i < which.size(); ++i) {
    table.sensitivity[which[i] / T][which[i] % T] = (*measured)[i].kl.mean;
  }
  table.candidates_measured = static_cast<int64_t>(singles.size());
  return absl::OkStatus();
}

}  // namespace lowp
