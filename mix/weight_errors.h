// What each type's rounding does to each group's weights, without running
// the model: the relative squared error sum w e^2 / sum w x^2 of the
// group's matrices (w the importance matrix's weight of the element's input
// column, 1 without one; e = q - x), the numerator of the KL a small
// perturbation costs to first order when the inputs are uncorrelated. The
// sensitivity prediction (mix/sensitivity.h) scales a probe's measured KL by
// it.
//
// Each matrix is read once, one at a time (a layer's routed experts one
// expert at a time), and each type measured on the same rows of it: all of
// them up to kErrorWholeElements, else kErrorWindows windows spread evenly
// over the rows, about kErrorSampleElements in all (what the prediction
// uses is the ratio of two types' errors, and on the same rows their rows'
// scales cancel).
#ifndef LOWP_MIX_WEIGHT_ERRORS_H_
#define LOWP_MIX_WEIGHT_ERRORS_H_

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "mix/sensitivity.h"
#include "mix/table.h"
#include "model/checkpoint.h"

namespace lowp {

constexpr int64_t kErrorSampleElements = int64_t{1} << 21;
constexpr int64_t kErrorWholeElements = 2 * kErrorSampleElements;
constexpr int64_t kErrorWindows = 16;

// The windows [first, first + count) of a [rows, cols] matrix measured:
// each starting at a multiple of `unit` and holding a multiple of it.
std::vector<std::pair<int64_t, int64_t>> SampledRows(int64_t rows, int64_t cols, int64_t unit);

// errors[g][t]: group g's relative squared error in table.types[t], for
// the groups `takes` (all when empty) and the types `types` marks; NaN for
// the others. +inf when a type overflows an element; 0/0 (all-zero
// weights rounded exactly) is 0.
absl::StatusOr<std::vector<std::vector<double>>> MeasureWeightErrors(
    const Checkpoint& model, const MixTable& table, const std::vector<bool>& types,
    const std::function<bool(size_t group)>& takes, const MixRun& run);

}  // namespace lowp

#endif  // LOWP_MIX_WEIGHT_ERRORS_H_
