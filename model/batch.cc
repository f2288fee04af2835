#include "model/batch.h"

#include <algorithm>

namespace lowp {

std::vector<int64_t> GroupSequences(std::span<const int64_t> lengths, int64_t group_rows) {
  std::vector<int64_t> starts;
  int64_t rows = group_rows;  // "full": the first sequence opens a group
  for (size_t s = 0; s < lengths.size(); ++s) {
    if (rows >= group_rows) {
      starts.push_back(static_cast<int64_t>(s));
      rows = 0;
    }
    rows += lengths[s];
  }
  if (starts.empty()) starts.push_back(0);
  return starts;
}

Batch Batch::Make(std::span<const int64_t> lengths, std::span<const int64_t> positions,
                  int64_t group_rows) {
  Batch b;
  for (size_t s = 0; s < lengths.size(); ++s) {
    b.sequences.push_back({b.rows, lengths[s], positions.empty() ? 0 : positions[s]});
    b.rows += lengths[s];
  }
  const std::vector<int64_t> starts = GroupSequences(lengths, group_rows);
  b.group_starts = starts;
  for (size_t g = 0; g < starts.size(); ++g) {
    const int64_t first = starts[g];
    const int64_t last =
        g + 1 < starts.size() ? starts[g + 1] : static_cast<int64_t>(lengths.size());
    if (first >= last) continue;
    const int64_t begin = b.sequences[first].first_row;
    const int64_t end = b.sequences[last - 1].first_row + b.sequences[last - 1].rows;
    for (int64_t r = begin; r < end; r += kBlockRows) {
      b.blocks.push_back({r, std::min(end, r + kBlockRows)});
    }
  }
  return b;
}

std::vector<Batch> Batch::Groups() const {
  std::vector<Batch> out;
  for (size_t g = 0; g < group_starts.size(); ++g) {
    const int64_t first = group_starts[g];
    const int64_t last =
        g + 1 < group_starts.size() ? group_starts[g + 1] : static_cast<int64_t>(sequences.size());
    if (first >= last) continue;
    Batch b;
    const int64_t base = sequences[first].first_row;
    for (int64_t s = first; s < last; ++s) {
      b.sequences.push_back(
          {sequences[s].first_row - base, sequences[s].rows, sequences[s].first_position});
      b.rows += sequences[s].rows;
    }
    for (const RowBlock& block : blocks) {
      if (block.begin >= base && block.end <= base + b.rows) {
        b.blocks.push_back({block.begin - base, block.end - base});
      }
    }
    b.group_starts = {0};
    out.push_back(std::move(b));
  }
  return out;
}

}  // namespace lowp
