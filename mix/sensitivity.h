// `lowp mix`'s measurements: candidates evaluated end to end on the
// streamed evaluator in rounds, and the sensitivity table: the mean KL each
// group of the table costs in each type, all other weights float32, each
// candidate starting from the reference's hidden state at its layer.
//
//   exact      every group alone in every type, measured end to end
//              (groups x types forwards).
//   predicted  every group alone in one probe type (MixTable::ProbeType)
//              measured end to end, and each other type's KL predicted as
//              the probe's KL times the ratio of the two types' weight errors
//              on the group (mix/weight_errors.h): for a small perturbation
//              the KL is a quadratic form in it, so it scales with the error
//              energy the importance weights measure (HIGGS's linearity;
//              exllamav3's probes shaped like a type's error). One forward
//              per group and one quantization per group and type. Calibrated
//              types (":gptq"), whose weight error is not what they trade,
//              routers (a router's error switches which experts a token
//              takes: steps, not a quadratic), and groups whose probe leaves
//              no error or no finite KL, are measured end to end.
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

// Fills the table's sensitivity (and measured, weight_error) on the tuning
// tokens by table.method: of the units `takes` when given, the others NaN
// (a shard of the sweep, mix/table_file.h). A unit is a candidate for the
// exact method (g * types + t: group g in type t), a group for the
// predicted one.
absl::Status MeasureSensitivity(const Checkpoint& model, const MixTokens& tune, const MixRun& run,
                                MixTable& table,
                                const std::function<bool(int64_t unit)>& takes = {});

}  // namespace lowp

#endif  // LOWP_MIX_SENSITIVITY_H_
