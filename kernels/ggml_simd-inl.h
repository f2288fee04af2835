// Lane operations that every SIMD form of ggml's quantizers shares
// (kernels/ggml_*_simd.cc), included once per Highway target after
// foreach_target.h.
#if defined(LOWP_KERNELS_GGML_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LOWP_KERNELS_GGML_SIMD_INL_H_
#undef LOWP_KERNELS_GGML_SIMD_INL_H_
#else
#define LOWP_KERNELS_GGML_SIMD_INL_H_
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace lowp::kernels {
namespace HWY_NAMESPACE {

// ggml's nearest_int, lane by lane: x + 1.5 * 2^23, the integer read from
// the mantissa (so NaN and Inf give what ggml's gives, not a conversion's).
template <class V>
HWY_INLINE auto NearestIntLanes(V v) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::DFromV<V> df;
  const hn::RebindToSigned<decltype(df)> di;
  const auto bits = hn::BitCast(di, hn::Add(v, hn::Set(df, 12582912.f)));
  return hn::Sub(hn::And(bits, hn::Set(di, 0x007fffff)), hn::Set(di, 0x00400000));
}

// The grid searches' reduction over a vector of candidates' distances d2
// (lanes from `valid_lanes` on and NaN lanes count as infinity): when the
// least is strictly below *best_d2, it becomes *best_d2 and the first lane
// holding it is returned; else -1. Applied to the candidates in list order,
// a vector at a time, it keeps the first of equal distances, as the scalar
// walk does.
template <class DF, class VF>
HWY_INLINE int FirstLeastLane(DF df, VF d2, size_t valid_lanes, float* best_d2) {
  namespace hn = hwy::HWY_NAMESPACE;
  const auto valid = hn::And(hn::FirstN(df, valid_lanes), hn::Eq(d2, d2));
  d2 = hn::IfThenElse(valid, d2, hn::Set(df, HUGE_VALF));
  const float least = hn::GetLane(hn::MinOfLanes(df, d2));
  if (!(least < *best_d2)) return -1;
  *best_d2 = least;
  return static_cast<int>(hn::FindFirstTrue(df, hn::Eq(d2, hn::Set(df, least))));
}

// The iq2 and iq3 searches' trials, a vector of them at a time (one lane
// per trial scale). TrialIds: trial t's id (id_of(t - steps), the last
// trial repeated to fill `padded`) and scale 1 / id.
template <class IdOf>
HWY_INLINE void TrialIds(int steps, size_t padded, IdOf id_of, float* ids, float* scales) {
  const size_t count = static_cast<size_t>(2 * steps + 1);
  for (size_t t = 0; t < padded; ++t) {
    ids[t] = id_of(static_cast<int>(t < count ? t : count - 1) - steps);
    scales[t] = 1 / ids[t];
  }
}

// codecs' weighted sums of trials t0.. (one a lane) into `trials` with
// their levels and on-grid flags: sumqx += w x q, sumq2 += w q q over the
// `elements` levels l (q = 2 l + 1), in element order; levels[e][lane],
// on_grid[k][lane] (nonzero: on the grid) for the `groups` groups.
// `elements` and `groups` are ints or, where fixed, std::integral_constant:
// iq3's fixed counts as plain ints cost it 34.5 ms against 26.0 ms
// (ggml_encode_iq_bench), the loops no longer unrolled.
template <size_t kLanes, class Trials, class Elements, class Groups>
HWY_INLINE void StoreTrials(const int32_t (*levels)[kLanes], const int32_t (*on_grid)[kLanes],
                            Elements elements, Groups groups, const float* weight,
                            const float* xval, size_t t0, size_t count, Trials* trials) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  HWY_ALIGN float sumqx[kLanes], sumq2[kLanes];
  auto sx = hn::Zero(df), s2 = hn::Zero(df);
  for (int e = 0; e < elements; ++e) {
    const auto li = hn::Load(di, levels[e]);
    const auto q = hn::ConvertTo(df, hn::Add(hn::Add(li, li), hn::Set(di, 1)));
    const auto w = hn::Set(df, weight[e]);
    sx = hn::Add(sx, hn::Mul(hn::Mul(w, hn::Set(df, xval[e])), q));
    s2 = hn::Add(s2, hn::Mul(hn::Mul(w, q), q));
  }
  hn::Store(sx, df, sumqx);
  hn::Store(s2, df, sumq2);
  for (size_t lane = 0; lane < hn::Lanes(df) && t0 + lane < count; ++lane) {
    const size_t t = t0 + lane;
    for (int e = 0; e < elements; ++e) trials->L[t][e] = static_cast<int8_t>(levels[e][lane]);
    for (int k = 0; k < groups; ++k) trials->on_grid[t][k] = on_grid[k][lane] != 0;
    trials->sumqx[t] = sumqx[lane];
    trials->sumq2[t] = sumq2[lane];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace lowp::kernels
HWY_AFTER_NAMESPACE();

#endif  // LOWP_KERNELS_GGML_SIMD_INL_H_
