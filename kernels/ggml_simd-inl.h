// Lane operations that every SIMD form of ggml's quantizers shares
// (kernels/ggml_*_simd.cc), included once per Highway target after
// foreach_target.h.
#if defined(LOWP_KERNELS_GGML_SIMD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef LOWP_KERNELS_GGML_SIMD_INL_H_
#undef LOWP_KERNELS_GGML_SIMD_INL_H_
#else
#define LOWP_KERNELS_GGML_SIMD_INL_H_
#endif

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

}  // namespace HWY_NAMESPACE
}  // namespace lowp::kernels
HWY_AFTER_NAMESPACE();

#endif  // LOWP_KERNELS_GGML_SIMD_INL_H_
