#include "eval/variant_parts.h"

#include <algorithm>
#include <vector>

#include "kernels/quantize.h"
#include "kernels/thread_pool.h"
#include "quant/measure.h"

namespace lowp::variant_parts {

void CompareInto(std::span<const float> x, std::span<const float> q, int64_t cols, int threads,
                 ErrorStats& stats) {
  constexpr int64_t kPiece = int64_t{1} << 16;
  const int64_t rows = static_cast<int64_t>(x.size()) / std::max<int64_t>(cols, 1);
  const int64_t piece_rows = std::max<int64_t>(1, kPiece / std::max<int64_t>(cols, 1));
  const int64_t pieces = (rows + piece_rows - 1) / piece_rows;
  std::vector<ErrorStats> parts(static_cast<size_t>(pieces));
  const CompareOptions options{.relative_floor = MeasureOptions().relative_floor};
  ParallelFor(static_cast<size_t>(pieces), threads, [&](size_t p) {
    const size_t first = static_cast<size_t>(static_cast<int64_t>(p) * piece_rows * cols);
    const size_t n = std::min(x.size() - first, static_cast<size_t>(piece_rows * cols));
    ComparePairs(x.subspan(first, n), q.subspan(first, n), options, parts[p]);
  });
  for (const ErrorStats& part : parts) stats.Merge(part);
}

std::vector<size_t> ExpertEntries(LayerWeights& layer,
                                  std::span<const LayerWeights::Entry> entries) {
  std::vector<size_t> first(layer.experts.size(), 0);
  for (size_t j = 0; j < entries.size(); ++j) {
    for (size_t e = 0; e < layer.experts.size(); ++e) {
      if (entries[j].matrix == &layer.experts[e].gate) first[e] = j;
    }
  }
  return first;
}

std::map<std::string, std::pair<size_t, bool>> MatrixEntries(
    std::span<const LayerWeights::Entry> entries) {
  std::map<std::string, std::pair<size_t, bool>> places;
  for (size_t j = 0; j < entries.size(); ++j) {
    places.emplace(entries[j].matrix->name, std::pair{j, entries[j].linear});
  }
  return places;
}

}  // namespace lowp::variant_parts
