// Internal to eval/: what the weight variants share (their reports' order,
// the comparison of a matrix with its stored form).
#ifndef LOWP_EVAL_VARIANT_PARTS_H_
#define LOWP_EVAL_VARIANT_PARTS_H_

#include <cstdint>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "io/tensor.h"
#include "kernels/error_stats.h"
#include "model/weights.h"

namespace lowp::variant_parts {

// A matrix's place in checkpoint order (WeightReport's order).
constexpr int64_t kEmbeddingKey = 0;
constexpr int64_t kHeadKey = std::numeric_limits<int64_t>::max();
inline int64_t LayerKey(int64_t layer, size_t matrix) {
  return 1 + layer * (int64_t{1} << 20) + static_cast<int64_t>(matrix);
}


// Each routed expert's place among a layer's matrices (its gate's entry;
// up and down follow), for the variants that make experts one at a time.
std::vector<size_t> ExpertEntries(LayerWeights& layer,
                                  std::span<const LayerWeights::Entry> entries);
// Each matrix's place among a layer's and whether it is a linear layer's,
// by name, for the variants that make matrices one at a time.
std::map<std::string, std::pair<size_t, bool>> MatrixEntries(
    std::span<const LayerWeights::Entry> entries);

// x against its stored form q, in pieces of whole rows merged in order.
void CompareInto(std::span<const float> x, std::span<const float> q, int64_t cols, int threads,
                 ErrorStats& stats);

}  // namespace lowp::variant_parts

#endif  // LOWP_EVAL_VARIANT_PARTS_H_
