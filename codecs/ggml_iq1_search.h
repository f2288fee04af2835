// Internal: ggml's iq1_s encoder split along its jobs, so that kernels/ (a
// SIMD split search) encodes with codecs' own sorting, grid step, refit and
// packing. A group of 32 sorted by value is cut into three runs (levels -1,
// 0, +1) at every pair i1 <= i2 of the 33 cut points, each scored with the
// levels shifted up and down from the prefix sums of w x and w; the first
// best is kept (Iq1sSplitsScalar). Groups are independent, so a search may
// run several at once: the encoder hands it up to kIq1sBatchBlocks blocks'
// groups per call.
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
// shift +1 (up) or -1 (down), 0 with i1 = i2 = -1 when none scored; the
// scale sum w q x / sum w q^2 of that split.
struct Iq1sSplit {
  int i1, i2, shift;
  float scale;
};

// Finds the best split of each of `groups` groups.
using Iq1sSplitSearch = void (*)(int groups, const Iq1sSums* sums, Iq1sSplit* best);

// codecs' own split search (scalar, ggml's order of operations).
void Iq1sSplitsScalar(int groups, const Iq1sSums* sums, Iq1sSplit* best);

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
  Iq1sSplitSearch splits;
  Iq1NeighbourSearch neighbour;
};

// Encodes `blocks` iq1_s super-blocks of x (importance qw, not null) with
// given searches: the same bytes for any that give what the scalar ones
// give.
void EncodeIq1SWith(const float* x, const float* qw, size_t blocks, uint8_t* out,
                    const Iq1Searches& searches);

}  // namespace lowp::ggml::internal

#endif  // LOWP_CODECS_GGML_IQ1_SEARCH_H_
