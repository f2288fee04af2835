// ggml's iq1_s and iq1_m searches in SIMD lanes (kernels/ggml_iq1_simd.h).
// The split searches (codecs' Iq1sSplitsScalar, Iq1mSplitsScalar) have one
// group per lane, lane g doing group g's float operations in its order.
// Every group walks the same splits (i1 <= i2 of the cut points) with the
// same shifts, so the lanes stay in step; the running best is kept per lane
// with masked selects, and the division for a new scale runs only when some
// lane improves. iq1_s's terms that do not change along the inner loop
// ((sumx[i1] - sumx[0]) * xx[0] and the like) are formed once: the same
// products each time. An off-grid octet's neighbour list
// (Iq1BestNeighbourScalar) is walked with its neighbours in lanes, as
// kernels/ggml_iq2_simd.cc does; a group's sort (Iq1SortScalar) is by ranks
// counted in lanes (Sort). codecs' own encoders move octets onto the grid,
// refit and pack. Compiled once per Highway target; no fused multiply-add.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ggml_iq1_simd.cc"
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/ggml_simd-inl.h"
#include "codecs/ggml_blocks.h"
#include "codecs/ggml_iq1_search.h"
#include "codecs/ggml_iq2_grids.h"
#include "kernels/ggml_grid_tables.h"
#include "kernels/ggml_iq1_simd.h"

HWY_BEFORE_NAMESPACE();
namespace lowp::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace gi = ggml::internal;

namespace {  // helpers private to this file (other kernels share HWY_NAMESPACE)

using DF = hn::CappedTag<float, 8 * gi::kIq1sBatchBlocks>;
using VF = hn::Vec<DF>;

constexpr int kN = gi::kIq1sGroup;
constexpr size_t kMaxLanes = 8 * gi::kIq1sBatchBlocks;

// Each lane's running best: score, scale and split (i1, i2 and shift as
// floats, exact for these small integers).
struct Best {
  VF score, scale, i1, i2, shift;
};

// ggml's `if (sumq2 > 0 && sumqx * sumqx > best_score * sumq2)` per lane:
// the lanes where it holds take this split, its scale sumqx / sumq2 and its
// score scale * sumqx.
HWY_INLINE void Consider(VF sumqx, VF sumq2, VF i1, VF i2, VF shift, Best& best) {
  const DF df;
  const auto better = hn::And(hn::Gt(sumq2, hn::Zero(df)),
                              hn::Gt(hn::Mul(sumqx, sumqx), hn::Mul(best.score, sumq2)));
  if (hn::AllFalse(df, better)) return;
  const VF s = hn::Div(sumqx, sumq2);
  best.scale = hn::IfThenElse(better, s, best.scale);
  best.score = hn::IfThenElse(better, hn::Mul(s, sumqx), best.score);
  best.i1 = hn::IfThenElse(better, i1, best.i1);
  best.i2 = hn::IfThenElse(better, i2, best.i2);
  best.shift = hn::IfThenElse(better, shift, best.shift);
}

// Groups g0 .. g0 + lanes - 1 (lanes past `groups` repeat the last group
// and are ignored).
void SearchLanes(int groups, int g0, const gi::Iq1sSums* sums, gi::Iq1Split* out) {
  const DF df;
  const size_t lanes = hn::Lanes(df);
  HWY_ALIGN float sx[kN + 1][kMaxLanes], sw[kN + 1][kMaxLanes], mx[kMaxLanes];
  for (size_t l = 0; l < lanes; ++l) {
    const int g = g0 + static_cast<int>(l) < groups ? g0 + static_cast<int>(l) : groups - 1;
    for (int j = 0; j <= kN; ++j) {
      sx[j][l] = sums[g].sumx[j];
      sw[j][l] = sums[g].sumw[j];
    }
    mx[l] = sums[g].max;
  }
  const float* up = gi::kIq1Up;
  const float* down = gi::kIq1Down;
  // The tails (sumx[n] - sumx[i2]) * xx[2] and (sumw[n] - sumw[i2]) * xx[2]
  // * xx[2] for each i2 and shift.
  HWY_ALIGN float tx_up[kN + 1][kMaxLanes], tx_dn[kN + 1][kMaxLanes];
  HWY_ALIGN float tw_up[kN + 1][kMaxLanes], tw_dn[kN + 1][kMaxLanes];
  const VF sxn = hn::Load(df, sx[kN]), swn = hn::Load(df, sw[kN]);
  const VF u0 = hn::Set(df, up[0]), u1 = hn::Set(df, up[1]), u2 = hn::Set(df, up[2]);
  const VF d0 = hn::Set(df, down[0]), d1 = hn::Set(df, down[1]), d2 = hn::Set(df, down[2]);
  for (int j = 0; j <= kN; ++j) {
    const VF tx = hn::Sub(sxn, hn::Load(df, sx[j]));
    const VF tw = hn::Sub(swn, hn::Load(df, sw[j]));
    hn::Store(hn::Mul(tx, u2), df, tx_up[j]);
    hn::Store(hn::Mul(tx, d2), df, tx_dn[j]);
    hn::Store(hn::Mul(hn::Mul(tw, u2), u2), df, tw_up[j]);
    hn::Store(hn::Mul(hn::Mul(tw, d2), d2), df, tw_dn[j]);
  }
  const VF zero = hn::Zero(df);
  const VF sx0 = hn::Load(df, sx[0]), sw0 = hn::Load(df, sw[0]);
  Best best{hn::Set(df, -FLT_MAX), hn::Load(df, mx), hn::Set(df, -1.0f), hn::Set(df, -1.0f), zero};
  const VF plus = hn::Set(df, 1.0f), minus = hn::Set(df, -1.0f);
  for (int i1 = 0; i1 <= kN; ++i1) {
    const VF sx1 = hn::Load(df, sx[i1]), sw1 = hn::Load(df, sw[i1]);
    const VF lx = hn::Sub(sx1, sx0), lw = hn::Sub(sw1, sw0);
    const VF lx_up = hn::Mul(lx, u0), lx_dn = hn::Mul(lx, d0);
    const VF lw_up = hn::Mul(hn::Mul(lw, u0), u0), lw_dn = hn::Mul(hn::Mul(lw, d0), d0);
    const VF vi1 = hn::Set(df, static_cast<float>(i1));
    for (int i2 = i1; i2 <= kN; ++i2) {
      const VF mxs = hn::Sub(hn::Load(df, sx[i2]), sx1);
      const VF mws = hn::Sub(hn::Load(df, sw[i2]), sw1);
      // Shift up, then down: each compared against the best so far.
      const VF vi2 = hn::Set(df, static_cast<float>(i2));
      Consider(hn::Add(hn::Add(lx_up, hn::Mul(mxs, u1)), hn::Load(df, tx_up[i2])),
               hn::Add(hn::Add(lw_up, hn::Mul(hn::Mul(mws, u1), u1)), hn::Load(df, tw_up[i2])), vi1,
               vi2, plus, best);
      Consider(hn::Add(hn::Add(lx_dn, hn::Mul(mxs, d1)), hn::Load(df, tx_dn[i2])),
               hn::Add(hn::Add(lw_dn, hn::Mul(hn::Mul(mws, d1), d1)), hn::Load(df, tw_dn[i2])), vi1,
               vi2, minus, best);
    }
  }
  HWY_ALIGN float o_scale[kMaxLanes], o_i1[kMaxLanes], o_i2[kMaxLanes], o_shift[kMaxLanes];
  hn::Store(best.scale, df, o_scale);
  hn::Store(best.i1, df, o_i1);
  hn::Store(best.i2, df, o_i2);
  hn::Store(best.shift, df, o_shift);
  for (size_t l = 0; l < lanes && g0 + static_cast<int>(l) < groups; ++l) {
    out[g0 + l] = {static_cast<int>(o_i1[l]), static_cast<int>(o_i2[l]),
                   static_cast<int>(o_shift[l]), o_scale[l]};
  }
}

void Splits(int groups, const gi::Iq1sSums* sums, gi::Iq1Split* best) {
  const int lanes = static_cast<int>(hn::Lanes(DF()));
  for (int g0 = 0; g0 < groups; g0 += lanes) SearchLanes(groups, g0, sums, best);
}

// codecs' Iq1BestNeighbourScalar with the list's neighbours in lanes, in
// list order, each lane's distance in codecs' order of operations; a
// vector's least distance replaces the best only when strictly less, and
// within a vector its first lane wins, so the first of equal distances wins
// as in the scalar walk. NaN distances (never less) count as infinity.
int BestNeighbour(const gi::GridSearch& grid, uint16_t key, const float* xval, const float* weight,
                  float scale, const float* xx, int8_t* L) {
  const GridNeighbourTables& tab = GridNeighbourTables::For(grid);
  const int32_t entry = tab.entry[key];
  if (entry < 0) return gi::Iq1BestNeighbourScalar(grid, key, xval, weight, scale, xx, L);
  using D = hn::ScalableTag<float>;
  const D df;
  const hn::RebindToSigned<D> di;
  const size_t n = hn::Lanes(df);
  const size_t start = static_cast<size_t>(entry >> 10);
  const size_t length = static_cast<size_t>(entry & 1023);
  const auto vscale = hn::Set(df, scale);
  const auto q0 = hn::Set(df, xx[0]), q1 = hn::Set(df, xx[1]), q2 = hn::Set(df, xx[2]);
  const auto three = hn::Set(di, 3), zero = hn::Zero(di), one = hn::Set(di, 1);
  float best_d2 = FLT_MAX;
  size_t best = 0;
  for (size_t c = 0; c < length; c += n) {
    const auto packed = hn::LoadU(di, tab.packed.data() + start + c);
    auto d2 = hn::Zero(df);
    for (int i = 0; i < 8; ++i) {
      const auto level = hn::And(hn::ShiftRightSame(packed, 2 * i), three);
      const auto q = hn::IfThenElse(hn::RebindMask(df, hn::Eq(level, zero)), q0,
                                    hn::IfThenElse(hn::RebindMask(df, hn::Eq(level, one)), q1, q2));
      const auto diff = hn::Sub(hn::Mul(vscale, q), hn::Set(df, xval[i]));
      d2 = hn::Add(d2, hn::Mul(hn::Mul(hn::Set(df, weight[i]), diff), diff));
    }
    const int lane = FirstLeastLane(df, d2, length - c, &best_d2);
    if (lane >= 0) best = c + static_cast<size_t>(lane);
  }
  const int32_t bits = tab.packed[start + best];
  for (int i = 0; i < 8; ++i) L[i] = static_cast<int8_t>((bits >> 2 * i) & 3);
  return tab.points[start + best];
}

// codecs' Iq1SortScalar by ranks: element i goes to the number of elements
// less than it plus the number of equal ones before it, the place a stable
// sort gives it. The ranks of a vector of elements i grow together, one
// element j at a time. A NaN (equal to nothing, so ranks would collide)
// leaves the order to codecs' sort.
void Sort(const float* xb, int n, int* order) {
  const DF df;
  const hn::RebindToSigned<DF> di;
  const int lanes = static_cast<int>(hn::Lanes(df));
  bool nan = false;
  for (int j = 0; j < n; ++j) nan = nan || xb[j] != xb[j];
  // (Whole vectors only: n is 32 or 16, lanes a power of two up to 16.)
  if (nan || n > kN || n % lanes != 0) return gi::Iq1SortScalar(xb, n, order);
  HWY_ALIGN int32_t rank[kN];
  for (int i0 = 0; i0 < n; i0 += lanes) {
    const auto xi = hn::LoadU(df, xb + i0);
    const auto i = hn::Iota(di, i0);
    auto r = hn::Zero(di);
    for (int j = 0; j < n; ++j) {
      const auto xj = hn::Set(df, xb[j]);
      const auto after = hn::RebindMask(df, hn::Gt(i, hn::Set(di, j)));
      const auto m = hn::Or(hn::Lt(xj, xi), hn::And(hn::Eq(xj, xi), after));
      r = hn::Sub(r, hn::VecFromMask(di, hn::RebindMask(di, m)));
    }
    hn::Store(r, di, rank + i0);
  }
  for (int k = 0; k < n; ++k) order[rank[k]] = k;
}

// codecs' Iq1mSplitsScalar for groups g0 .. g0 + lanes - 1, as SearchLanes:
// the running sums (low, mid and the tail added afresh per split) are
// carried per lane, the combinations k = 0..3 compared in turn.
void SearchLanesM(int groups, int g0, const gi::Iq1mTerms* terms, gi::Iq1Split* out) {
  constexpr int n = gi::kIq1mGroup;
  const DF df;
  const size_t lanes = hn::Lanes(df);
  HWY_ALIGN float tx[n][3][4][kMaxLanes], tq[n][3][4][kMaxLanes], mx[kMaxLanes];
  for (size_t l = 0; l < lanes; ++l) {
    const int g = g0 + static_cast<int>(l) < groups ? g0 + static_cast<int>(l) : groups - 1;
    for (int j = 0; j < n; ++j) {
      for (int lv = 0; lv < 3; ++lv) {
        for (int k = 0; k < 4; ++k) {
          tx[j][lv][k][l] = terms[g].tx[j][lv][k];
          tq[j][lv][k][l] = terms[g].tq[j][lv][k];
        }
      }
    }
    mx[l] = terms[g].max;
  }
  const VF zero = hn::Zero(df);
  Best best{hn::Set(df, -FLT_MAX), hn::Load(df, mx), hn::Set(df, -1.0f), hn::Set(df, -1.0f),
            hn::Set(df, -1.0f)};
  VF low_x[4] = {zero, zero, zero, zero}, low_q[4] = {zero, zero, zero, zero};
  for (int i1 = 0; i1 <= n; ++i1) {
    if (i1 > 0) {
      for (int k = 0; k < 4; ++k) {
        low_x[k] = hn::Add(low_x[k], hn::Load(df, tx[i1 - 1][0][k]));
        low_q[k] = hn::Add(low_q[k], hn::Load(df, tq[i1 - 1][0][k]));
      }
    }
    VF mid_x[4], mid_q[4];
    for (int k = 0; k < 4; ++k) {
      mid_x[k] = low_x[k];
      mid_q[k] = low_q[k];
    }
    const VF vi1 = hn::Set(df, static_cast<float>(i1));
    for (int i2 = i1; i2 <= n; ++i2) {
      if (i2 > i1) {
        for (int k = 0; k < 4; ++k) {
          mid_x[k] = hn::Add(mid_x[k], hn::Load(df, tx[i2 - 1][1][k]));
          mid_q[k] = hn::Add(mid_q[k], hn::Load(df, tq[i2 - 1][1][k]));
        }
      }
      VF sumqx[4], sumq2[4];
      for (int k = 0; k < 4; ++k) {
        sumqx[k] = mid_x[k];
        sumq2[k] = mid_q[k];
      }
      for (int j = i2; j < n; ++j) {
        for (int k = 0; k < 4; ++k) {
          sumqx[k] = hn::Add(sumqx[k], hn::Load(df, tx[j][2][k]));
          sumq2[k] = hn::Add(sumq2[k], hn::Load(df, tq[j][2][k]));
        }
      }
      const VF vi2 = hn::Set(df, static_cast<float>(i2));
      for (int k = 0; k < 4; ++k) {
        Consider(sumqx[k], sumq2[k], vi1, vi2, hn::Set(df, static_cast<float>(k)), best);
      }
    }
  }
  HWY_ALIGN float o_scale[kMaxLanes], o_i1[kMaxLanes], o_i2[kMaxLanes], o_k[kMaxLanes];
  hn::Store(best.scale, df, o_scale);
  hn::Store(best.i1, df, o_i1);
  hn::Store(best.i2, df, o_i2);
  hn::Store(best.shift, df, o_k);
  for (size_t l = 0; l < lanes && g0 + static_cast<int>(l) < groups; ++l) {
    out[g0 + l] = {static_cast<int>(o_i1[l]), static_cast<int>(o_i2[l]), static_cast<int>(o_k[l]),
                   o_scale[l]};
  }
}

void SplitsM(int groups, const gi::Iq1mTerms* terms, gi::Iq1Split* best) {
  const int lanes = static_cast<int>(hn::Lanes(DF()));
  for (int g0 = 0; g0 < groups; g0 += lanes) SearchLanesM(groups, g0, terms, best);
}

}  // namespace

void EncodeIq1Rows(ggml::Type type, const float* in, size_t count, uint8_t* out,
                   const float* importance) {
  const gi::Iq1Searches searches = {Sort, Splits, SplitsM, BestNeighbour};
  const size_t blocks = count / ggml::kSuperBlock;
  if (type == ggml::Type::kIQ1_S) {
    gi::EncodeIq1SWith(in, importance, blocks, out, searches);
    return;
  }
  for (size_t b = 0; b < blocks; ++b) {
    gi::EncodeIq1MWith(in + b * ggml::kSuperBlock,
                       importance == nullptr ? nullptr : importance + b * ggml::kSuperBlock,
                       out + b * sizeof(ggml::BlockIq1M), searches);
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lowp::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lowp::kernels {

HWY_EXPORT(EncodeIq1Rows);

void EncodeIq1Fast(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                   uint64_t& /*clipped: none*/, std::span<const float> importance) {
  const float* qw = importance.empty() ? nullptr : importance.data();
  HWY_DYNAMIC_DISPATCH(EncodeIq1Rows)(type, in.data(), in.size(), out.data(), qw);
}

}  // namespace lowp::kernels
#endif  // HWY_ONCE
