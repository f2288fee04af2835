// ggml's 3-bit grid i-quants: iq3_xxs (3.0625 bits an element) and iq3_s
// (3.4375). Each 32-element group has one scale, each 4 elements one point of
// a grid of allowed level patterns (ggml_iq3_grids.h), signs apart.
//
// Encode is quantize_row_iq3_xxs_impl(256, ...) and quantize_row_iq3_s_impl
// (32, ...) of ggml commit d99724f2, with the importance a block is given or
// ggml's x^2 weights without one: for each group, 2 steps + 1 trial scales,
// at each the levels nearest the scaled magnitudes, a point off the grid
// replaced by its best neighbour, the fit with the largest weighted
// (sum q x)^2 / sum q^2 kept (strict `>`: the first of equal fits); then the
// points off the grid re-picked at that scale and the scale refitted. The
// super-block's fp16 scale is the largest group scale / 31 times a fudge
// factor, group scales in 4 bits. Every float32 operation is ggml's, in its
// order. Decode is dequantize_row_iq3_xxs / dequantize_row_iq3_s.
//
// `clipped` counts the elements whose magnitude is beyond the largest value
// their group decodes to (the grid's top level times the group's decoded
// scale): the grid search has no single clamp to count, so lowp counts what
// a clamp would mean, from the bytes written.
//
// Where ggml aborts, lowp goes on: an off-grid point none of whose neighbours
// is nearer than FLT_MAX (the weighted squared distances, about |x|^3
// without importance, overflow from |x| near 1e12) takes its first
// neighbour. Below that nothing aborts: every point written is on the grid
// (ggml's "Oops" check cannot fire) and the scales are not NaN.
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "codecs/ggml_blocks.h"
#include "codecs/ggml_iq3_grids.h"
#include "codecs/ggml_iq3_search.h"
#include "codecs/ggml_ops.h"

namespace lowp::ggml::internal {
namespace {

constexpr int kGroup = 32;                     // elements per group scale
constexpr int kGroups = kSuperBlock / kGroup;  // 8
constexpr int kGroupPoints = kGroup / 4;       // grid points per group
constexpr int kTopLevel = kIq3Levels - 1;      // 7, value 2 * 7 + 1 = 15
constexpr float kXxsGroupMaxEps = 1e-8f;       // GROUP_MAX_EPS_IQ3_XXS

using Variant = Iq3Variant;

// The weights of one group: the importance qw times sqrt(sigma2 + x^2) with
// sigma2 = 2 mean(x^2) over the super-block, or x^2 without importance; and
// their square roots, which the neighbour search weighs distances by.
void GroupWeights(const float* xb, const float* qw, float sigma2, float* weight, float* waux) {
  if (qw != nullptr) {
    for (int i = 0; i < kGroup; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
  } else {
    for (int i = 0; i < kGroup; ++i) weight[i] = xb[i] * xb[i];
  }
  for (int i = 0; i < kGroup; ++i) waux[i] = std::sqrt(weight[i]);
}

float Sigma2(const float* x) {
  float sumx2 = 0;
  for (int i = 0; i < kSuperBlock; ++i) sumx2 += x[i] * x[i];
  return 2 * sumx2 / kSuperBlock;
}

// The levels nearest id * xval (nearest_int(0.5f * (id * x - 1)) clamped to
// 0..7) of 4 elements into L, and the point they make.
uint16_t NearestPoint(const float* xval, float id, int8_t* L) {
  uint16_t u = 0;
  for (int i = 0; i < 4; ++i) {
    int l = NearestInt(0.5f * (id * xval[i] - 1));
    l = l < 0 ? 0 : l > kTopLevel ? kTopLevel : l;
    L[i] = static_cast<int8_t>(l);
    u = static_cast<uint16_t>(u | l << 3 * i);
  }
  return u;
}

void LevelsOf(const Iq3Lattice& lattice, int index, int8_t* L) {
  const int8_t* pg = lattice.Values(index);
  for (int i = 0; i < 4; ++i) L[i] = static_cast<int8_t>((pg[i] - 1) / 2);
}

// iq3_find_best_neighbour: of the neighbours of point u, the first with the
// least sum waux (scale q - x)^2; its levels into L.
int BestNeighbour(const Iq3Lattice& lattice, uint16_t u, const float* xval, const float* waux,
                  float scale, int8_t* L) {
  const std::span<const uint16_t> neighbours = lattice.Neighbours(u);
  float best_d2 = FLT_MAX;
  int grid_index = neighbours[0];  // ggml aborts when no distance is below FLT_MAX
  for (const uint16_t j : neighbours) {
    const int8_t* pg = lattice.Values(j);
    float d2 = 0;
    for (int i = 0; i < 4; ++i) {
      const float q = pg[i];
      const float diff = scale * q - xval[i];
      d2 += waux[i] * diff * diff;
    }
    if (d2 < best_d2) {
      best_d2 = d2;
      grid_index = j;
    }
  }
  LevelsOf(lattice, grid_index, L);
  return grid_index;
}

// The on-grid point nearest id * xval: the nearest levels when the grid has
// them, else their best neighbour at `scale`. Returns whether the nearest
// levels were on the grid.
bool PickPoint(const Iq3Lattice& lattice, const float* xval, const float* waux, float id,
               float scale, int8_t* L) {
  const uint16_t u = NearestPoint(xval, id, L);
  if (lattice.IndexOf(u) >= 0) return true;
  BestNeighbour(lattice, u, xval, waux, scale, L);
  return false;
}

// sum w x q and sum w q^2 with q = 2 l + 1, in element order.
void WeightedSums(const float* weight, const float* xval, const int8_t* L, float& sumqx,
                  float& sumq2) {
  sumqx = 0;
  sumq2 = 0;
  for (int i = 0; i < kGroup; ++i) {
    const float w = weight[i];
    const float q = 2 * L[i] + 1;
    sumqx += w * xval[i] * q;
    sumq2 += w * q * q;
  }
}

// The scale search of one group of magnitudes xval whose largest is `max`
// (> 0 or NaN), given its trials: L gets the levels of the best fit, all on
// the grid. Returns the group's scale (negative only in ggml's "should never
// happen" case).
float FitGroup(const Variant& v, const float* xval, const float* weight, const float* waux,
               float max, const Iq3Trials& trials, int8_t* L) {
  const Iq3Lattice& lattice = v.lattice;
  constexpr int kMaxQ = kIq3Levels;
  float best = 0;
  float scale = max / (2 * kMaxQ - 1);
  // iq3_xxs starts with every point taken as on the grid, iq3_s with none:
  // that decides whether a group no trial improved gets refitted.
  bool on_grid[kGroupPoints];
  for (bool& b : on_grid) b = !v.refit_all;
  std::memset(L, 0, kGroup);
  for (int t = 0; t < 2 * v.steps + 1; ++t) {
    const float sumqx = trials.sumqx[t], sumq2 = trials.sumq2[t];
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::memcpy(L, trials.L[t], kGroup);
      std::memcpy(on_grid, trials.on_grid[t], sizeof(on_grid));
    }
  }
  int off_grid = 0;
  for (const bool b : on_grid) off_grid += !b;
  if (off_grid > 0 && scale > 0) {
    const float id = 1 / scale;
    for (int k = 0; k < kGroupPoints; ++k) {
      if (!v.refit_all && on_grid[k]) continue;
      PickPoint(lattice, xval + 4 * k, waux + 4 * k, id, scale, L + 4 * k);
    }
    float sumqx, sumq2;
    WeightedSums(weight, xval, L, sumqx, sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  return scale;
}

// The grid index of the 4 levels at L (FitGroup leaves only grid points).
int PointIndex(const Iq3Lattice& lattice, const int8_t* L) {
  uint16_t u = 0;
  for (int i = 0; i < 4; ++i) u = static_cast<uint16_t>(u | L[i] << 3 * i);
  return lattice.IndexOf(u);
}

// The 4-bit group scales: nearest_int(0.5f * (scale / d - 1)) clamped.
uint32_t ScaleCode(float id, float scale) {
  const int l = NearestInt(0.5f * (id * scale - 1));
  return static_cast<uint32_t>(l < 0 ? 0 : l > 15 ? 15 : l);
}

// Elements of the group beyond top * db in magnitude.
uint64_t CountBeyond(const float* xb, float top) {
  uint64_t n = 0;
  for (int i = 0; i < kGroup; ++i) n += std::fabs(xb[i]) > top;
  return n;
}

// iq3_xxs stores 7 signs per 8 elements; the eighth follows from an even
// count of negatives. When the count is odd ggml flips the sign of the
// element of least weight * x^2 (the first on ties) and quantizes its
// magnitude as negative.
void XxsMagnitudes(const float* xb, const float* weight, float* xval, uint8_t* signs) {
  for (int k = 0; k < kGroup / 8; ++k) {
    int nflip = 0;
    uint8_t s = 0;
    for (int i = 0; i < 8; ++i) {
      if (xb[8 * k + i] >= 0) {
        xval[8 * k + i] = xb[8 * k + i];
      } else {
        xval[8 * k + i] = -xb[8 * k + i];
        ++nflip;
        s = static_cast<uint8_t>(s | 1 << i);
      }
    }
    if (nflip % 2) {
      int imin = 0;
      float min = weight[8 * k] * xb[8 * k] * xb[8 * k];
      for (int i = 1; i < 8; ++i) {
        const float ax = weight[8 * k + i] * xb[8 * k + i] * xb[8 * k + i];
        if (ax < min) {
          min = ax;
          imin = i;
        }
      }
      xval[8 * k + imin] = -xval[8 * k + imin];
      s = static_cast<uint8_t>(s ^ 1 << imin);
    }
    signs[k] = s & 127;
  }
}

void SMagnitudes(const float* xb, float* xval, uint8_t* signs) {
  for (int k = 0; k < kGroup / 8; ++k) {
    uint8_t s = 0;
    for (int i = 0; i < 8; ++i) {
      if (xb[8 * k + i] >= 0) {
        xval[8 * k + i] = xb[8 * k + i];
      } else {
        xval[8 * k + i] = -xb[8 * k + i];
        s = static_cast<uint8_t>(s | 1 << i);
      }
    }
    signs[k] = s;
  }
}

float MaxOf(const float* xval) {
  float max = xval[0];
  for (int i = 1; i < kGroup; ++i) max = Max(max, xval[i]);
  return max;
}

// The value of one element: db * grid value * sign, as ggml multiplies.
float Element(float db, uint8_t value, bool negative) {
  return db * value * (negative ? -1.f : 1.f);
}

}  // namespace

void Iq3TrialsScalar(const Iq3Variant& v, const float* xval, const float* weight,
                     const float* waux, float max, Iq3Trials* trials) {
  for (int is = -v.steps; is <= v.steps; ++is) {
    const int t = is + v.steps;
    const float id = Iq3TrialId(is, max);
    const float this_scale = 1 / id;
    for (int k = 0; k < kGroupPoints; ++k) {
      trials->on_grid[t][k] =
          PickPoint(v.lattice, xval + 4 * k, waux + 4 * k, id, this_scale, trials->L[t] + 4 * k);
    }
    WeightedSums(weight, xval, trials->L[t], trials->sumqx[t], trials->sumq2[t]);
  }
}

void EncodeIq3Xxs(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  EncodeIq3XxsWith(x, qw, out, clipped, Iq3TrialsScalar);
}

void EncodeIq3S(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  EncodeIq3SWith(x, qw, out, clipped, Iq3TrialsScalar);
}

void EncodeIq3XxsWith(const float* x, const float* qw, uint8_t* out, uint64_t& clipped,
                      Iq3TrialSearch search) {
  const Variant v{Iq3Lattice::Xxs(), 15, false};
  Iq3Trials trials;
  BlockIq3Xxs b;
  std::memset(&b, 0, sizeof(b));
  uint32_t words[kGroups] = {};
  float scales[kGroups];
  float max_scale = 0;
  const float sigma2 = Sigma2(x);
  for (int ib = 0; ib < kGroups; ++ib) {
    const float* xb = x + kGroup * ib;
    float weight[kGroup], waux[kGroup], xval[kGroup];
    uint8_t signs[kGroup / 8];
    int8_t L[kGroup];
    GroupWeights(xb, qw == nullptr ? nullptr : qw + kGroup * ib, sigma2, weight, waux);
    XxsMagnitudes(xb, weight, xval, signs);
    const float max = MaxOf(xval);
    if (max < kXxsGroupMaxEps) {  // grid indices 0, signs 0
      scales[ib] = 0;
      continue;
    }
    search(v, xval, weight, waux, max, &trials);
    float scale = FitGroup(v, xval, weight, waux, max, trials, L);
    if (scale < 0) {  // ggml: "should never happen"; flips every sign to keep the scale unsigned
      scale = -scale;
      for (uint8_t& s : signs) s = static_cast<uint8_t>(~s & 127);
    }
    for (int k = 0; k < kGroupPoints; ++k) {
      b.qs[kGroupPoints * ib + k] = static_cast<uint8_t>(PointIndex(v.lattice, L + 4 * k));
    }
    words[ib] = signs[0] | signs[1] << 7 | signs[2] << 14 | static_cast<uint32_t>(signs[3]) << 21;
    scales[ib] = scale;
    max_scale = Max(max_scale, scale);
  }
  if (!max_scale) {  // ggml zeroes the whole block
    std::memset(&b, 0, sizeof(b));
    StoreBlock(b, out);
    return;
  }
  const float d = max_scale / 31;
  b.d = ToHalf(d * 1.0125f);  // ggml's "small improvement via this fudge factor"
  const float id = 1 / d;
  const float dh = Half(b.d);
  for (int ib = 0; ib < kGroups; ++ib) {
    const uint32_t s = ScaleCode(id, scales[ib]);
    words[ib] |= s << 28;
    const float db = dh * (0.5f + s) * 0.5f;
    clipped += CountBeyond(x + kGroup * ib, db * kIq3XxsDecodeLevel[kTopLevel]);
  }
  std::memcpy(b.signs_and_scales, words, sizeof(words));
  StoreBlock(b, out);
}

void EncodeIq3SWith(const float* x, const float* qw, uint8_t* out, uint64_t& clipped,
                    Iq3TrialSearch search) {
  const Variant v{Iq3Lattice::S(), 9, true};
  Iq3Trials trials;
  BlockIq3S b;
  std::memset(&b, 0, sizeof(b));
  float scales[kGroups];
  float max_scale = 0;
  const float sigma2 = Sigma2(x);
  // ggml writes points and signs through cursors that a group of zeros does
  // not advance: the groups after it land one slot early (qh, indexed by
  // group, does not shift) and the last slots stay zero. The bytes are
  // ggml's, so lowp does the same.
  int qs_at = 0, signs_at = 0;
  for (int ib = 0; ib < kGroups; ++ib) {
    const float* xb = x + kGroup * ib;
    float weight[kGroup], waux[kGroup], xval[kGroup];
    uint8_t signs[kGroup / 8];
    int8_t L[kGroup];
    GroupWeights(xb, qw == nullptr ? nullptr : qw + kGroup * ib, sigma2, weight, waux);
    SMagnitudes(xb, xval, signs);
    const float max = MaxOf(xval);
    if (!max) {
      scales[ib] = 0;
      continue;
    }
    search(v, xval, weight, waux, max, &trials);
    float scale = FitGroup(v, xval, weight, waux, max, trials, L);
    if (scale < 0) {
      scale = -scale;
      for (uint8_t& s : signs) s = static_cast<uint8_t>(~s);
    }
    for (int k = 0; k < kGroupPoints; ++k) {
      const int index = PointIndex(v.lattice, L + 4 * k);
      b.qs[qs_at + k] = static_cast<uint8_t>(index & 255);
      b.qh[ib] = static_cast<uint8_t>(b.qh[ib] | (index >> 8) << k);
    }
    qs_at += kGroupPoints;
    std::memcpy(b.signs + signs_at, signs, sizeof(signs));
    signs_at += kGroup / 8;
    scales[ib] = scale;
    max_scale = Max(max_scale, scale);
  }
  if (!max_scale) {  // d and scales stay 0, what was written stays
    StoreBlock(b, out);
    return;
  }
  const float d = max_scale / 31;
  b.d = ToHalf(d * 1.033f);
  const float id = 1 / d;
  const float dh = Half(b.d);
  for (int ib = 0; ib < kGroups; ib += 2) {
    const uint32_t l1 = ScaleCode(id, scales[ib]), l2 = ScaleCode(id, scales[ib + 1]);
    b.scales[ib / 2] = static_cast<uint8_t>(l1 | l2 << 4);
    clipped += CountBeyond(x + kGroup * ib, dh * (1 + 2 * l1) * (2 * kTopLevel + 1));
    clipped += CountBeyond(x + kGroup * (ib + 1), dh * (1 + 2 * l2) * (2 * kTopLevel + 1));
  }
  StoreBlock(b, out);
}

// Both decoders go 8 elements at a time: one byte of signs (bit j: element
// j negative) over two grid points.
void DecodeIq3Xxs(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockIq3Xxs>(in);
  const float d = Half(b.d);
  const uint8_t* qs = b.qs;
  for (int ib = 0; ib < kGroups; ++ib) {
    uint32_t aux32;
    std::memcpy(&aux32, b.signs_and_scales + 4 * ib, sizeof(aux32));
    const float db = d * (0.5f + (aux32 >> 28)) * 0.5f;
    for (int m = 0; m < 4; ++m) {
      const uint8_t signs = EvenSigns((aux32 >> 7 * m) & 127);
      const Iq3DecodeGrid& grid1 = kIq3XxsGrid[qs[2 * m]];
      const Iq3DecodeGrid& grid2 = kIq3XxsGrid[qs[2 * m + 1]];
      for (int j = 0; j < 4; ++j) {
        y[j] = Element(db, grid1[j], signs & 1 << j);
        y[j + 4] = Element(db, grid2[j], signs & 1 << (j + 4));
      }
      y += 8;
    }
    qs += kGroupPoints;
  }
}

void DecodeIq3S(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockIq3S>(in);
  const float d = Half(b.d);
  const uint8_t* qs = b.qs;
  const uint8_t* signs = b.signs;
  for (int ib = 0; ib < kGroups; ++ib) {
    const float db = d * (1 + 2 * ((b.scales[ib / 2] >> 4 * (ib % 2)) & 0xf));
    for (int m = 0; m < 4; ++m) {
      // Points 2m and 2m + 1 take bits 2m and 2m + 1 of qh as their 9th bit.
      const Iq3DecodeGrid& grid1 = kIq3SGrid[qs[2 * m] | ((b.qh[ib] >> 2 * m) & 1) << 8];
      const Iq3DecodeGrid& grid2 = kIq3SGrid[qs[2 * m + 1] | ((b.qh[ib] >> (2 * m + 1)) & 1) << 8];
      for (int j = 0; j < 4; ++j) {
        y[j] = Element(db, grid1[j], signs[m] & 1 << j);
        y[j + 4] = Element(db, grid2[j], signs[m] & 1 << (j + 4));
      }
      y += 8;
    }
    qs += kGroupPoints;
    signs += 4;
  }
}

}  // namespace lowp::ggml::internal
