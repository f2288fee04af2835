// ggml's iq3_xxs / iq3_s trial search with the trials of one 32-element group
// in SIMD lanes (kernels/ggml_iq3_simd.h): codecs' Iq3TrialsScalar, lane t doing
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
#include <type_traits>
#include <vector>

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/ggml_simd-inl.h"
#include "codecs/ggml_blocks.h"
#include "codecs/ggml_iq3_grids.h"
#include "codecs/ggml_iq3_search.h"
#include "kernels/ggml_iq3_simd.h"

#ifndef LOWP_KERNELS_GGML_IQ3_TABLES_
#define LOWP_KERNELS_GGML_IQ3_TABLES_
namespace lowp::kernels {
// A lattice's search tables as int32 arrays, one gather per look-up: each
// point's entry (-1 on the grid; else where its neighbour list starts << 8 |
// its length), and the lists with each neighbour's 4 lattice values (odd,
// 1..15) packed as nibbles, value i at bit 4 i.
struct Iq3Tables {
  std::vector<int32_t> entry, neighbours;

  explicit Iq3Tables(const ggml::internal::Iq3Lattice& lattice) {
    namespace gi = ggml::internal;
    entry.resize(gi::kIq3Points);
    for (int u = 0; u < gi::kIq3Points; ++u) {
      if (lattice.IndexOf(static_cast<uint16_t>(u)) >= 0) {
        entry[u] = -1;
        continue;
      }
      const auto list = lattice.Neighbours(static_cast<uint16_t>(u));
      HWY_ASSERT(!list.empty() && list.size() < 256 && neighbours.size() < (1u << 23));
      entry[u] = static_cast<int32_t>(neighbours.size() << 8 | list.size());
      for (uint16_t j : list) {
        const int8_t* v = lattice.Values(j);
        neighbours.push_back(v[0] | v[1] << 4 | v[2] << 8 | v[3] << 12);
      }
    }
  }

  static const Iq3Tables& Xxs() {
    static const Iq3Tables* t =
        new Iq3Tables(ggml::internal::Iq3Lattice::Xxs());
    return *t;
  }
  static const Iq3Tables& S() {
    static const Iq3Tables* t =
        new Iq3Tables(ggml::internal::Iq3Lattice::S());
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

template <const Iq3Tables& (*kTables)()>
void Trials(const gi::Iq3Variant& v, const float* xval, const float* weight, const float* waux,
            float max, gi::Iq3Trials* trials) {
  const Iq3Tables& tab = kTables();
  const DF df;
  const DI di;
  const size_t n = hn::Lanes(df);
  const int count = 2 * v.steps + 1;
  HWY_ALIGN float ids[kPadded], scales[kPadded];
  TrialIds(v.steps, kPadded, [max](int is) { return gi::Iq3TrialId(is, max); }, ids, scales);
  HWY_ALIGN int32_t levels[gi::kIq3Group][kMaxLanes];
  HWY_ALIGN int32_t on_grid[gi::kIq3GroupPoints][kMaxLanes];
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
        l[i] = hn::Min(hn::Max(NearestIntLanes(a), zero), top);
        u = hn::Or(u, hn::ShiftLeftSame(l[i], 3 * i));
      }
      const VI entry = hn::GatherIndex(di, tab.entry.data(), u);
      const MI off = hn::Gt(entry, hn::Set(di, -1));
      hn::Store(hn::VecFromMask(di, hn::Not(off)), di, on_grid[k]);
      if (!hn::AllFalse(di, off)) {
        const VI first = hn::IfThenElseZero(off, hn::ShiftRight<8>(entry));
        const VI length = hn::IfThenElseZero(off, hn::And(entry, hn::Set(di, 255)));
        const int most = hn::GetLane(hn::MaxOfLanes(di, length));
        VF best_d2 = hn::Set(df, FLT_MAX);
        VI best = hn::GatherIndex(di, tab.neighbours.data(), first);
        for (int m = 0; m < most; ++m) {
          const MI live = hn::Lt(hn::Set(di, m), length);
          const VI at = hn::IfThenElseZero(live, hn::Add(first, hn::Set(di, m)));
          const VI packed = hn::GatherIndex(di, tab.neighbours.data(), at);
          VF d2 = hn::Zero(df);
          for (int i = 0; i < 4; ++i) {
            const VI value = hn::And(hn::ShiftRightSame(packed, 4 * i), hn::Set(di, 15));
            const VF diff = hn::Sub(hn::Mul(scale, hn::ConvertTo(df, value)), hn::Set(df, xk[i]));
            d2 = hn::Add(d2, hn::Mul(hn::Mul(hn::Set(df, wk[i]), diff), diff));
          }
          const MI better = hn::And(live, hn::RebindMask(di, hn::Lt(d2, best_d2)));
          best_d2 = hn::IfThenElse(hn::RebindMask(df, better), d2, best_d2);
          best = hn::IfThenElse(better, packed, best);
        }
        // Off the grid: the levels (value - 1) / 2 of the best neighbour.
        for (int i = 0; i < 4; ++i) {
          const VI value = hn::And(hn::ShiftRightSame(best, 4 * i), hn::Set(di, 15));
          l[i] = hn::IfThenElse(off, hn::ShiftRight<1>(value), l[i]);
        }
      }
      for (int i = 0; i < 4; ++i) hn::Store(l[i], di, levels[4 * k + i]);
    }
    // gi::WeightedSums per lane.
    StoreTrials(levels, on_grid, std::integral_constant<int, gi::kIq3Group>(),
                std::integral_constant<int, gi::kIq3GroupPoints>(), weight, xval, t0,
                static_cast<size_t>(count), trials);
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
