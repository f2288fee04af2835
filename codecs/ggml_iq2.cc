// ggml's 2-bit grid i-quants: iq2_xxs (2.06 bits per element), iq2_xs (2.31)
// and iq2_s (2.56), as quantize_row_iq2_{xxs,xs,s}_impl write them and
// dequantize_row_iq2_* read them.
//
// Each octet of 8 elements becomes one point of the type's codebook
// (magnitudes) plus 8 sign bits; a group of 32 (iq2_xxs) or 16 elements
// shares a 4-bit scale. The encoders search the group's scale over a few
// candidates: each candidate rounds every |x| to a level (q = 1, 3 or 5
// times the scale), and an octet whose levels are no point takes the best of
// that key's neighbours (ggml_iq2_grids.h). iq2_xxs and iq2_xs have no room
// for the eighth sign bit: before the search, ggml flips the sign of each
// octet's least important element when the count of negatives is odd.
//
// No element is counted in `clipped`: every octet takes a whole point of the
// grid, and ggml's clamp of a level to 0..2 is a step of its search, not the
// final code.
#include <cassert>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "codecs/ggml_blocks.h"
#include "codecs/ggml_iq2_grids.h"
#include "codecs/ggml_iq2_search.h"
#include "codecs/ggml_kquants_search.h"
#include "codecs/ggml_ops.h"

namespace lowp::ggml::internal {
namespace {

constexpr float kGroupMaxEps = 1e-15f;     // GROUP_MAX_EPS: iq2_xxs, iq2_xs
constexpr float kGroupMaxEpsIq2S = 1e-8f;  // GROUP_MAX_EPS_IQ2_S
// Levels 0, 1, 2 stand for q = 1, 3, 5 times the group's scale.
constexpr int kMaxQ = 3;
constexpr float kOdd[3] = {1, 3, 5};  // q of each level

// ggml's MAX macro, argument order kept (it decides which zero survives).

// nearest_int(0.5 (x / scale - 1)) clamped to a level: the level whose
// q = 2 l + 1 is nearest to x / scale.
int8_t Level(float id, float x) {
  const int l = NearestInt(0.5f * (id * x - 1));
  return static_cast<int8_t>(l < 0 ? 0 : l > kMaxQ - 1 ? kMaxQ - 1 : l);
}

uint16_t KeyOf(const int8_t* L) {
  uint16_t key = 0;
  for (int i = 0; i < 8; ++i) key = static_cast<uint16_t>(key | L[i] << 2 * i);
  return key;
}

// The point of an octet's levels. ggml aborts ("found point not on grid")
// when there is none; the search below only leaves levels of a point, for
// finite inputs, so the fallback is never taken.
int PointOf(const GridSearch& grid, const int8_t* L) {
  const int p = grid.Find(KeyOf(L));
  return p >= 0 ? p : 0;
}

float SumSquares(const float* x) {
  float sumx2 = 0;
  for (int i = 0; i < kSuperBlock; ++i) sumx2 += x[i] * x[i];
  return sumx2;
}

// ggml's weights with an importance vector: qw * sqrt(sigma2 + x^2); and
// their square roots, which weigh the neighbour search.
void ImportanceWeights(int n, const float* qw, const float* xb, float sigma2, float* weight,
                       float* waux) {
  for (int i = 0; i < n; ++i) weight[i] = qw[i] * std::sqrt(sigma2 + xb[i] * xb[i]);
  for (int i = 0; i < n; ++i) waux[i] = std::sqrt(weight[i]);
}

// One octet's magnitudes into xval and its sign bits (bit i: element i is
// negative), the count of negatives made even: with an odd count ggml flips
// the element of least weight * x^2 (the first on ties), whose xval then
// goes negative. Returns the 7 bits stored.
uint8_t FoldEvenSigns(const float* xb, const float* weight, float* xval) {
  int nflip = 0;
  uint8_t s = 0;
  for (int i = 0; i < 8; ++i) {
    if (xb[i] >= 0) {
      xval[i] = xb[i];
    } else {
      xval[i] = -xb[i];
      ++nflip;
      s = static_cast<uint8_t>(s | 1 << i);
    }
  }
  if (nflip % 2) {
    int imin = 0;
    float min = weight[imin] * xb[imin] * xb[imin];
    for (int i = 1; i < 8; ++i) {
      const float ax = weight[i] * xb[i] * xb[i];
      if (ax < min) {
        min = ax;
        imin = i;
      }
    }
    xval[imin] = -xval[imin];
    s = static_cast<uint8_t>(s ^ 1 << imin);
  }
  return s & 127;
}

// iq2_s keeps all 8 sign bits.
uint8_t AllSigns(const float* xb, float* xval) {
  uint8_t s = 0;
  for (int i = 0; i < 8; ++i) {
    if (xb[i] >= 0) {
      xval[i] = xb[i];
    } else {
      xval[i] = -xb[i];
      s = static_cast<uint8_t>(s | 1 << i);
    }
  }
  return s;
}

// iq2_find_best_neighbour: among the key's neighbours, the first point of
// least sum waux (scale q - x)^2; its levels into L.
void BestNeighbour(const GridSearch& grid, uint16_t key, const float* xval, const float* waux,
                   float scale, int8_t* L) {
  const std::span<const uint16_t> neighbours = grid.Neighbours(key);
  float best_d2 = FLT_MAX;
  int best = -1;
  for (const uint16_t p : neighbours) {
    const uint8_t* level = grid.Levels(p);
    float d2 = 0;
    for (int i = 0; i < 8; ++i) {
      const float q = kOdd[level[i]];
      const float diff = scale * q - xval[i];
      d2 += waux[i] * diff * diff;
    }
    if (d2 < best_d2) {
      best_d2 = d2;
      best = p;
    }
  }
  if (best < 0) best = neighbours[0];  // ggml asserts: only NaN or infinite distances get here
  const uint8_t* level = grid.Levels(best);
  for (int i = 0; i < 8; ++i) L[i] = static_cast<int8_t>(level[i]);
}

// Rounds an octet to levels at 1 / id and, when they are no point, moves it
// to the best neighbour at `scale`. Returns whether the rounding was on the
// grid.
bool OctetToGrid(const GridSearch& grid, const float* xval, const float* waux, float id,
                 float scale, int8_t* L) {
  for (int i = 0; i < 8; ++i) L[i] = Level(id, xval[i]);
  const uint16_t key = KeyOf(L);
  if (grid.Find(key) >= 0) return true;
  BestNeighbour(grid, key, xval, waux, scale, L);
  return false;
}

// sum w x q and sum w q^2 over n elements at levels L (q = 2 l + 1).
void LevelSums(int n, const float* weight, const float* xval, const int8_t* L, float& sumqx,
               float& sumq2) {
  sumqx = 0;
  sumq2 = 0;
  for (int i = 0; i < n; ++i) {
    const float w = weight[i];
    const float q = kOdd[L[i]];
    sumqx += w * xval[i] * q;
    sumq2 += w * q * q;
  }
}

// An iq2_xxs group of 32: the scale from make_qp_quants, then 13 candidates
// around it; the best candidate's scale rounds the octets once more. False
// for a group ggml leaves empty (all codes zero, scale 0). The scale may come
// out negative (a flipped element can outweigh the rest): the caller flips.
bool Iq2XxsGroup(const GridSearch& grid, const float* xval, const float* weight, const float* waux,
                 Iq2TrialSearch search, int8_t* L, float& scale) {
  float max = xval[0];
  for (int i = 1; i < 32; ++i) max = Max(max, xval[i]);
  if (max < kGroupMaxEps) return false;
  uint8_t qp_levels[32];  // make_qp_quants' levels (0..4, or 255 for a negative x): unused
  scale = MakeQpQuants(32, kMaxQ + 1, xval, weight, qp_levels);  // ggml_kquants_search.h
  const float eff_max = scale * kMaxQ;
  if (eff_max <= 0) return false;
  std::memset(L, 0, 32);  // ggml leaves make_qp_quants' levels here; both paths below replace them
  float best = 0;
  Iq2Trials trials;
  search(grid, 4, 6, eff_max, xval, weight, waux, &trials);
  for (int t = 0; t < 13; ++t) {
    const float sumqx = trials.sumqx[t], sumq2 = trials.sumq2[t];
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::memcpy(L, trials.L[t], 32);
    }
  }
  if (scale > 0) {
    const float id = 1 / scale;
    for (int k = 0; k < 4; ++k) OctetToGrid(grid, xval + 8 * k, waux + 8 * k, id, scale, L + 8 * k);
    float sumqx, sumq2;
    LevelSums(32, weight, xval, L, sumqx, sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  return true;
}

// An iq2_xs or iq2_s group of 16: 19 candidate scales around max / 5; when
// the best one moved an octet to a neighbour, that octet (only) is rounded
// again at the best scale. False for a group ggml leaves empty.
bool Group16(const GridSearch& grid, float eps, const float* xval, const float* weight,
             const float* waux, Iq2TrialSearch search, int8_t* L, float& scale) {
  float max = xval[0];
  for (int i = 1; i < 16; ++i) max = Max(max, xval[i]);
  std::memset(L, 0, 16);
  if (max < eps) return false;
  float best = 0;
  scale = max / (2 * kMaxQ - 1);
  bool on_grid[2] = {true, true};
  Iq2Trials trials;
  search(grid, 2, 9, max, xval, weight, waux, &trials);
  for (int t = 0; t < 19; ++t) {
    const float sumqx = trials.sumqx[t], sumq2 = trials.sumq2[t];
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      scale = sumqx / sumq2;
      best = scale * sumqx;
      std::memcpy(L, trials.L[t], 16);
      on_grid[0] = trials.on_grid[t][0];
      on_grid[1] = trials.on_grid[t][1];
    }
  }
  if ((!on_grid[0] || !on_grid[1]) && scale > 0) {
    const float id = 1 / scale;
    for (int k = 0; k < 2; ++k) {
      if (!on_grid[k]) OctetToGrid(grid, xval + 8 * k, waux + 8 * k, id, scale, L + 8 * k);
    }
    float sumqx, sumq2;
    LevelSums(16, weight, xval, L, sumqx, sumq2);
    if (sumq2 > 0) scale = sumqx / sumq2;
  }
  return true;
}

// The 4-bit group scale against d = max_scale / 31: nearest_int(0.5 (s / d - 1)).
int GroupScaleCode(float id, float scale) {
  const int l = NearestInt(0.5f * (id * scale - 1));
  return l < 0 ? 0 : l > 15 ? 15 : l;
}

// Decoded octet: dl * value * sign, in ggml's order.
void DecodeOctet(float dl, uint16_t point, uint8_t signs, float* y) {
  for (int j = 0; j < 8; ++j) {
    const float value = kIq2LevelValues[PointLevel(point, j)];
    y[j] = dl * value * (SignBit(signs, j) ? -1.f : 1.f);
  }
}

}  // namespace

void Iq2TrialsScalar(const GridSearch& grid, int octets, int steps, float max, const float* xval,
                     const float* weight, const float* waux, Iq2Trials* trials) {
  for (int is = -steps; is <= steps; ++is) {
    const int t = is + steps;
    const float id = Iq2TrialId(is, max);
    const float this_scale = 1 / id;
    for (int k = 0; k < octets; ++k) {
      trials->on_grid[t][k] =
          OctetToGrid(grid, xval + 8 * k, waux + 8 * k, id, this_scale, trials->L[t] + 8 * k);
    }
    LevelSums(8 * octets, weight, xval, trials->L[t], trials->sumqx[t], trials->sumq2[t]);
  }
}

void EncodeIq2Xxs(const float* x, const float* qw, uint8_t* out, uint64_t& /*clipped: none*/) {
  EncodeIq2XxsWith(x, qw, out, Iq2TrialsScalar);
}

void EncodeIq2Xs(const float* x, const float* qw, uint8_t* out, uint64_t& /*clipped: none*/) {
  EncodeIq2XsWith(x, qw, out, Iq2TrialsScalar);
}

void EncodeIq2S(const float* x, const float* qw, uint8_t* out, uint64_t& /*clipped: none*/) {
  EncodeIq2SWith(x, qw, out, Iq2TrialsScalar);
}

// qw must not be null (ggml asserts; Encode refuses first).
void EncodeIq2XxsWith(const float* x, const float* qw, uint8_t* out, Iq2TrialSearch search) {
  assert(qw != nullptr);
  const GridSearch& grid = SearchTables(GridKind::kIq2Xxs);
  BlockIq2Xxs b;
  b.d = ToHalf(0.f);
  uint32_t q2[16] = {};
  float scales[8];
  float max_scale = 0;
  const float sigma2 = SumSquares(x) / kSuperBlock;
  for (int ib = 0; ib < 8; ++ib) {
    const float* xb = x + 32 * ib;
    float weight[32], waux[32], xval[32];
    ImportanceWeights(32, qw + 32 * ib, xb, sigma2, weight, waux);
    uint8_t signs[4];
    for (int k = 0; k < 4; ++k) signs[k] = FoldEvenSigns(xb + 8 * k, weight + 8 * k, xval + 8 * k);
    int8_t L[32];
    float scale;
    if (!Iq2XxsGroup(grid, xval, weight, waux, search, L, scale)) {
      scales[ib] = 0;
      continue;
    }
    if (scale < 0) {  // ggml: "should never happen"; stores |scale| and the opposite signs
      scale = -scale;
      for (int k = 0; k < 4; ++k) signs[k] = ~signs[k] & 127;
    }
    for (int k = 0; k < 4; ++k) {
      q2[2 * ib] |= static_cast<uint32_t>(PointOf(grid, L + 8 * k)) << 8 * k;
      q2[2 * ib + 1] |= static_cast<uint32_t>(signs[k]) << 7 * k;
    }
    scales[ib] = scale;
    max_scale = Max(max_scale, scale);
  }
  if (max_scale != 0) {
    const float d = max_scale / 31;
    b.d = ToHalf(d);
    const float id = 1 / d;
    for (int ib = 0; ib < 8; ++ib) {
      q2[2 * ib + 1] |= static_cast<uint32_t>(GroupScaleCode(id, scales[ib])) << 28;
    }
  } else {
    std::memset(q2, 0, sizeof(q2));  // a block of empty groups stores no codes at all
  }
  std::memcpy(b.qs, q2, sizeof(q2));
  StoreBlock(b, out);
}

// qw must not be null (ggml asserts; Encode refuses first).
void EncodeIq2XsWith(const float* x, const float* qw, uint8_t* out, Iq2TrialSearch search) {
  assert(qw != nullptr);
  const GridSearch& grid = SearchTables(GridKind::kIq2Xs);
  BlockIq2Xs b;
  b.d = ToHalf(0.f);
  std::memset(b.qs, 0, sizeof(b.qs));
  std::memset(b.scales, 0, sizeof(b.scales));
  float scales[16];
  float max_scale = 0;
  const float sigma2 = SumSquares(x) / kSuperBlock;
  for (int ib = 0; ib < 16; ++ib) {
    const float* xb = x + 16 * ib;
    float weight[16], waux[16], xval[16];
    ImportanceWeights(16, qw + 16 * ib, xb, sigma2, weight, waux);
    uint8_t signs[2];
    for (int k = 0; k < 2; ++k) signs[k] = FoldEvenSigns(xb + 8 * k, weight + 8 * k, xval + 8 * k);
    int8_t L[16];
    float scale;
    if (!Group16(grid, kGroupMaxEps, xval, weight, waux, search, L, scale)) {
      scales[ib] = 0;
      continue;
    }
    if (scale < 0) {
      scale = -scale;
      for (int k = 0; k < 2; ++k) signs[k] = ~signs[k] & 127;
    }
    for (int k = 0; k < 2; ++k) {
      b.qs[2 * ib + k] = static_cast<uint16_t>(PointOf(grid, L + 8 * k) | signs[k] << 9);
    }
    scales[ib] = scale;
    max_scale = Max(max_scale, scale);
  }
  if (max_scale == 0) {
    std::memset(b.qs, 0, sizeof(b.qs));
    StoreBlock(b, out);
    return;
  }
  const float d = max_scale / 31;
  b.d = ToHalf(d);
  const float id = 1 / d;
  for (int ib = 0; ib < 16; ++ib) {
    const int l = GroupScaleCode(id, scales[ib]);
    b.scales[ib / 2] = static_cast<uint8_t>(ib % 2 == 0 ? l : b.scales[ib / 2] | l << 4);
  }
  StoreBlock(b, out);
}

// With qw null, ggml's weights are sigma2 / 4 + x^2.
void EncodeIq2SWith(const float* x, const float* qw, uint8_t* out, Iq2TrialSearch search) {
  const GridSearch& grid = SearchTables(GridKind::kIq2S);
  BlockIq2S b;
  std::memset(&b, 0, sizeof(b));
  b.d = ToHalf(0.f);
  float scales[16];
  float max_scale = 0;
  const float sigma2 = 2 * SumSquares(x) / kSuperBlock;
  for (int ib = 0; ib < 16; ++ib) {
    const float* xb = x + 16 * ib;
    float weight[16], waux[16], xval[16];
    if (qw != nullptr) {
      ImportanceWeights(16, qw + 16 * ib, xb, sigma2, weight, waux);
    } else {
      for (int i = 0; i < 16; ++i) weight[i] = 0.25f * sigma2 + xb[i] * xb[i];
      for (int i = 0; i < 16; ++i) waux[i] = std::sqrt(weight[i]);
    }
    uint8_t signs[2];
    for (int k = 0; k < 2; ++k) signs[k] = AllSigns(xb + 8 * k, xval + 8 * k);
    int8_t L[16];
    float scale;
    if (!Group16(grid, kGroupMaxEpsIq2S, xval, weight, waux, search, L, scale)) {
      scales[ib] = 0;
      continue;
    }
    if (scale < 0) {
      scale = -scale;
      for (int k = 0; k < 2; ++k) signs[k] = static_cast<uint8_t>(~signs[k]);
    }
    for (int k = 0; k < 2; ++k) {
      const int i8 = 2 * ib + k;
      const int p = PointOf(grid, L + 8 * k);
      b.qs[i8] = static_cast<uint8_t>(p & 255);
      b.qh[i8 / 4] = static_cast<uint8_t>(b.qh[i8 / 4] | (p >> 8) << 2 * (i8 % 4));
      b.qs[32 + i8] = signs[k];
    }
    scales[ib] = scale;
    max_scale = Max(max_scale, scale);
  }
  // Unlike iq2_xxs and iq2_xs, a block whose groups all have scale 0 keeps
  // the codes it wrote.
  if (max_scale != 0) {
    const float d = max_scale / 31;
    b.d = ToHalf(d * 0.9875f);
    const float id = 1 / d;
    for (int ib = 0; ib < 16; ++ib) {
      const int l = GroupScaleCode(id, scales[ib]);
      b.scales[ib / 2] = static_cast<uint8_t>(ib % 2 == 0 ? l : b.scales[ib / 2] | l << 4);
    }
  }
  StoreBlock(b, out);
}

void DecodeIq2Xxs(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockIq2Xxs>(in);
  const float d = Half(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    uint32_t aux[2];
    std::memcpy(aux, b.qs + 4 * ib, sizeof(aux));
    const float db = d * (0.5f + (aux[1] >> 28)) * 0.25f;
    for (int k = 0; k < 4; ++k) {
      const uint16_t point = kIq2XxsPoints[(aux[0] >> 8 * k) & 255];
      DecodeOctet(db, point, EvenSigns(aux[1] >> 7 * k), y);
      y += 8;
    }
  }
}

void DecodeIq2Xs(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockIq2Xs>(in);
  const float d = Half(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const float db[2] = {d * (0.5f + (b.scales[ib] & 0xf)) * 0.25f,
                         d * (0.5f + (b.scales[ib] >> 4)) * 0.25f};
    for (int k = 0; k < 4; ++k) {
      const uint16_t q = b.qs[4 * ib + k];
      DecodeOctet(db[k / 2], kIq2XsPoints[q & 511], EvenSigns(q >> 9), y);
      y += 8;
    }
  }
}

void DecodeIq2S(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockIq2S>(in);
  const float d = Half(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const float db[2] = {d * (0.5f + (b.scales[ib] & 0xf)) * 0.25f,
                         d * (0.5f + (b.scales[ib] >> 4)) * 0.25f};
    for (int k = 0; k < 4; ++k) {
      const int j = 4 * ib + k;
      const int index = b.qs[j] | ((b.qh[ib] << (8 - 2 * k)) & 0x300);
      DecodeOctet(db[k / 2], kIq2SPoints[index], b.qs[32 + j], y);
      y += 8;
    }
  }
}

}  // namespace lowp::ggml::internal
