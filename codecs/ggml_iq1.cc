// ggml's 1-bit grid i-quants: iq1_s (1.56 bits per element) and iq1_m
// (1.75), as quantize_row_iq1_{s,m}_impl write them and dequantize_row_iq1_*
// read them.
//
// Each octet is one point of a 2048-point codebook of levels -1, 0, 1, all
// shifted by +0.125 or -0.125 (the sign of the shift is stored: per group of
// 32 in iq1_s, per octet in iq1_m). A group's levels come from an exact
// search: sorted by value, every split of the group into three runs (-1, 0,
// +1) is scored in closed form; an octet whose levels are no point then
// takes the nearest of its neighbours. The encoders take the sort, split
// and neighbour searches as jobs (codecs/ggml_iq1_search.h): kernels/ runs
// them in SIMD lanes, the scalar ones here are the specification.
//
// No element is counted in `clipped`: every octet takes a whole point of the
// grid and nothing is clamped on the way.
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <span>

#include "codecs/ggml_blocks.h"
#include "codecs/ggml_iq1_search.h"
#include "codecs/ggml_iq2_grids.h"
#include "codecs/ggml_ops.h"

namespace lowp::ggml::internal {
namespace {

constexpr float kGroupMaxEpsIq1S = 1e-12f;  // GROUP_MAX_EPS_IQ1_S
constexpr float kGroupMaxEpsIq1M = 1e-7f;   // GROUP_MAX_EPS_IQ1_M
constexpr const float* kUp = kIq1Up;
constexpr const float* kDown = kIq1Down;

// ggml's MAX macro, argument order kept.

float SumSquares(const float* x) {
  float sumx2 = 0;
  for (int i = 0; i < kSuperBlock; ++i) sumx2 += x[i] * x[i];
  return sumx2;
}

// The group's weights: qw * sqrt(sigma2 + x^2), or (iq1_m without
// importance) x^2.
void GroupWeights(int n, const float* qw, const float* xb, float sigma2, float* weight) {
  if (qw != nullptr) {
    for (int i = 0; i < n; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
  } else {
    for (int i = 0; i < n; ++i) weight[i] = xb[i] * xb[i];
  }
}

float MaxMagnitude(const float* xb, int n) {
  float max = std::fabs(xb[0]);
  for (int i = 1; i < n; ++i) max = Max(max, std::fabs(xb[i]));
  return max;
}

uint16_t KeyOf(const int8_t* L) {
  uint16_t key = 0;
  for (int i = 0; i < 8; ++i) key = static_cast<uint16_t>(key | L[i] << 2 * i);
  return key;
}

// Levels from a split of the sorted order: positions before i1 are level 0
// (-1), before i2 level 1 (0), the rest level 2 (+1).
void SplitLevels(const int* order, int n, int i1, int i2, int8_t* L) {
  for (int j = 0; j < n; ++j) L[order[j]] = static_cast<int8_t>(j < i1 ? 0 : j < i2 ? 1 : 2);
}

// The octets' points, each moved to its best neighbour when its levels are
// off the grid; `xx_of(k)` is octet k's shifted values. Returns whether all
// were on the grid.
template <typename ShiftOf>
bool OctetsToGrid(const GridSearch& grid, int octets, const float* xb, const float* weight,
                  float scale, ShiftOf xx_of, Iq1NeighbourSearch neighbour, int8_t* L,
                  uint16_t* index) {
  bool all_on_grid = true;
  for (int k = 0; k < octets; ++k) {
    const uint16_t key = KeyOf(L + 8 * k);
    int p = grid.Find(key);
    if (p < 0) {
      all_on_grid = false;
      p = neighbour(grid, key, xb + 8 * k, weight + 8 * k, scale, xx_of(k), L + 8 * k);
    }
    index[k] = static_cast<uint16_t>(p);
  }
  return all_on_grid;
}

// After a move to a neighbour, ggml refits the scale on the points chosen:
// sum w q x / sum w q^2 when both are positive.
template <typename ShiftOf>
float RefitScale(const GridSearch& grid, int octets, const float* xb, const float* weight,
                 ShiftOf xx_of, const uint16_t* index, float scale) {
  float sumqx = 0, sumq2 = 0;
  for (int k = 0; k < octets; ++k) {
    const float* xx = xx_of(k);
    const uint8_t* level = grid.Levels(index[k]);
    for (int j = 0; j < 8; ++j) {
      const float w = weight[8 * k + j];
      const float q = xx[level[j]];
      sumqx += w * q * xb[8 * k + j];
      sumq2 += w * q * q;
    }
  }
  return sumqx > 0 && sumq2 > 0 ? sumqx / sumq2 : scale;
}

struct Group {
  float scale;
  // iq1_s: +1 or -1. iq1_m: 0..3, bit 1 set when the first octet shifts
  // down, bit 0 when the second does.
  int shift;
  uint16_t index[4];
};

// One iq1_s group of 32, before the search: the order of its values and the
// prefix sums of w x and w over it. False for a group ggml leaves empty.
bool Iq1sPrepare(const float* xb, const float* weight, Iq1Sort sort, int* order, Iq1sSums& sums) {
  constexpr int n = kIq1sGroup;
  sums.max = MaxMagnitude(xb, n);
  sums.sumx[0] = sums.sumw[0] = 0;
  if (sums.max < kGroupMaxEpsIq1S) {
    for (int j = 0; j < n; ++j) sums.sumx[j + 1] = sums.sumw[j + 1] = 0;
    return false;
  }
  sort(xb, n, order);
  for (int j = 0; j < n; ++j) {
    const int i = order[j];
    sums.sumx[j + 1] = sums.sumx[j] + weight[i] * xb[i];
    sums.sumw[j + 1] = sums.sumw[j] + weight[i];
  }
  return true;
}

// One iq1_s group after the search: the split's levels, flipped to a
// positive scale, moved onto the grid, the scale refitted after a move.
// False for a group ggml leaves empty (no split scored).
bool Iq1sFinish(const GridSearch& grid, const float* xb, const float* weight, const int* order,
                const Iq1Split& split, Iq1NeighbourSearch neighbour, Group& g) {
  constexpr int n = kIq1sGroup;
  if (split.i1 < 0 || split.i2 < 0 || split.shift == 0) return false;
  float scale = split.scale;
  int shift = split.shift;
  int8_t L[n];
  SplitLevels(order, n, split.i1, split.i2, L);
  if (scale < 0) {
    for (int j = 0; j < n; ++j) L[j] = static_cast<int8_t>(2 - L[j]);
    scale = -scale;
    shift = -shift;
  }
  const float* xx = shift == 1 ? kUp : kDown;
  const auto xx_of = [xx](int) { return xx; };
  if (!OctetsToGrid(grid, 4, xb, weight, scale, xx_of, neighbour, L, g.index)) {
    scale = RefitScale(grid, 4, xb, weight, xx_of, g.index, scale);
  }
  g.scale = scale;
  g.shift = shift;
  return true;
}

// iq1_m's shift combinations: k = 0 (+, +), 1 (+, -), 2 (-, +), 3 (-, -) for
// (first octet, second octet).
const float* Iq1mShift(int k, int octet) {
  const bool up = octet == 0 ? k < 2 : k % 2 == 0;
  return up ? kUp : kDown;
}

// One iq1_m group of 16, before the search: its order and the terms ggml
// adds, per sorted position, level and combination (formed once: the same
// products each time). False for a group ggml leaves empty.
bool Iq1mPrepare(const float* xb, const float* weight, Iq1Sort sort, int* order, Iq1mTerms& t) {
  constexpr int n = kIq1mGroup;
  t.max = MaxMagnitude(xb, n);
  if (t.max < kGroupMaxEpsIq1M) {
    std::memset(t.tx, 0, sizeof(t.tx));
    std::memset(t.tq, 0, sizeof(t.tq));
    return false;
  }
  sort(xb, n, order);
  for (int j = 0; j < n; ++j) {
    const int i = order[j];
    const int octet = i < n / 2 ? 0 : 1;
    for (int lv = 0; lv < 3; ++lv) {
      for (int k = 0; k < 4; ++k) {
        const float v = Iq1mShift(k, octet)[lv];
        t.tx[j][lv][k] = weight[i] * v * xb[i];
        t.tq[j][lv][k] = weight[i] * v * v;
      }
    }
  }
  return true;
}

// One iq1_m group after the search, as Iq1sFinish.
bool Iq1mFinish(const GridSearch& grid, const float* xb, const float* weight, const int* order,
                const Iq1Split& split, Iq1NeighbourSearch neighbour, Group& g) {
  constexpr int n = kIq1mGroup;
  if (split.i1 < 0 || split.i2 < 0 || split.shift < 0) return false;
  float scale = split.scale;
  int best_k = split.shift;
  int8_t L[n];
  SplitLevels(order, n, split.i1, split.i2, L);
  if (scale < 0) {
    for (int j = 0; j < n; ++j) L[j] = static_cast<int8_t>(2 - L[j]);
    scale = -scale;
    best_k = 3 - best_k;  // both shifts flip
  }
  const auto xx_of = [best_k](int octet) { return Iq1mShift(best_k, octet); };
  if (!OctetsToGrid(grid, 2, xb, weight, scale, xx_of, neighbour, L, g.index)) {
    scale = RefitScale(grid, 2, xb, weight, xx_of, g.index, scale);
  }
  g.scale = scale;
  g.shift = best_k;
  return true;
}

int ScaleCode3(float id, float scale) {
  const int l = NearestInt(0.5f * (id * scale - 1));
  return l < 0 ? 0 : l > 7 ? 7 : l;
}

// Decoded octet: dl * (level value + delta).
void DecodeOctet(float dl, uint16_t point, float delta, float* y) {
  for (int j = 0; j < 8; ++j) y[j] = dl * (kIq1LevelValues[PointLevel(point, j)] + delta);
}

}  // namespace

// ggml qsorts (value, index) pairs comparing the value only; glibc's qsort
// sorts arrays this small with a stable merge sort, so equal values (-0 and
// +0 among them) keep index order. An insertion sort is stable too and
// gives the same order.
void Iq1SortScalar(const float* xb, int n, int* order) {
  for (int j = 0; j < n; ++j) {
    int at = j;
    while (at > 0 && xb[j] < xb[order[at - 1]]) {
      order[at] = order[at - 1];
      --at;
    }
    order[at] = j;
  }
}

// ggml falls back to a scan of the whole grid when no distance is below
// FLT_MAX (a scan that reads past the octet); with finite sums the first
// neighbour always qualifies, and that is taken when none does.
int Iq1BestNeighbourScalar(const GridSearch& grid, uint16_t key, const float* xval,
                           const float* weight, float scale, const float* xx, int8_t* L) {
  const std::span<const uint16_t> neighbours = grid.Neighbours(key);
  float best_score = FLT_MAX;
  int best = -1;
  for (const uint16_t p : neighbours) {
    const uint8_t* level = grid.Levels(p);
    float d2 = 0;
    for (int i = 0; i < 8; ++i) {
      const float q = xx[level[i]];
      const float w = weight[i];
      const float diff = scale * q - xval[i];
      d2 += w * diff * diff;
    }
    if (d2 < best_score) {
      best_score = d2;
      best = p;
    }
  }
  if (best < 0) best = neighbours[0];
  const uint8_t* level = grid.Levels(best);
  for (int i = 0; i < 8; ++i) L[i] = static_cast<int8_t>(level[i]);
  return best;
}

// Iq1sSplitsScalar: every split of each group scored in ggml's order (i1,
// then i2, then shift up before down), the first best kept.
void Iq1sSplitsScalar(int groups, const Iq1sSums* sums, Iq1Split* best) {
  constexpr int n = kIq1sGroup;
  for (int g = 0; g < groups; ++g) {
    const float* sumx = sums[g].sumx;
    const float* sumw = sums[g].sumw;
    float best_score = -FLT_MAX, scale = sums[g].max;
    int besti1 = -1, besti2 = -1, best_shift = 0;
    for (int i1 = 0; i1 <= n; ++i1) {
      for (int i2 = i1; i2 <= n; ++i2) {
        for (const int shift : {1, -1}) {
          const float* xx = shift == 1 ? kUp : kDown;
          const float sumqx = (sumx[i1] - sumx[0]) * xx[0] + (sumx[i2] - sumx[i1]) * xx[1] +
                              (sumx[n] - sumx[i2]) * xx[2];
          const float sumq2 = (sumw[i1] - sumw[0]) * xx[0] * xx[0] +
                              (sumw[i2] - sumw[i1]) * xx[1] * xx[1] +
                              (sumw[n] - sumw[i2]) * xx[2] * xx[2];
          if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2) {
            scale = sumqx / sumq2;
            best_score = scale * sumqx;
            besti1 = i1;
            besti2 = i2;
            best_shift = shift;
          }
        }
      }
    }
    best[g] = {besti1, besti2, best_shift, scale};
  }
}

// ggml sums each split from zero over j = 0..n-1 in order (level 0 before
// i1, 1 before i2, 2 after). The sums through i1 and through i2 are
// prefixes shared by later splits, so they are carried along; only the
// level-2 tail is added afresh. Same additions, same order.
void Iq1mSplitsScalar(int groups, const Iq1mTerms* terms, Iq1Split* best) {
  constexpr int n = kIq1mGroup;
  for (int g = 0; g < groups; ++g) {
    const auto& tx = terms[g].tx;
    const auto& tq = terms[g].tq;
    float best_score = -FLT_MAX, scale = terms[g].max;
    int besti1 = -1, besti2 = -1, best_k = -1;
    float low_x[4] = {}, low_q[4] = {};
    for (int i1 = 0; i1 <= n; ++i1) {
      if (i1 > 0) {
        for (int k = 0; k < 4; ++k) {
          low_x[k] += tx[i1 - 1][0][k];
          low_q[k] += tq[i1 - 1][0][k];
        }
      }
      float mid_x[4], mid_q[4];
      std::memcpy(mid_x, low_x, sizeof(mid_x));
      std::memcpy(mid_q, low_q, sizeof(mid_q));
      for (int i2 = i1; i2 <= n; ++i2) {
        if (i2 > i1) {
          for (int k = 0; k < 4; ++k) {
            mid_x[k] += tx[i2 - 1][1][k];
            mid_q[k] += tq[i2 - 1][1][k];
          }
        }
        float sumqx[4], sumq2[4];
        std::memcpy(sumqx, mid_x, sizeof(sumqx));
        std::memcpy(sumq2, mid_q, sizeof(sumq2));
        for (int j = i2; j < n; ++j) {
          for (int k = 0; k < 4; ++k) {
            sumqx[k] += tx[j][2][k];
            sumq2[k] += tq[j][2][k];
          }
        }
        for (int k = 0; k < 4; ++k) {
          if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best_score * sumq2[k]) {
            scale = sumqx[k] / sumq2[k];
            best_score = scale * sumqx[k];
            besti1 = i1;
            besti2 = i2;
            best_k = k;
          }
        }
      }
    }
    best[g] = {besti1, besti2, best_k, scale};
  }
}

constexpr Iq1Searches kScalar = {Iq1SortScalar, Iq1sSplitsScalar, Iq1mSplitsScalar,
                                 Iq1BestNeighbourScalar};

// qw must not be null (ggml asserts; Encode refuses first).
void EncodeIq1S(const float* x, const float* qw, uint8_t* out, uint64_t& /*clipped: none*/) {
  EncodeIq1SWith(x, qw, 1, out, kScalar);
}

void EncodeIq1SWith(const float* x, const float* qw, size_t blocks, uint8_t* out,
                    const Iq1Searches& searches) {
  assert(qw != nullptr);
  const GridSearch& grid = SearchTables(GridKind::kIq1);
  constexpr int kGroups = 8 * kIq1sBatchBlocks;
  float weight[kGroups][kIq1sGroup];
  int order[kGroups][kIq1sGroup];
  bool scored[kGroups];
  Iq1sSums sums[kGroups];
  Iq1Split split[kGroups];
  for (size_t b0 = 0; b0 < blocks; b0 += kIq1sBatchBlocks) {
    const int batch =
        static_cast<int>(blocks - b0 < kIq1sBatchBlocks ? blocks - b0 : kIq1sBatchBlocks);
    const float* xs = x + b0 * kSuperBlock;
    const float* qws = qw + b0 * kSuperBlock;
    for (int bb = 0; bb < batch; ++bb) {
      const float* xblock = xs + bb * kSuperBlock;
      const float sigma2 = 2 * SumSquares(xblock) / kSuperBlock;
      for (int ib = 0; ib < 8; ++ib) {
        const int gi = 8 * bb + ib;
        const float* xb = xblock + 32 * ib;
        GroupWeights(32, qws + bb * kSuperBlock + 32 * ib, xb, sigma2, weight[gi]);
        scored[gi] = Iq1sPrepare(xb, weight[gi], searches.sort, order[gi], sums[gi]);
      }
    }
    searches.s_splits(8 * batch, sums, split);
    for (int bb = 0; bb < batch; ++bb) {
      const float* xblock = xs + bb * kSuperBlock;
      BlockIq1S b;
      std::memset(&b, 0, sizeof(b));
      b.d = ToHalf(0.f);
      float scales[8];
      int shifts[8];
      float max_scale = 0;
      for (int ib = 0; ib < 8; ++ib) {
        const int gi = 8 * bb + ib;
        Group g;
        if (!scored[gi] || !Iq1sFinish(grid, xblock + 32 * ib, weight[gi], order[gi], split[gi],
                                       searches.neighbour, g)) {
          scales[ib] = 0;
          shifts[ib] = 1;
          continue;
        }
        uint16_t h = 0;
        for (int k = 0; k < 4; ++k) {
          b.qs[4 * ib + k] = static_cast<uint8_t>(g.index[k] & 255);
          h = static_cast<uint16_t>(h | (g.index[k] >> 8) << 3 * k);
        }
        b.qh[ib] = h;
        scales[ib] = g.scale;
        shifts[ib] = g.shift;
        max_scale = Max(max_scale, g.scale);
      }
      if (max_scale != 0) {
        const float d = max_scale / 15;
        b.d = ToHalf(d * 1.125f);  // ggml's fudge factor
        const float id = 1 / d;
        for (int ib = 0; ib < 8; ++ib) {
          int l = ScaleCode3(id, scales[ib]);
          if (shifts[ib] == -1) l |= 8;
          b.qh[ib] = static_cast<uint16_t>(b.qh[ib] | l << 12);
        }
      }
      StoreBlock(b, out + (b0 + bb) * sizeof(BlockIq1S));
    }
  }
}

// With qw null, ggml's weights are x^2.
void EncodeIq1M(const float* x, const float* qw, uint8_t* out, uint64_t& /*clipped: none*/) {
  EncodeIq1MWith(x, qw, out, kScalar);
}

void EncodeIq1MWith(const float* x, const float* qw, uint8_t* out, const Iq1Searches& searches) {
  const GridSearch& grid = SearchTables(GridKind::kIq1);
  BlockIq1M b;
  std::memset(&b, 0, sizeof(b));
  float scales[16];
  int shifts[16];
  float max_scale = 0;
  const float sigma2 = 2 * SumSquares(x) / kSuperBlock;
  float weight[16][kIq1mGroup];
  int order[16][kIq1mGroup];
  bool scored[16];
  Iq1mTerms terms[16];
  Iq1Split split[16];
  for (int ib = 0; ib < 16; ++ib) {
    const float* xb = x + 16 * ib;
    GroupWeights(16, qw == nullptr ? nullptr : qw + 16 * ib, xb, sigma2, weight[ib]);
    scored[ib] = Iq1mPrepare(xb, weight[ib], searches.sort, order[ib], terms[ib]);
  }
  searches.m_splits(16, terms, split);
  for (int ib = 0; ib < 16; ++ib) {
    Group g;
    if (!scored[ib] ||
        !Iq1mFinish(grid, x + 16 * ib, weight[ib], order[ib], split[ib], searches.neighbour, g)) {
      scales[ib] = 0;
      shifts[ib] = 0;
      continue;
    }
    b.qs[2 * ib] = static_cast<uint8_t>(g.index[0] & 255);
    b.qs[2 * ib + 1] = static_cast<uint8_t>(g.index[1] & 255);
    b.qh[ib] = static_cast<uint8_t>((g.index[0] >> 8) | (g.index[1] >> 8) << 4);
    scales[ib] = g.scale;
    shifts[ib] = g.shift;
    max_scale = Max(max_scale, g.scale);
  }
  if (max_scale == 0) {
    StoreBlock(b, out);
    return;
  }
  // The group scales against max_scale / 15; then the super-block scale is
  // refitted over the whole block as coded (empty groups included, at
  // point 0) and stored, times ggml's fudge factor, in the 4 top nibbles.
  constexpr uint8_t kShiftMasks[4] = {0x00, 0x80, 0x08, 0x88};
  uint16_t sc[4] = {};
  float d = max_scale / 15;
  const float id = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int ib = 0; ib < 16; ++ib) {
    const int l = ScaleCode3(id, scales[ib]);
    sc[ib / 4] = static_cast<uint16_t>(sc[ib / 4] | l << 3 * (ib % 4));
    b.qh[ib] = static_cast<uint8_t>(b.qh[ib] | kShiftMasks[shifts[ib]]);
    const float* xb = x + 16 * ib;
    for (int k = 0; k < 2; ++k) {
      const float* xx = Iq1mShift(shifts[ib], k);
      const int index = b.qs[2 * ib + k] + ((b.qh[ib] << (8 - 4 * k)) & 0x700);
      const uint16_t point = kIq1Points[index];
      for (int j = 0; j < 8; ++j) {
        const float w = weight[ib][8 * k + j];
        const float q = xx[PointLevel(point, j)] * (2 * l + 1);
        sumqx += w * q * xb[8 * k + j];
        sumq2 += w * q * q;
      }
    }
  }
  if (sumq2 > 0) d = sumqx / sumq2;
  const uint16_t s = ToHalf(d * 1.1125f);  // ggml's fudge factor
  sc[0] = static_cast<uint16_t>(sc[0] | (s & 0x000f) << 12);
  sc[1] = static_cast<uint16_t>(sc[1] | (s & 0x00f0) << 8);
  sc[2] = static_cast<uint16_t>(sc[2] | (s & 0x0f00) << 4);
  sc[3] = static_cast<uint16_t>(sc[3] | (s & 0xf000));
  std::memcpy(b.scales, sc, sizeof(sc));
  StoreBlock(b, out);
}

void DecodeIq1S(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockIq1S>(in);
  const float d = Half(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const uint16_t qh = b.qh[ib];
    const float dl = d * (2 * ((qh >> 12) & 7) + 1);
    const float delta = qh & 0x8000 ? -kIq1Delta : kIq1Delta;
    for (int k = 0; k < 4; ++k) {
      const int index = b.qs[4 * ib + k] | (((qh >> 3 * k) & 7) << 8);
      DecodeOctet(dl, kIq1Points[index], delta, y);
      y += 8;
    }
  }
}

void DecodeIq1M(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockIq1M>(in);
  uint16_t sc[4];
  std::memcpy(sc, b.scales, sizeof(sc));
  const uint16_t scale = static_cast<uint16_t>((sc[0] >> 12) | ((sc[1] >> 8) & 0x00f0) |
                                               ((sc[2] >> 4) & 0x0f00) | (sc[3] & 0xf000));
  const float d = Half(scale);
  for (int ib = 0; ib < 8; ++ib) {
    const float dl[2] = {d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 0)) & 0x7) + 1),
                         d * (2 * ((sc[ib / 2] >> (6 * (ib % 2) + 3)) & 0x7) + 1)};
    for (int k = 0; k < 4; ++k) {
      const uint8_t qh = b.qh[2 * ib + k / 2];
      const int shift = 4 * (k % 2);
      const int index = b.qs[4 * ib + k] | (((qh >> shift) & 7) << 8);
      const float delta = (qh >> (shift + 3)) & 1 ? -kIq1Delta : kIq1Delta;
      DecodeOctet(dl[k / 2], kIq1Points[index], delta, y);
      y += 8;
    }
  }
}

}  // namespace lowp::ggml::internal
