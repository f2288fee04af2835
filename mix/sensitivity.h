// `lowp mix`'s measurements: candidates evaluated end to end on the
// streamed evaluator in rounds, and the sensitivity sweep (every matrix of
// the table alone in every type, all other weights float32, each candidate
// starting from the reference's hidden state at its layer): the mean KL the
// matrix costs under that type.
#ifndef LOWP_MIX_SENSITIVITY_H_
#define LOWP_MIX_SENSITIVITY_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "eval/evaluate.h"
#include "mix/table.h"
#include "model/checkpoint.h"

namespace lowp {

// Token sequences to measure on: [sequences, length] and the positions
// scored (EvalRun::scored_from), with where they came from.
struct MixTokens {
  std::vector<int32_t> ids;
  int64_t length = 0;
  int64_t scored_from = -1;
  std::string description;
};

struct MixRun {
  int threads = 0;
  // (steps done, steps in all, what), over every round of a stage.
  std::function<void(int64_t, int64_t, const std::string&)> progress;
};

// `candidates` (each quantizing with `importance`) on `tokens`, kRound at a
// time (their hidden states stay within the evaluator's activation memory),
// sharing the reference's prefix; progress names `stage`. `last` gets the
// last round's report without its candidates (positions, perplexity).
absl::StatusOr<std::vector<CandidateResult>> EvaluateInRounds(
    const Checkpoint& model, const MixTokens& tokens, const std::vector<EvalCandidate>& candidates,
    std::shared_ptr<const ImportanceMap> importance, const MixRun& run, const std::string& stage,
    EvalReport* last);
constexpr size_t kMixRound = 64;

// Fills the table's sensitivity on the tuning tokens: of the candidates
// `takes` (candidate g * types + t: group g in type t) when given, the
// others NaN (a shard of the sweep, mix/table_file.h).
absl::Status MeasureSensitivity(const Checkpoint& model, const MixTokens& tune, const MixRun& run,
                                MixTable& table,
                                const std::function<bool(int64_t candidate)>& takes = {});

}  // namespace lowp

#endif  // LOWP_MIX_SENSITIVITY_H_
