// Internal: the codebooks of ggml's iq3_xxs and iq3_s, and the search tables
// ggml's iq3xs_init_impl builds from them for the encoders.
//
// Both formats code a group of 4 elements as one point of a grid: each
// element a level l in 0..7, the point written as the 12-bit number
// l0 | l1 << 3 | l2 << 6 | l3 << 9 (ggml's `u`). iq3_xxs keeps 256 of the
// 4096 points, iq3_s 512. The encoder works on the lattice values 2l + 1
// (1, 3, .., 15); the decoder's tables (ggml-common.h's iq3xxs_grid and
// iq3s_grid) hold 2l + 1 for iq3_s but 8l + 4 for iq3_xxs with the top level
// at 62 instead of 60 (kIq3XxsDecodeLevel).
#ifndef LOWP_CODECS_GGML_IQ3_GRIDS_H_
#define LOWP_CODECS_GGML_IQ3_GRIDS_H_

#include <array>
#include <cstdint>
#include <span>
#include <vector>

namespace lowp::ggml::internal {

inline constexpr int kIq3Levels = 8;     // kMaxQ: levels 0..7 per element
inline constexpr int kIq3Points = 4096;  // 8^4 possible 4-element points
inline constexpr int kIq3XxsGridSize = 256;
inline constexpr int kIq3SGridSize = 512;

// The value iq3_xxs's decoder gives level l (iq3xxs_grid's bytes).
inline constexpr uint8_t kIq3XxsDecodeLevel[kIq3Levels] = {4, 12, 20, 28, 36, 44, 52, 62};

// The decoders' grids: the 4 unsigned values of each grid index, as the
// bytes of ggml-common.h's iq3xxs_grid and iq3s_grid.
using Iq3DecodeGrid = std::array<uint8_t, 4>;
extern const std::array<Iq3DecodeGrid, kIq3XxsGridSize> kIq3XxsGrid;
extern const std::array<Iq3DecodeGrid, kIq3SGridSize> kIq3SGrid;

// One grid with what the encoders search it by (iq3xs_init_impl's
// kgrid_q3xs, kmap_q3xs and kneighbors_q3xs). Built once per grid on first
// use (thread-safe), never freed.
class Iq3Lattice {
 public:
  static const Iq3Lattice& Xxs();  // 256 points: iq3_xxs
  static const Iq3Lattice& S();    // 512 points: iq3_s

  // The lattice values 2l + 1 of the point with grid index `index`.
  const int8_t* Values(int index) const { return values_[index].data(); }
  // The grid index of point u (0..4095), or -1 when the grid lacks it.
  int IndexOf(uint16_t u) const { return index_of_[u]; }
  // For a point u off the grid: the grid indices iq3_find_best_neighbour
  // tries, nearest first. They are every grid point at the smallest
  // `nwant` squared distances from u in the lattice values (2 distances for
  // iq3_xxs, 3 for iq3_s), ordered by distance then index: the order ggml's
  // qsort on (distance, index) gives. The search keeps the first of equally
  // good candidates, so this order is part of the format's bytes.
  std::span<const uint16_t> Neighbours(uint16_t u) const {
    return {neighbours_.data() + begin_[u], neighbours_.data() + begin_[u + 1]};
  }

 private:
  Iq3Lattice(std::span<const uint16_t> codes, int nwant);

  std::vector<std::array<int8_t, 4>> values_;
  std::array<int16_t, kIq3Points> index_of_;
  std::array<uint32_t, kIq3Points + 1> begin_;  // Neighbours(u) = [begin_[u], begin_[u + 1])
  std::vector<uint16_t> neighbours_;
};

}  // namespace lowp::ggml::internal

#endif  // LOWP_CODECS_GGML_IQ3_GRIDS_H_
