// ggml's iq2_xxs / iq2_xs / iq2_s trial search with the trials of one group
// in SIMD lanes (kernels/ggml_iq2_simd.h): codecs' Iq2TrialsScalar, lane t doing
// trial t's float operations in its order, as kernels/ggml_iq3_simd.cc does
// for iq3 with octets of levels 0..2 in place of quartets of 0..7: each lane
// rounds an octet's levels (ggml's nearest_int bit trick) and looks its key
// up (a gather). The neighbour lists here are long (up to 292 for iq2_xs) and
// uneven, so a trial whose key is off the grid walks its own list with the
// neighbours in lanes (BestNeighbour). codecs' own encoders then choose
// among the trials, refit and pack. Compiled once per Highway target; no
// fused multiply-add.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ggml_iq2_simd.cc"
#include <cfloat>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/ggml_simd-inl.h"
#include "codecs/ggml_blocks.h"
#include "codecs/ggml_iq2_grids.h"
#include "codecs/ggml_iq2_search.h"
#include "kernels/ggml_grid_tables.h"
#include "kernels/ggml_iq2_simd.h"

HWY_BEFORE_NAMESPACE();
namespace lowp::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace gi = ggml::internal;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;
using MI = hn::Mask<DI>;

constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
// Trials padded to whole vectors (lanes past the last trial are ignored).
constexpr size_t kPadded = (gi::kIq2MaxTrials + kMaxLanes - 1) / kMaxLanes * kMaxLanes;
constexpr int kMaxElements = 8 * gi::kIq2MaxOctets;

// codecs' BestNeighbour for one key (its table entry) at one trial scale:
// the first neighbour of least sum waux (scale q - x)^2, its levels packed.
// The list's neighbours go through the lanes in list order, each lane's
// distance in codecs' order of operations; a vector's least distance
// replaces the best only when strictly less, and within a vector its first
// lane wins, so the first of equal distances wins as in the scalar walk.
// NaN distances (never less) count as infinity.
int32_t BestNeighbour(const GridNeighbourTables& tab, int32_t entry, float scale, const float* xk,
                      const float* wk) {
  const DF df;
  const DI di;
  const size_t n = hn::Lanes(df);
  const int32_t* list = tab.packed.data() + (entry >> 10);
  const size_t length = static_cast<size_t>(entry & 1023);
  const VF vscale = hn::Set(df, scale);
  const VI three = hn::Set(di, 3), one = hn::Set(di, 1);
  float best_d2 = FLT_MAX;
  int32_t best = list[0];
  for (size_t c = 0; c < length; c += n) {
    const VI packed = hn::LoadU(di, list + c);  // the table's padding keeps this in bounds
    VF d2 = hn::Zero(df);
    for (int i = 0; i < 8; ++i) {
      const VI level = hn::And(hn::ShiftRightSame(packed, 2 * i), three);
      const VF q = hn::ConvertTo(df, hn::Add(hn::Add(level, level), one));
      const VF diff = hn::Sub(hn::Mul(vscale, q), hn::Set(df, xk[i]));
      d2 = hn::Add(d2, hn::Mul(hn::Mul(hn::Set(df, wk[i]), diff), diff));
    }
    const int lane = FirstLeastLane(df, d2, length - c, &best_d2);
    if (lane >= 0) best = list[c + static_cast<size_t>(lane)];
  }
  return best;
}

void Trials(const gi::GridSearch& grid, int octets, int steps, float max, const float* xval,
            const float* weight, const float* waux, gi::Iq2Trials* trials) {
  const GridNeighbourTables& tab = GridNeighbourTables::For(grid);
  const DF df;
  const DI di;
  const size_t n = hn::Lanes(df);
  const int count = 2 * steps + 1;
  HWY_ALIGN float ids[kPadded], scales[kPadded];
  TrialIds(steps, kPadded, [max](int is) { return gi::Iq2TrialId(is, max); }, ids, scales);
  HWY_ALIGN int32_t levels[kMaxElements][kMaxLanes];
  HWY_ALIGN int32_t on_grid[gi::kIq2MaxOctets][kMaxLanes];
  const VI zero = hn::Zero(di), top = hn::Set(di, 2);
  for (size_t t0 = 0; t0 < static_cast<size_t>(count); t0 += n) {
    const VF id = hn::Load(df, ids + t0);
    for (int k = 0; k < octets; ++k) {
      const float* xk = xval + 8 * k;
      const float* wk = waux + 8 * k;
      VI l[8];
      VI key = zero;
      for (int i = 0; i < 8; ++i) {
        const VF a = hn::Mul(hn::Set(df, 0.5f), hn::Sub(hn::Mul(id, hn::Set(df, xk[i])),
                                                         hn::Set(df, 1.0f)));
        l[i] = hn::Min(hn::Max(NearestIntLanes(a), zero), top);
        key = hn::Or(key, hn::ShiftLeftSame(l[i], 2 * i));
      }
      const VI entry = hn::GatherIndex(di, tab.entry.data(), key);
      const MI off = hn::Gt(entry, hn::Set(di, -1));
      hn::Store(hn::VecFromMask(di, hn::Not(off)), di, on_grid[k]);
      for (int i = 0; i < 8; ++i) hn::Store(l[i], di, levels[8 * k + i]);
      if (!hn::AllFalse(di, off)) {
        HWY_ALIGN int32_t entries[kMaxLanes];
        hn::Store(entry, di, entries);
        for (size_t lane = 0; lane < n && t0 + lane < static_cast<size_t>(count); ++lane) {
          if (entries[lane] < 0) continue;
          const int32_t best = BestNeighbour(tab, entries[lane], scales[t0 + lane], xk, wk);
          for (int i = 0; i < 8; ++i) levels[8 * k + i][lane] = (best >> 2 * i) & 3;
        }
      }
    }
    // codecs' LevelSums per lane.
    StoreTrials(levels, on_grid, 8 * octets, octets, weight, xval, t0,
                static_cast<size_t>(count), trials);
  }
}

void EncodeRows(ggml::Type type, const float* in, size_t count, uint8_t* out,
                const float* importance) {
  const size_t bytes = static_cast<size_t>(ggml::Info(type).bytes);
  for (size_t b = 0; b < count / ggml::kSuperBlock; ++b) {
    const float* x = in + b * ggml::kSuperBlock;
    const float* qw = importance == nullptr ? nullptr : importance + b * ggml::kSuperBlock;
    uint8_t* o = out + b * bytes;
    if (type == ggml::Type::kIQ2_XXS) {
      gi::EncodeIq2XxsWith(x, qw, o, Trials);
    } else if (type == ggml::Type::kIQ2_XS) {
      gi::EncodeIq2XsWith(x, qw, o, Trials);
    } else {
      gi::EncodeIq2SWith(x, qw, o, Trials);
    }
  }
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lowp::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lowp::kernels {

HWY_EXPORT(EncodeRows);

void EncodeIq2Fast(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                   uint64_t& /*clipped: none*/, std::span<const float> importance) {
  HWY_DYNAMIC_DISPATCH(EncodeRows)(type, in.data(), in.size(), out.data(),
                                   importance.empty() ? nullptr : importance.data());
}

}  // namespace lowp::kernels
#endif  // HWY_ONCE
