// The neighbour lists of ggml's 2-bit-level codebooks (iq1's and the three
// iq2 grids, codecs/ggml_iq2_grids.h) as int32 arrays for loads and gathers
// in lanes: the SIMD searches' form of codecs' GridSearch (kernels/ggml_iq1_simd.cc,
// kernels/ggml_iq2_simd.cc). Internal to the kernels.
#ifndef LOWP_KERNELS_GGML_GRID_TABLES_H_
#define LOWP_KERNELS_GGML_GRID_TABLES_H_

#include <cstdint>
#include <vector>

#include "codecs/ggml_iq2_grids.h"
#include "hwy/base.h"

namespace lowp::kernels {

// entry[key]: -1 for a key on the grid or with a level of 3 (no list;
// rounding never makes one), else where its list starts << 10 | its length;
// the lists' grid points in `points`, each point's 8 levels packed in
// `packed` (level i at bit 2 i). Both lists end with a whole vector (16
// lanes) of padding, so a vector load at a list's start stays in bounds.
struct GridNeighbourTables {
  std::vector<int32_t> entry, points, packed;

  explicit GridNeighbourTables(const ggml::internal::GridSearch& grid) {
    entry.assign(1 << 16, -1);
    for (uint32_t key = 0; key < (1u << 16); ++key) {
      bool valid = true;
      for (int i = 0; i < 8; ++i) valid = valid && ((key >> 2 * i) & 3) != 3;
      if (!valid || grid.Find(static_cast<uint16_t>(key)) >= 0) continue;
      const auto list = grid.Neighbours(static_cast<uint16_t>(key));
      HWY_ASSERT(!list.empty() && list.size() < 1024 && points.size() < (1u << 21));
      entry[key] = static_cast<int32_t>(points.size() << 10 | list.size());
      for (uint16_t p : list) {
        const uint8_t* level = grid.Levels(p);
        int32_t bits = 0;
        for (int i = 0; i < 8; ++i) bits |= level[i] << 2 * i;
        points.push_back(p);
        packed.push_back(bits);
      }
    }
    points.resize(points.size() + 16);
    packed.resize(packed.size() + 16);
  }

  // The tables of `grid`, one of codecs' SearchTables, built once.
  static const GridNeighbourTables& For(const ggml::internal::GridSearch& grid) {
    using ggml::internal::GridKind;
    using ggml::internal::SearchTables;
    static const auto* iq1 = new GridNeighbourTables(SearchTables(GridKind::kIq1));
    static const auto* xxs = new GridNeighbourTables(SearchTables(GridKind::kIq2Xxs));
    static const auto* xs = new GridNeighbourTables(SearchTables(GridKind::kIq2Xs));
    static const auto* s = new GridNeighbourTables(SearchTables(GridKind::kIq2S));
    if (&grid == &SearchTables(GridKind::kIq1)) return *iq1;
    if (&grid == &SearchTables(GridKind::kIq2Xxs)) return *xxs;
    if (&grid == &SearchTables(GridKind::kIq2Xs)) return *xs;
    HWY_ASSERT(&grid == &SearchTables(GridKind::kIq2S));
    return *s;
  }
};

}  // namespace lowp::kernels

#endif  // LOWP_KERNELS_GGML_GRID_TABLES_H_
