#include "tokenizer/charsmap.h"

#include <cstring>
#include <deque>
#include <vector>

#include "absl/strings/str_cat.h"

namespace lowp {
namespace {

// A darts-clone unit (darts.h DoubleArrayUnit).
bool HasLeaf(uint32_t u) { return (u >> 8) & 1; }
uint32_t Value(uint32_t u) { return u & 0x7FFFFFFFu; }
uint32_t Label(uint32_t u) { return u & 0x800000FFu; }
uint32_t Offset(uint32_t u) { return (u >> 10) << ((u & (1u << 9)) >> 6); }

}  // namespace

std::string CheckCharsmap(absl::string_view blob) {
  using L = CharsmapLimits;
  if (blob.empty()) return "";
  if (blob.size() <= 4) return absl::StrCat("a charsmap of ", blob.size(), " bytes");
  uint32_t trie_bytes = 0;
  for (int i = 3; i >= 0; --i) trie_bytes = trie_bytes << 8 | static_cast<uint8_t>(blob[i]);
  if (trie_bytes > blob.size() - 4 || trie_bytes == 0 || trie_bytes % 4 != 0) {
    return absl::StrCat("its trie of ", trie_bytes, " bytes does not fit its ", blob.size(),
                        " bytes in whole units");
  }
  const uint32_t units = trie_bytes / 4;
  std::vector<uint32_t> a(units);
  for (uint32_t i = 0; i < units; ++i) {
    const auto* p = reinterpret_cast<const uint8_t*>(blob.data()) + 4 + 4 * size_t{i};
    a[i] = uint32_t{p[0]} | uint32_t{p[1]} << 8 | uint32_t{p[2]} << 16 | uint32_t{p[3]} << 24;
  }
  const absl::string_view replacements = blob.substr(4 + size_t{trie_bytes});
  if (replacements.empty() || replacements.back() != '\0') {
    return "its replacements do not end in a NUL byte";
  }
  // Every unit a search reads from a node whose children start at `base`:
  // base ^ c for each byte c (the leaf's value is at base ^ 0).
  auto block_ok = [&](uint32_t base) { return (base | 0xFFu) < units; };
  // Whether unit m is the child a search takes on byte c.
  auto child = [&](uint32_t m, uint32_t c) { return Label(a[m]) == c; };

  // Depth-first, memoized: state 0 unseen, 1 on the stack, 2 done, with the
  // longest path and most matches below (the node included).
  std::vector<uint8_t> state(units, 0);
  std::vector<uint16_t> height(units, 0), matches(units, 0);
  struct Frame {
    uint32_t node, base, next_byte;
    uint32_t height, matches;  // the most below, so far
  };
  std::vector<Frame> stack;
  std::string error;
  auto enter = [&](uint32_t m) {
    if (state[m] == 1) {
      error = "its trie has a cycle";
      return;
    }
    const uint32_t base = m ^ Offset(a[m]);
    if (!block_ok(base)) {
      error = absl::StrCat("unit ", m, " points outside its ", units, " units");
      return;
    }
    if (HasLeaf(a[m])) {
      const uint32_t v = Value(a[base]);
      if (v >= replacements.size()) {
        error = absl::StrCat("unit ", m, "'s replacement starts outside the charsmap");
        return;
      }
      if (std::strlen(replacements.data() + v) > L::kMaxReplacement) {
        error = absl::StrCat("unit ", m, "'s replacement is longer than ", L::kMaxReplacement,
                             " bytes");
        return;
      }
    }
    state[m] = 1;
    stack.push_back({m, base, 0, 0, 0});
  };
  auto finish = [&]() {
    const Frame f = stack.back();
    stack.pop_back();
    const uint32_t h = f.height + 1, k = f.matches + (HasLeaf(a[f.node]) ? 1 : 0);
    if (h > L::kMaxDepth) {
      error = absl::StrCat("its trie is deeper than ", L::kMaxDepth, " bytes");
      return;
    }
    if (k > L::kMaxMatches) {
      error = absl::StrCat("a text can match more than ", L::kMaxMatches,
                           " of its keys at once (libsentencepiece keeps ", L::kMaxMatches, ")");
      return;
    }
    height[f.node] = static_cast<uint16_t>(h);
    matches[f.node] = static_cast<uint16_t>(k);
    state[f.node] = 2;
    if (!stack.empty()) {
      stack.back().height = std::max(stack.back().height, h);
      stack.back().matches = std::max(stack.back().matches, k);
    }
  };
  const uint32_t root = Offset(a[0]);
  if (!block_ok(root)) return absl::StrCat("its root points outside its ", units, " units");
  for (uint32_t c = 0; c < 256 && error.empty(); ++c) {
    if (!child(root ^ c, c) || state[root ^ c] == 2) continue;
    enter(root ^ c);
    while (!stack.empty() && error.empty()) {
      Frame& f = stack.back();
      if (f.next_byte == 256) {
        finish();
        continue;
      }
      const uint32_t b = f.next_byte++;
      const uint32_t m = f.base ^ b;
      if (!child(m, b)) continue;
      if (state[m] == 2) {
        f.height = std::max<uint32_t>(f.height, height[m]);
        f.matches = std::max<uint32_t>(f.matches, matches[m]);
        continue;
      }
      enter(m);
    }
  }
  if (!error.empty()) return error;

  // Growth: breadth-first from the root, the shortest key reaching each
  // node; a replacement, each space escaped to 3 bytes, against it.
  std::vector<uint16_t> shortest(units, 0);
  std::deque<uint32_t> queue;
  for (uint32_t c = 0; c < 256; ++c) {
    if (child(root ^ c, c) && shortest[root ^ c] == 0) {
      shortest[root ^ c] = 1;
      queue.push_back(root ^ c);
    }
  }
  while (!queue.empty()) {
    const uint32_t m = queue.front();
    queue.pop_front();
    const uint32_t base = m ^ Offset(a[m]);
    if (HasLeaf(a[m])) {
      const char* r = replacements.data() + Value(a[base]);
      size_t bytes = 0;
      for (; *r != '\0'; ++r) bytes += *r == ' ' ? 3 : 1;
      if (bytes > size_t{L::kMaxGrowth} * shortest[m]) {
        return absl::StrCat("unit ", m, " turns ", shortest[m], " bytes into ", bytes,
                            ", more than ", L::kMaxGrowth, " times as many");
      }
    }
    for (uint32_t c = 0; c < 256; ++c) {
      const uint32_t next = base ^ c;
      if (child(next, c) && shortest[next] == 0) {
        shortest[next] = static_cast<uint16_t>(shortest[m] + 1);
        queue.push_back(next);
      }
    }
  }
  return "";
}

}  // namespace lowp
