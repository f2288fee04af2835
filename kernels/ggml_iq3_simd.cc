// ggml's iq3_xxs / iq3_s trial search with the trials of one 32-element group
// in SIMD lanes (kernels/ggml_iq3.h): codecs' Iq3TrialsScalar, lane t doing
// trial t's float operations in its order. For each 4-element point every
// lane rounds its levels (ggml's nearest_int bit trick), looks the point up
// in the grid (a gather), and the lanes whose point is off the grid walk
// their own neighbour lists in lock step, each keeping the first neighbour of
// least weighted distance (strict `<` from FLT_MAX, as ggml). codecs' own
// encoders then choose among the trials, refit and pack. Compiled once per
// Highway target; no fused multiply-add.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ggml_iq3_simd.cc"
#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "codecs/ggml_blocks.h"
#include "codecs/ggml_iq3_grids.h"
#include "codecs/ggml_iq3_search.h"
#include "kernels/ggml_iq3.h"

#ifndef LOWP_KERNELS_GGML_IQ3_TABLES_
#define LOWP_KERNELS_GGML_IQ3_TABLES_
namespace lowp::kernels {
// A lattice's search tables as int32 arrays a gather reads: the grid index
// of each point (-1 off the grid), where each point's neighbour list starts
// (and the next one's), the lists, and each grid point's 4 lattice values.
struct Iq3Tables {
  std::vector<int32_t> index_of, begin, neighbours, value[4];

  explicit Iq3Tables(const ggml::internal::Iq3Lattice& lattice, int grid_size) {
    namespace gi = ggml::internal;
    index_of.resize(gi::kIq3Points);
    begin.resize(gi::kIq3Points + 1);
    for (int u = 0; u < gi::kIq3Points; ++u) {
      index_of[u] = lattice.IndexOf(static_cast<uint16_t>(u));
      begin[u] = static_cast<int32_t>(neighbours.size());
      if (index_of[u] < 0) {
        for (uint16_t j : lattice.Neighbours(static_cast<uint16_t>(u))) neighbours.push_back(j);
      }
    }
    begin[gi::kIq3Points] = static_cast<int32_t>(neighbours.size());
    neighbours.push_back(0);  // a lane past its list (masked) reads here
    for (int i = 0; i < 4; ++i) {
      value[i].resize(grid_size);
      for (int j = 0; j < grid_size; ++j) value[i][j] = lattice.Values(j)[i];
    }
  }

  static const Iq3Tables& Xxs() {
    static const Iq3Tables* t =
        new Iq3Tables(ggml::internal::Iq3Lattice::Xxs(), ggml::internal::kIq3XxsGridSize);
    return *t;
  }
  static const Iq3Tables& S() {
    static const Iq3Tables* t =
        new Iq3Tables(ggml::internal::Iq3Lattice::S(), ggml::internal::kIq3SGridSize);
    return *t;
  }
};
}  // namespace lowp::kernels
#endif  // LOWP_KERNELS_GGML_IQ3_TABLES_

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
constexpr size_t kPadded = (gi::kIq3MaxTrials + kMaxLanes - 1) / kMaxLanes * kMaxLanes;

// ggml's nearest_int: x + 1.5 * 2^23, the integer read from the mantissa.
HWY_INLINE VI NearestInt(DF df, VF x) {
  const DI di;
  const VI bits = hn::BitCast(di, hn::Add(x, hn::Set(df, 12582912.f)));
  return hn::Sub(hn::And(bits, hn::Set(di, 0x007fffff)), hn::Set(di, 0x00400000));
}

template <const Iq3Tables& (*kTables)()>
void Trials(const gi::Iq3Variant& v, const float* xval, const float* weight, const float* waux,
            float max, gi::Iq3Trials* trials) {
  const Iq3Tables& tab = kTables();
  const DF df;
  const DI di;
  const size_t n = hn::Lanes(df);
  const int count = 2 * v.steps + 1;
  HWY_ALIGN float ids[kPadded], scales[kPadded];
  for (size_t t = 0; t < kPadded; ++t) {
    const int is = static_cast<int>(t < static_cast<size_t>(count) ? t : count - 1) - v.steps;
    ids[t] = gi::Iq3TrialId(is, max);
    scales[t] = 1 / ids[t];
  }
  HWY_ALIGN int32_t levels[gi::kIq3Group][kMaxLanes];
  HWY_ALIGN int32_t on_grid[gi::kIq3GroupPoints][kMaxLanes];
  HWY_ALIGN float sumqx[kMaxLanes], sumq2[kMaxLanes];
  const VI zero = hn::Zero(di), top = hn::Set(di, gi::kIq3Levels - 1);
  for (size_t t0 = 0; t0 < static_cast<size_t>(count); t0 += n) {
    const VF id = hn::Load(df, ids + t0);
    const VF scale = hn::Load(df, scales + t0);
    for (int k = 0; k < gi::kIq3GroupPoints; ++k) {
      const float* xk = xval + 4 * k;
      const float* wk = waux + 4 * k;
      VI l[4];
      VI u = zero;
      for (int i = 0; i < 4; ++i) {
        const VF a = hn::Mul(hn::Set(df, 0.5f), hn::Sub(hn::Mul(id, hn::Set(df, xk[i])),
                                                         hn::Set(df, 1.0f)));
        l[i] = hn::Min(hn::Max(NearestInt(df, a), zero), top);
        u = hn::Or(u, hn::ShiftLeftSame(l[i], 3 * i));
      }
      const VI index = hn::GatherIndex(di, tab.index_of.data(), u);
      const MI off = hn::Lt(index, zero);
      hn::Store(hn::VecFromMask(di, hn::Not(off)), di, on_grid[k]);
      if (!hn::AllFalse(di, off)) {
        const VI first = hn::IfThenElseZero(off, hn::GatherIndex(di, tab.begin.data(), u));
        const VI end = hn::IfThenElseZero(off, hn::GatherIndex(di, tab.begin.data(),
                                                                hn::Add(u, hn::Set(di, 1))));
        const VI length = hn::Sub(end, first);
        const int most = hn::GetLane(hn::MaxOfLanes(di, length));
        VF best_d2 = hn::Set(df, FLT_MAX);
        VI best = hn::GatherIndex(di, tab.neighbours.data(), first);
        for (int m = 0; m < most; ++m) {
          const VI at = hn::Add(first, hn::Set(di, m));
          const MI live = hn::Lt(hn::Set(di, m), length);
          const VI j = hn::GatherIndex(di, tab.neighbours.data(), hn::IfThenElseZero(live, at));
          VF d2 = hn::Zero(df);
          for (int i = 0; i < 4; ++i) {
            const VF q = hn::ConvertTo(df, hn::GatherIndex(di, tab.value[i].data(), j));
            const VF diff = hn::Sub(hn::Mul(scale, q), hn::Set(df, xk[i]));
            d2 = hn::Add(d2, hn::Mul(hn::Mul(hn::Set(df, wk[i]), diff), diff));
          }
          const MI better = hn::And(live, hn::RebindMask(di, hn::Lt(d2, best_d2)));
          best_d2 = hn::IfThenElse(hn::RebindMask(df, better), d2, best_d2);
          best = hn::IfThenElse(better, j, best);
        }
        // Off the grid: the levels (value - 1) / 2 of the best neighbour.
        for (int i = 0; i < 4; ++i) {
          const VI value = hn::GatherIndex(di, tab.value[i].data(), hn::IfThenElseZero(off, best));
          l[i] = hn::IfThenElse(off, hn::ShiftRight<1>(hn::Sub(value, hn::Set(di, 1))), l[i]);
        }
      }
      for (int i = 0; i < 4; ++i) hn::Store(l[i], di, levels[4 * k + i]);
    }
    // gi::WeightedSums per lane: sumqx += w x q, sumq2 += w q q.
    VF sx = hn::Zero(df), s2 = hn::Zero(df);
    for (int e = 0; e < gi::kIq3Group; ++e) {
      const VI li = hn::Load(di, levels[e]);
      const VF q = hn::ConvertTo(df, hn::Add(hn::Add(li, li), hn::Set(di, 1)));
      const VF w = hn::Set(df, weight[e]);
      sx = hn::Add(sx, hn::Mul(hn::Mul(w, hn::Set(df, xval[e])), q));
      s2 = hn::Add(s2, hn::Mul(hn::Mul(w, q), q));
    }
    hn::Store(sx, df, sumqx);
    hn::Store(s2, df, sumq2);
    for (size_t lane = 0; lane < n && t0 + lane < static_cast<size_t>(count); ++lane) {
      const size_t t = t0 + lane;
      for (int e = 0; e < gi::kIq3Group; ++e) {
        trials->L[t][e] = static_cast<int8_t>(levels[e][lane]);
      }
      for (int k = 0; k < gi::kIq3GroupPoints; ++k) trials->on_grid[t][k] = on_grid[k][lane] != 0;
      trials->sumqx[t] = sumqx[lane];
      trials->sumq2[t] = sumq2[lane];
    }
  }
}

void EncodeRows(ggml::Type type, const float* in, size_t count, uint8_t* out, uint64_t* clipped,
                const float* importance) {
  const bool xxs = type == ggml::Type::kIQ3_XXS;
  const size_t bytes = static_cast<size_t>(ggml::Info(type).bytes);
  uint64_t counted = 0;
  for (size_t b = 0; b < count / ggml::kSuperBlock; ++b) {
    const float* x = in + b * ggml::kSuperBlock;
    const float* qw = importance == nullptr ? nullptr : importance + b * ggml::kSuperBlock;
    if (xxs) {
      gi::EncodeIq3XxsWith(x, qw, out + b * bytes, counted, Trials<Iq3Tables::Xxs>);
    } else {
      gi::EncodeIq3SWith(x, qw, out + b * bytes, counted, Trials<Iq3Tables::S>);
    }
  }
  *clipped += counted;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lowp::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lowp::kernels {

HWY_EXPORT(EncodeRows);

void EncodeIq3Fast(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                   uint64_t& clipped, std::span<const float> importance) {
  HWY_DYNAMIC_DISPATCH(EncodeRows)(type, in.data(), in.size(), out.data(), &clipped,
                                   importance.empty() ? nullptr : importance.data());
}

}  // namespace lowp::kernels
#endif  // HWY_ONCE
