// The merge loop every BPE tokenizer here shares: the symbols of a word are
// merged pair by pair, at each step the adjacent pair of the lowest priority
// (a merge's rank, or minus a piece's score), the leftmost among equals,
// until no adjacent pair merges. A heap of candidate pairs makes it
// O(n log n) in the word's symbols, where llama2.c's and the textbook loop
// scan every pair at every step (O(n^2): hours on a whole text file); the
// result is the same, since merging never reorders symbols. Internal to the
// tokenizer layer.
#ifndef LOWP_TOKENIZER_BPE_MERGE_H_
#define LOWP_TOKENIZER_BPE_MERGE_H_

#include <cstdint>
#include <optional>
#include <queue>
#include <vector>

namespace lowp {

struct PairMerge {
  double priority = 0;  // lower merges first
  int32_t id = 0;       // the merged symbol
};

// Merges `ids` in place. `pair(a, b)` gives the merge of adjacent symbols
// a, b, or nullopt when they do not merge.
template <class PairFn>
void MergePairs(std::vector<int32_t>& ids, const PairFn& pair) {
  const size_t n = ids.size();
  if (n < 2) return;
  struct Candidate {
    double priority;
    uint32_t left, right;
    int32_t left_id, right_id, merged;
    bool operator>(const Candidate& o) const {
      return priority != o.priority ? priority > o.priority : left > o.left;
    }
  };
  std::vector<uint32_t> prev(n), next(n);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) {
    prev[i] = static_cast<uint32_t>(i - 1);  // wraps for the first: never read
    next[i] = static_cast<uint32_t>(i + 1);
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto offer = [&](uint32_t left, uint32_t right) {
    if (std::optional<PairMerge> m = pair(ids[left], ids[right])) {
      heap.push({m->priority, left, right, ids[left], ids[right], m->id});
    }
  };
  for (size_t i = 0; i + 1 < n; ++i) offer(static_cast<uint32_t>(i), static_cast<uint32_t>(i + 1));
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    // Stale: a side merged away or changed since the pair was offered.
    if (!alive[c.left] || !alive[c.right] || next[c.left] != c.right || ids[c.left] != c.left_id ||
        ids[c.right] != c.right_id) {
      continue;
    }
    ids[c.left] = c.merged;
    alive[c.right] = false;
    next[c.left] = next[c.right];
    if (next[c.left] < n) prev[next[c.left]] = c.left;
    if (c.left > 0) {
      // The nearest live symbol to the left (prev links of live symbols are kept).
      offer(prev[c.left], c.left);
    }
    if (next[c.left] < n) offer(c.left, next[c.left]);
  }
  size_t out = 0;
  for (size_t i = 0; i < n; ++i) {
    if (alive[i]) ids[out++] = ids[i];
  }
  ids.resize(out);
}

}  // namespace lowp

#endif  // LOWP_TOKENIZER_BPE_MERGE_H_
