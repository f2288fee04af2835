// Internal: the codebooks of ggml's 8-element grid i-quants (iq2_xxs, iq2_xs,
// iq2_s, and iq1_s / iq1_m, which share one) and the search tables ggml's
// iq2xs_init_impl builds from them.
//
// A grid point is 8 levels, each 0, 1 or 2, packed 2 bits per element
// (element k in bits 2k..2k+1): ggml's kgrid_* arrays. The decoders' tables
// in ggml-common.h hold the same points as bytes: iq2*_grid byte k is
// kIq2LevelValues[level k], iq1s_grid byte k is kIq1LevelValues[level k].
#ifndef LOWP_CODECS_GGML_IQ2_GRIDS_H_
#define LOWP_CODECS_GGML_IQ2_GRIDS_H_

#include <array>
#include <bit>
#include <cstdint>
#include <span>
#include <vector>

namespace lowp::ggml::internal {

extern const uint16_t kIq2XxsPoints[256];  // iq2_xxs: 8-bit indices
extern const uint16_t kIq2XsPoints[512];   // iq2_xs: 9-bit indices
extern const uint16_t kIq2SPoints[1024];   // iq2_s: 10-bit indices
extern const uint16_t kIq1Points[2048];    // iq1_s and iq1_m: 11-bit indices

// Level k (0..2) of a packed point.
inline int PointLevel(uint16_t point, int k) { return (point >> 2 * k) & 3; }

// What a level decodes to: the iq2 grids' magnitudes (signs are stored
// apart) and iq1's -1, 0, 1 (shifted by ±IQ1S_DELTA when decoded).
inline constexpr uint8_t kIq2LevelValues[3] = {8, 25, 43};
inline constexpr int8_t kIq1LevelValues[3] = {-1, 0, 1};
inline constexpr float kIq1Delta = 0.125f;  // IQ1S_DELTA == IQ1M_DELTA


// kmask_iq2xs[j]: element j's sign bit.
inline bool SignBit(uint8_t signs, int j) { return (signs >> j) & 1; }

enum class GridKind { kIq2Xxs, kIq2Xs, kIq2S, kIq1 };

// The tables iq2xs_init_impl builds for one codebook (ggml's kgrid_q2xs,
// kmap_q2xs and kneighbors_q2xs). A key is 8 levels packed as a point is
// packed; the quantizers round each element to a level, look the key up, and
// when no point has it, pick among the key's neighbours.
class GridSearch {
 public:
  // `nwant`: how many of the nearest distinct distances a neighbour list
  // spans (ggml: 2 for iq2_xxs and iq2_xs, 1 for iq2_s, 3 for iq1).
  GridSearch(std::span<const uint16_t> points, int nwant);

  // The point whose levels are `key`, or -1 when the key is off the grid.
  // Every field of `key` must be at most 2.
  int Find(uint16_t key) const { return entry_[key] >= 0 ? entry_[key] : -1; }

  // For a key off the grid: the points at the `nwant` smallest distinct
  // squared distances from it, nearest first and, at one distance, in point
  // order (ggml sorts (distance, point) pairs). The quantizers keep the first
  // of equally good neighbours, so this order is part of the format's bytes.
  std::span<const uint16_t> Neighbours(uint16_t key) const {
    const uint16_t* list = lists_.data() + (-entry_[key] - 1);
    return {list + 1, list[0]};
  }

  // Point p's 8 levels.
  const uint8_t* Levels(int p) const { return levels_[static_cast<size_t>(p)].data(); }

 private:
  std::vector<std::array<uint8_t, 8>> levels_;
  // Per key: a point (>= 0), or -(1 + offset) of the key's list in lists_
  // (a count, then that many points), as ggml's kmap_q2xs.
  std::vector<int32_t> entry_;
  std::vector<uint16_t> lists_;
};

// The tables of a codebook, built on first use (thread-safe) and kept.
const GridSearch& SearchTables(GridKind kind);

}  // namespace lowp::ggml::internal

#endif  // LOWP_CODECS_GGML_IQ2_GRIDS_H_
