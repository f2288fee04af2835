// A SentencePiece precompiled_charsmap checked before libsentencepiece reads
// it. Internal to the tokenizer layer.
//
// The blob is <uint32 T little-endian><T bytes: a darts-clone double array
// of T/4 units><the replacements, each ending in NUL>. libsentencepiece
// 0.1.97 trusts all of it: its prefix search (darts.h commonPrefixSearch)
// reads the unit at base ^ byte for every byte of the text without a bound,
// returns the count of every match although NormalizePrefix keeps 32 on its
// stack, and reads a replacement as a C string from an unchecked offset; a
// cycle makes each search run to the end of the text. So a garbage
// charsmap loads, then crashes on the first encode.
//
// CheckCharsmap walks every node a text can reach from the root, over all
// 256 bytes (a memoized depth-first walk: the trie is a DAWG whose shared
// nodes are walked once), and accepts the blob only if every unit any
// search reads is inside the array, every replacement inside the blob, the
// graph has no cycle, no path is deeper than kMaxDepth bytes or holds more
// than kMaxMatches matches, and no replacement is longer than
// kMaxReplacement bytes or, spaces escaped to U+2581, longer than
// kMaxGrowth times the shortest key that reaches it. Real charsmaps
// (nmt_nfkc, nfkc_cf: 44,288 units, 29,423 reachable nodes) have depth 10,
// 4 matches on a path, a longest replacement of 33 bytes and growth 13; the
// walk takes about 15 ms.
#ifndef LOWP_TOKENIZER_CHARSMAP_H_
#define LOWP_TOKENIZER_CHARSMAP_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace lowp {

struct CharsmapLimits {
  static constexpr uint32_t kMaxDepth = 256;
  static constexpr uint32_t kMaxMatches = 32;  // NormalizePrefix's stack array
  static constexpr size_t kMaxReplacement = 64;
  static constexpr uint32_t kMaxGrowth = 16;
};

// "" when libsentencepiece can use `blob` safely (an empty blob is no
// charsmap), else what is wrong with it.
std::string CheckCharsmap(absl::string_view blob);

}  // namespace lowp

#endif  // LOWP_TOKENIZER_CHARSMAP_H_
