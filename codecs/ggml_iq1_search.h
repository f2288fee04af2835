// Internal: ggml's iq1_s and iq1_m encoders split along their jobs, so that
// kernels/ (SIMD searches) encodes with codecs' own grid step, refit and
// packing. A group (32 for iq1_s, 16 for iq1_m) sorted by value (Iq1Sort)
// is cut into three runs (levels -1, 0, +1) at every pair i1 <= i2 of the
// cut points, each scored with the levels shifted up and down (iq1_s: from
// prefix sums of w x and w; iq1_m: per octet, from ggml's direct sums); the
// first best is kept (Iq1sSplitsScalar, Iq1mSplitsScalar). An octet then off
// the grid takes its best neighbour (Iq1NeighbourSearch). Groups are
// independent, so a split search may run several at once: the encoders
// hand it kIq1sBatchBlocks blocks' groups (iq1_s) or a block's 16 (iq1_m)
// per call.
#ifndef LOWP_CODECS_GGML_IQ1_SEARCH_H_
#define LOWP_CODECS_GGML_IQ1_SEARCH_H_

#include <cstddef>
#include <cstdint>

#include "codecs/ggml_iq2_grids.h"

namespace lowp::ggml::internal {

inline constexpr int kIq1sGroup = 32;
inline constexpr int kIq1sBatchBlocks = 2;  // 16 groups per search call

// ggml's x_p and x_m: the levels -1, 0, 1 shifted up and down by 0.125.
inline constexpr float kIq1Up[3] = {-1 + kIq1Delta, kIq1Delta, 1 + kIq1Delta};
inline constexpr float kIq1Down[3] = {-1 - kIq1Delta, -kIq1Delta, 1 - kIq1Delta};

// One group's input: sums over the first j sorted elements of w x and w
// (sumx[0] = sumw[0] = 0), and its largest magnitude (the scale when no
// split scores).
struct Iq1sSums {
  float sumx[kIq1sGroup + 1];
  float sumw[kIq1sGroup + 1];
  float max;
};

// The best split: levels 0 before sorted position i1, 1 before i2, 2 after;
// shift +1 (up) or -1 (down) for iq1_s, the combination k for iq1_m (0 and
// -1 when none scored, with i1 = i2 = -1); the scale sum w q x / sum w q^2
// of that split.
struct Iq1Split {
  int i1, i2, shift;
  float scale;
};

// One iq1_m group's input: per sorted position j, level lv and shift
// combination k (0 (+, +), 1 (+, -), 2 (-, +), 3 (-, -) for the group's
// first and second octet), the terms ggml adds, w v x and w v^2 (v the
// shifted level of the element's octet); and its largest magnitude.
inline constexpr int kIq1mGroup = 16;
struct Iq1mTerms {
  float tx[kIq1mGroup][3][4];
  float tq[kIq1mGroup][3][4];
  float max;
};

// Finds the best split of each of `groups` groups.
using Iq1sSplitSearch = void (*)(int groups, const Iq1sSums* sums, Iq1Split* best);

// codecs' own split search (scalar, ggml's order of operations).
void Iq1sSplitsScalar(int groups, const Iq1sSums* sums, Iq1Split* best);

// iq1_m's: each split's sums from zero in sorted order (level 0 terms before
// i1, 1 before i2, 2 after), the combinations k = 0..3 compared in turn.
using Iq1mSplitSearch = void (*)(int groups, const Iq1mTerms* terms, Iq1Split* best);
void Iq1mSplitsScalar(int groups, const Iq1mTerms* terms, Iq1Split* best);

// iq1_find_best_neighbour2 for an octet whose levels (key) are off the
// grid: among grid.Neighbours(key), the first point of least
// sum w (scale xx[level] - x)^2 (d2 += w * diff * diff from 0, in element
// order; NaN never less), the first neighbour when none is below FLT_MAX.
// Returns the point and writes its 8 levels to L.
using Iq1NeighbourSearch = int (*)(const GridSearch& grid, uint16_t key, const float* xval,
                                   const float* weight, float scale, const float* xx, int8_t* L);

// codecs' own neighbour search (scalar).
int Iq1BestNeighbourScalar(const GridSearch& grid, uint16_t key, const float* xval,
                           const float* weight, float scale, const float* xx, int8_t* L);

// The indices of xb[0..n) (n <= 32) in ascending order of value, equal
// values in index order (a stable sort, as glibc's qsort of ggml's
// (value, index) pairs).
using Iq1Sort = void (*)(const float* xb, int n, int* order);

// codecs' own sort (scalar insertion sort).
void Iq1SortScalar(const float* xb, int n, int* order);

// The jobs an encoder may be given.
struct Iq1Searches {
  Iq1Sort sort;
  Iq1sSplitSearch s_splits;
  Iq1mSplitSearch m_splits;
  Iq1NeighbourSearch neighbour;
};

// Encodes `blocks` iq1_s super-blocks of x (importance qw, not null) with
// given searches: the same bytes for any that give what the scalar ones
// give.
void EncodeIq1SWith(const float* x, const float* qw, size_t blocks, uint8_t* out,
                    const Iq1Searches& searches);

// Encodes one iq1_m super-block (qw may be null) with given searches.
void EncodeIq1MWith(const float* x, const float* qw, uint8_t* out, const Iq1Searches& searches);

}  // namespace lowp::ggml::internal

#endif  // LOWP_CODECS_GGML_IQ1_SEARCH_H_
