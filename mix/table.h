// The table `lowp mix` allocates from: the matrices of a model (its groups),
// the types they may take, what each stores each in, and, once measured
// (mix/sensitivity.h), what each costs in each type. Any number of budgets
// can be allocated from one table (plan --mix allocates one per device).
#ifndef LOWP_MIX_TABLE_H_
#define LOWP_MIX_TABLE_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "eval/candidates.h"
#include "mix/allocate.h"
#include "mix/groups.h"
#include "model/checkpoint.h"
#include "quant/calibration.h"
#include "quant/importance.h"
#include "quant/scheme.h"

namespace lowp {

// How the table's KLs are found (mix/sensitivity.h): every group measured
// end to end in every type, or one probe per group measured and the other
// types predicted from their weight errors.
enum class MixSensitivity { kPredicted, kExact };
// "predicted", "exact"; InvalidArgument naming "sensitivity" otherwise.
absl::StatusOr<MixSensitivity> ParseMixSensitivity(absl::string_view name);
const char* MixSensitivityName(MixSensitivity method);

struct MixTable {
  std::string model;  // the snapshot directory
  std::vector<MixGroup> groups;
  std::vector<std::string> types;
  std::vector<std::shared_ptr<const Scheme>> schemes;  // types[t]'s, without calibration
  // types[t]'s calibration (":gptq", ":awq", ":smooth"), and the tokens the
  // calibrated types calibrate on (set before MeasureSensitivity when one
  // does). The embedding and the output head, which the calibrator does not
  // reach, round in a calibrated type as in its scheme.
  std::vector<Calibration> calibrations;
  std::shared_ptr<const CalibrationTokens> calibration;
  uint64_t weights = 0;  // elements of the groups
  // sensitivity[g][t]: mean KL with group g in types[t], all else float32
  // (measured[g][t]: end to end, else predicted); bytes[g][t] what it
  // stores in.
  std::vector<std::vector<double>> sensitivity;
  std::vector<std::vector<uint8_t>> measured;
  std::vector<std::vector<uint64_t>> bytes;
  MixSensitivity method = MixSensitivity::kPredicted;
  // Predicted: weight_error[g][t] the relative squared error of group g's
  // weights in types[t] (mix/weight_errors.h; NaN for calibrated types).
  std::vector<std::vector<double>> weight_error;
  std::string tune_tokens;  // their description, as eval's `tokens`
  uint64_t tune_positions = 0;
  int64_t candidates_measured = 0;
  std::string imatrix;  // the importance matrix's file, "" for none
  std::shared_ptr<const ImportanceMap> importance;

  // The bytes of the smallest assignment.
  uint64_t SmallestBytes() const;
  // The assignment of least predicted KL within `budget` bytes
  // (mix/allocate.h; a type of non-finite cost is no option for its group;
  // InvalidArgument naming a group that has no other), with its bytes and
  // predicted KL; choice[g] indexes `types`.
  absl::StatusOr<Allocation> Allocate(uint64_t budget) const;
  MixAssignment Assignment(const Allocation& a) const;
  uint64_t Bytes(const Allocation& a) const;
  // The sum of the groups' costs; NaN when a type was not measured.
  double Predict(const MixAssignment& a) const;
  // The assignment as an eval candidate: one rule per group.
  EvalCandidate Candidate(const std::string& label, const MixAssignment& a) const;
  // Group g alone in types[t], every other matrix float32.
  EvalCandidate Single(size_t g, size_t t) const;
  bool Calibrates() const;  // whether any type does
  // The probe of a prediction: of the types that do not calibrate, ordered
  // by the bytes they store the model in, the lower middle one (q4_K of
  // the defaults); -1 when every type calibrates.
  int ProbeType() const;
  // Its name when the table is predicted and has one, else "".
  std::string Probe() const;
};

// q2_K q3_K q4_K q5_K q6_K q8_0 iq4_xs fp16.
const std::vector<std::string>& DefaultMixTypes();

// The groups, types and bytes of `model` (found at `path`), before the
// sweep: `types` (empty: those of DefaultMixTypes that apply to every
// matrix's rows; a calibrated type, "q4_K:gptq", has its scheme's bytes),
// each quantizing with `importance` when given. Option errors on "types"
// (unknown, a recipe, not applying to a matrix's rows, or needing an
// importance matrix there is not) and "imatrix" (one no type uses).
absl::StatusOr<MixTable> MakeMixTable(const Checkpoint& model, const std::string& path,
                                      const std::vector<std::string>& types,
                                      std::shared_ptr<const ImportanceMap> importance,
                                      ExpertGroups experts = ExpertGroups::kLayer);

}  // namespace lowp

#endif  // LOWP_MIX_TABLE_H_
