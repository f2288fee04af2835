// The group searches of codecs/ggml_kquants_search.cc (make_qkx2_quants,
// make_qkx3_quants, make_q3_quants, make_qx_quants) with one group per
// vector lane, compiled once per Highway target (foreach_target.h re-includes
// this file) and chosen once per row. A group's elements sit lane-major
// (element i of the group in lane k at [i * N + k]), so each lane runs the
// scalar search's float operations in its order: sums accumulate element by
// element, products associate as there, `if (better)` is a masked select, and
// nearest_int is ggml's add-1.5*2^23-and-read-the-mantissa trick on the bits.
// Division, sqrt, abs, add and multiply are IEEE-exact in every lane and the
// kernels build without FMA contraction, so each lane's fit is the scalar
// one bit for bit, NaN and Inf included. codecs' Finish*/Store* then make
// the block bytes from the fits.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ggml_kquants_simd.cc"
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "codecs/ggml.h"
#include "codecs/ggml_blocks.h"
#include "codecs/ggml_kquants_parts.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/ggml_simd-inl.h"
#include "kernels/ggml_kquants_simd.h"

HWY_BEFORE_NAMESPACE();
namespace lowp::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using DI = hn::RebindToSigned<DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;
using MF = hn::Mask<DF>;

// Lanes of the widest vector any target has: the size of per-lane buffers.
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(float);
// The largest group: 32 elements.
constexpr int kMaxGroup = 32;
constexpr float kGroupMaxEps = 1e-15f;  // GROUP_MAX_EPS

template <class V>
HWY_INLINE V Clamp(V v, int lo, int hi) {
  const hn::DFromV<V> di;
  return hn::Min(hn::Max(v, hn::Set(di, lo)), hn::Set(di, hi));
}

HWY_INLINE MF ToFloatMask(hn::Mask<DI> m) { return hn::RebindMask(DF(), m); }

// The signed element of largest magnitude (first on ties) and its magnitude,
// per lane: SignedMax.
template <int n>
HWY_INLINE void SignedMaxLanes(const float* HWY_RESTRICT x, VF& max, VF& amax) {
  const DF df;
  const size_t N = hn::Lanes(df);
  amax = hn::Zero(df);
  max = hn::Zero(df);
  for (int i = 0; i < n; ++i) {
    const VF xi = hn::LoadU(df, x + i * N);
    const VF a = hn::Abs(xi);
    const MF gt = amax < a;
    amax = hn::IfThenElse(gt, a, amax);
    max = hn::IfThenElse(gt, xi, max);
  }
}

// MakeQkx2Quants (and make_qkx3_quants) per lane: x, w lane-major groups of
// n; writes each lane's codes (lane-major), scale and negated minimum.
// Returns the clamped codes of the returned codes.
template <int n, bool kMad>
HWY_NOINLINE uint64_t Qkx2Lanes(int nmax, const float* HWY_RESTRICT x, const float* HWY_RESTRICT w,
                                float rmin, float rdelta, int nstep, int32_t* HWY_RESTRICT codes,
                                float* HWY_RESTRICT scale_out, float* HWY_RESTRICT the_min_out) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  const VF zero = hn::Zero(df);
  VF min = hn::LoadU(df, x);
  VF max = min;
  VF sum_w = hn::LoadU(df, w);
  VF sum_x = hn::Mul(sum_w, min);
  for (int i = 1; i < n; ++i) {
    const VF xi = hn::LoadU(df, x + i * N);
    const VF wi = hn::LoadU(df, w + i * N);
    min = hn::IfThenElse(xi < min, xi, min);
    max = hn::IfThenElse(xi > max, xi, max);
    sum_w = hn::Add(sum_w, wi);
    sum_x = hn::Add(sum_x, hn::Mul(wi, xi));
  }
  min = hn::IfThenElse(min > zero, zero, min);
  const MF flat = max == min;  // ggml returns scale 0, codes 0
  const VF vnmax = hn::Set(df, static_cast<float>(nmax));
  VF iscale = hn::Div(vnmax, hn::Sub(max, min));
  VF scale = hn::Div(hn::Set(df, 1.f), iscale);
  const auto error_term = [](VF diff) { return kMad ? hn::Abs(diff) : hn::Mul(diff, diff); };
  VF best_error = zero;
  for (int i = 0; i < n; ++i) {
    const VF xi = hn::LoadU(df, x + i * N);
    const VI l = Clamp(NearestIntLanes(hn::Mul(iscale, hn::Sub(xi, min))), 0, nmax);
    const VF diff = hn::Sub(hn::Add(hn::Mul(scale, hn::ConvertTo(df, l)), min), xi);
    best_error = hn::Add(best_error, hn::Mul(hn::LoadU(df, w + i * N), error_term(diff)));
  }
  // The trial that made the best codes (its iscale and the minimum it
  // measured from): the codes are recomputed from it once at the end.
  VF l_iscale = iscale, l_min = min;
  HWY_ALIGN float laux[kMaxGroup * kMaxLanes];
  for (int is = 0; nstep >= 1 && is <= nstep; ++is) {
    const float numerator = rmin + rdelta * static_cast<float>(is) + static_cast<float>(nmax);
    iscale = hn::Div(hn::Set(df, numerator), hn::Sub(max, min));
    VF sum_l = zero, sum_l2 = zero, sum_xl = zero;
    for (int i = 0; i < n; ++i) {
      const VF xi = hn::LoadU(df, x + i * N);
      const VF wi = hn::LoadU(df, w + i * N);
      const VF l = hn::ConvertTo(df, Clamp(NearestIntLanes(hn::Mul(iscale, hn::Sub(xi, min))), 0, nmax));
      hn::Store(l, df, laux + i * N);
      const VF wl = hn::Mul(wi, l);
      sum_l = hn::Add(sum_l, wl);
      sum_l2 = hn::Add(sum_l2, hn::Mul(wl, l));
      sum_xl = hn::Add(sum_xl, hn::Mul(wl, xi));
    }
    const VF D = hn::Sub(hn::Mul(sum_w, sum_l2), hn::Mul(sum_l, sum_l));
    const MF fit = hn::AndNot(flat, D > zero);
    if (hn::AllFalse(df, fit)) continue;
    VF this_scale = hn::Div(hn::Sub(hn::Mul(sum_w, sum_xl), hn::Mul(sum_x, sum_l)), D);
    VF this_min = hn::Div(hn::Sub(hn::Mul(sum_l2, sum_x), hn::Mul(sum_l, sum_xl)), D);
    const MF positive = this_min > zero;
    this_min = hn::IfThenElse(positive, zero, this_min);
    this_scale = hn::IfThenElse(positive, hn::Div(sum_xl, sum_l2), this_scale);
    VF cur_error = zero;
    for (int i = 0; i < n; ++i) {
      const VF xi = hn::LoadU(df, x + i * N);
      const VF l = hn::Load(df, laux + i * N);
      const VF diff = hn::Sub(hn::Add(hn::Mul(this_scale, l), this_min), xi);
      cur_error = hn::Add(cur_error, hn::Mul(hn::LoadU(df, w + i * N), error_term(diff)));
    }
    const MF better = hn::And(fit, cur_error < best_error);
    best_error = hn::IfThenElse(better, cur_error, best_error);
    l_iscale = hn::IfThenElse(better, iscale, l_iscale);
    l_min = hn::IfThenElse(better, min, l_min);
    scale = hn::IfThenElse(better, this_scale, scale);
    min = hn::IfThenElse(better, this_min, min);
  }
  const auto kept = hn::RebindMask(di, hn::Not(flat));
  uint64_t clipped = 0;
  for (int i = 0; i < n; ++i) {
    const VF xi = hn::LoadU(df, x + i * N);
    const VI raw = NearestIntLanes(hn::Mul(l_iscale, hn::Sub(xi, l_min)));
    const VI l = Clamp(raw, 0, nmax);
    clipped += hn::CountTrue(di, hn::And(kept, raw != l));
    hn::StoreU(hn::IfThenElseZero(kept, l), di, codes + i * N);
  }
  hn::StoreU(hn::IfThenElseZero(hn::Not(flat), scale), df, scale_out);
  hn::StoreU(hn::Neg(min), df, the_min_out);
  return clipped;
}

// MakeQxQuants per lane (w null: x^2 weights): codes + nmax, lane-major.
// Returns the clamped codes of the returned codes.
template <int n>
HWY_NOINLINE uint64_t QxLanes(int nmax, const float* HWY_RESTRICT x, const float* HWY_RESTRICT w,
                              int32_t* HWY_RESTRICT codes, float* HWY_RESTRICT scale_out) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  const VF zero = hn::Zero(df);
  VF max, amax;
  SignedMaxLanes<n>(x, max, amax);
  const MF tiny = amax < hn::Set(df, kGroupMaxEps);  // ggml returns scale 0, codes 0
  const auto weight = [&](int i, VF xi) {
    return w != nullptr ? hn::LoadU(df, w + i * N) : hn::Mul(xi, xi);
  };
  // The fit's sums for one trial iscale.
  const auto sums = [&](VF iscale, VF& sumlx, VF& suml2) {
    sumlx = zero;
    suml2 = zero;
    for (int i = 0; i < n; ++i) {
      const VF xi = hn::LoadU(df, x + i * N);
      const VF l = hn::ConvertTo(df, Clamp(NearestIntLanes(hn::Mul(iscale, xi)), -nmax, nmax - 1));
      const VF wi = weight(i, xi);
      sumlx = hn::Add(sumlx, hn::Mul(hn::Mul(wi, xi), l));
      suml2 = hn::Add(suml2, hn::Mul(hn::Mul(wi, l), l));
    }
  };
  VF best_iscale = hn::Div(hn::Set(df, static_cast<float>(-nmax)), max);
  VF sumlx, suml2;
  sums(best_iscale, sumlx, suml2);
  // ggml's `suml2 ? ... : 0`: a NaN sum counts as nonzero (Highway's != is
  // ordered, so not ==).
  VF scale = hn::IfThenElseZero(hn::Not(suml2 == zero), hn::Div(sumlx, suml2));
  VF best = hn::Mul(scale, sumlx);
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    const float numerator = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is));
    const VF iscale = hn::Div(hn::Set(df, numerator), max);
    sums(iscale, sumlx, suml2);
    const MF better =
        hn::And(suml2 > zero, hn::Mul(sumlx, sumlx) > hn::Mul(best, suml2));
    if (hn::AllFalse(df, better)) continue;
    best_iscale = hn::IfThenElse(better, iscale, best_iscale);
    const VF this_scale = hn::Div(sumlx, suml2);
    scale = hn::IfThenElse(better, this_scale, scale);
    best = hn::IfThenElse(better, hn::Mul(this_scale, sumlx), best);
  }
  const auto kept = hn::RebindMask(di, hn::Not(tiny));
  uint64_t clipped = 0;
  for (int i = 0; i < n; ++i) {
    const VF xi = hn::LoadU(df, x + i * N);
    const VI raw = NearestIntLanes(hn::Mul(best_iscale, xi));
    const VI l = Clamp(raw, -nmax, nmax - 1);
    clipped += hn::CountTrue(di, hn::And(kept, raw != l));
    hn::StoreU(hn::IfThenElseZero(kept, hn::Add(l, hn::Set(di, nmax))), di, codes + i * N);
  }
  hn::StoreU(hn::IfThenElseZero(hn::Not(tiny), scale), df, scale_out);
  return clipped;
}

// MakeQ3Quants per lane (x^2 weights, up to 5 refinement passes per lane,
// a lane stopping after a pass that moved no code): codes + nmax.
template <int n>
HWY_NOINLINE void Q3Lanes(int nmax, const float* HWY_RESTRICT x, int32_t* HWY_RESTRICT codes,
                          float* HWY_RESTRICT scale_out) {
  const DF df;
  const DI di;
  const size_t N = hn::Lanes(df);
  const VF zero = hn::Zero(df);
  VF max, amax;
  SignedMaxLanes<n>(x, max, amax);
  const MF tiny = amax < hn::Set(df, kGroupMaxEps);
  const VF iscale = hn::Div(hn::Set(df, static_cast<float>(-nmax)), max);
  HWY_ALIGN float L[kMaxGroup * kMaxLanes];
  VF sumlx = zero, suml2 = zero;
  for (int i = 0; i < n; ++i) {
    const VF xi = hn::LoadU(df, x + i * N);
    const VF l = hn::ConvertTo(df, Clamp(NearestIntLanes(hn::Mul(iscale, xi)), -nmax, nmax - 1));
    hn::Store(l, df, L + i * N);
    const VF wi = hn::Mul(xi, xi);
    sumlx = hn::Add(sumlx, hn::Mul(hn::Mul(wi, xi), l));
    suml2 = hn::Add(suml2, hn::Mul(hn::Mul(wi, l), l));
  }
  MF active = hn::Not(tiny);
  for (int itry = 0; itry < 5 && !hn::AllFalse(df, active); ++itry) {
    MF changed = hn::FirstN(df, 0);
    for (int i = 0; i < n; ++i) {
      const VF xi = hn::LoadU(df, x + i * N);
      const VF wi = hn::Mul(xi, xi);
      const VF li = hn::Load(df, L + i * N);
      VF slx = hn::Sub(sumlx, hn::Mul(hn::Mul(wi, xi), li));
      const MF positive = hn::And(active, slx > zero);
      if (hn::AllFalse(df, positive)) continue;
      VF sl2 = hn::Sub(suml2, hn::Mul(hn::Mul(wi, li), li));
      const VF new_l = hn::ConvertTo(
          df, Clamp(NearestIntLanes(hn::Div(hn::Mul(xi, sl2), slx)), -nmax, nmax - 1));
      const MF moved = hn::And(positive, new_l != li);
      slx = hn::Add(slx, hn::Mul(hn::Mul(wi, xi), new_l));
      sl2 = hn::Add(sl2, hn::Mul(hn::Mul(wi, new_l), new_l));
      const MF take = hn::And(
          hn::And(moved, sl2 > zero),
          hn::Mul(hn::Mul(slx, slx), suml2) > hn::Mul(hn::Mul(sumlx, sumlx), sl2));
      hn::Store(hn::IfThenElse(take, new_l, li), df, L + i * N);
      sumlx = hn::IfThenElse(take, slx, sumlx);
      suml2 = hn::IfThenElse(take, sl2, suml2);
      changed = hn::Or(changed, take);
    }
    active = hn::And(active, changed);
  }
  const auto kept = hn::RebindMask(di, hn::Not(tiny));
  for (int i = 0; i < n; ++i) {
    const VI l = hn::ConvertTo(di, hn::Load(df, L + i * N));
    hn::StoreU(hn::IfThenElseZero(kept, hn::Add(l, hn::Set(di, nmax))), di, codes + i * N);
  }
  const VF scale = hn::IfThenElseZero(suml2 > zero, hn::Div(sumlx, suml2));
  hn::StoreU(hn::IfThenElseZero(hn::Not(tiny), scale), df, scale_out);
}

// ------------------------------ Groups in lanes

// One vector's worth of groups in lane-major layout: x and its weights, and
// what the search returns per lane.
struct LaneGroups {
  HWY_ALIGN float x[kMaxGroup * kMaxLanes];
  HWY_ALIGN float w[kMaxGroup * kMaxLanes];
  HWY_ALIGN int32_t codes[kMaxGroup * kMaxLanes];
  HWY_ALIGN float scale[kMaxLanes];
  HWY_ALIGN float the_min[kMaxLanes];
  HWY_ALIGN float weight_sum[kMaxLanes];
};

// Groups first..first+count of n elements (group g at src + g * n) into
// g's lanes; lanes past count get zeros (a flat group, fitted and dropped).
void Gather(const float* src, size_t first, size_t count, int n, size_t N, float* dst) {
  for (size_t k = 0; k < N; ++k) {
    if (k < count) {
      const float* g = src + (first + k) * n;
      for (int i = 0; i < n; ++i) dst[i * N + k] = g[i];
    } else {
      for (int i = 0; i < n; ++i) dst[i * N + k] = 0.f;
    }
  }
}

// Importance weights qw * sqrt(sigma2 + x^2) with sigma2 per lane, and their
// sums in element order.
template <int n>
void ImportanceLanes(const float* sigma2_per_lane, LaneGroups& g) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const VF sigma2 = hn::LoadU(df, sigma2_per_lane);
  VF sum = hn::Zero(df);
  for (int i = 0; i < n; ++i) {
    const VF xi = hn::Load(df, g.x + i * N);
    const VF wi =
        hn::Mul(hn::Load(df, g.w + i * N), hn::Sqrt(hn::Add(sigma2, hn::Mul(xi, xi))));
    hn::Store(wi, df, g.w + i * N);
    sum = hn::Add(sum, wi);
  }
  hn::StoreU(sum, df, g.weight_sum);
}

// q4_K/q5_K reference weights: the group's rms av_x plus |x|.
void RmsPlusAbsLanes(LaneGroups& g) {
  const DF df;
  const size_t N = hn::Lanes(df);
  VF sum = hn::Zero(df);
  for (int i = 0; i < 32; ++i) {
    const VF xi = hn::Load(df, g.x + i * N);
    sum = hn::Add(sum, hn::Mul(xi, xi));
  }
  const VF av_x = hn::Sqrt(hn::Div(sum, hn::Set(df, 32.f)));
  for (int i = 0; i < 32; ++i) {
    hn::Store(hn::Add(av_x, hn::Abs(hn::Load(df, g.x + i * N))), df, g.w + i * N);
  }
}

void AbsLanes(int n, LaneGroups& g) {
  const DF df;
  const size_t N = hn::Lanes(df);
  for (int i = 0; i < n; ++i) hn::Store(hn::Abs(hn::Load(df, g.x + i * N)), df, g.w + i * N);
}

// ------------------------------ The k-quants

// codecs' Requantize (the finish's element-wise pass) with lanes of one
// group: the same division and nearest_int per element.
void RequantizeLanes(const float* x, const ggml::internal::KRequant& r, uint8_t* codes,
                     uint64_t& clipped) {
  const hn::CappedTag<float, 16> df;  // a group (16 or 32) is whole vectors
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<uint8_t, decltype(df)> du8;
  const size_t N = hn::Lanes(df);
  const auto lo = hn::Set(di, r.lo);
  for (int j = 0; j < r.groups; ++j) {
    const float d = r.d[j];
    if (!d) continue;
    const auto vd = hn::Set(df, d);
    const auto vdm = hn::Set(df, r.dm[j]);
    for (size_t ii = 0; ii < static_cast<size_t>(r.group); ii += N) {
      const size_t at = static_cast<size_t>(r.group * j) + ii;
      auto v = hn::LoadU(df, x + at);
      if (r.with_min) v = hn::Add(v, vdm);
      const auto raw = NearestIntLanes(hn::Div(v, vd));
      const auto l = Clamp(raw, r.lo, r.hi);
      clipped += hn::CountTrue(di, raw != l);
      hn::StoreU(hn::DemoteTo(du8, hn::Sub(l, lo)), du8, codes + at);
    }
  }
}

using FinishFn = void (*)(const float* x, bool weighted, ggml::internal::KGroupFits& fits,
                          uint8_t* out, uint64_t& clipped, ggml::internal::RequantizeFn);

void FinishQ6(const float* x, bool, ggml::internal::KGroupFits& fits, uint8_t* out,
              uint64_t& clipped, ggml::internal::RequantizeFn requantize) {
  ggml::internal::FinishQ6_K(x, fits, out, clipped, requantize);
}

void EncodeKQuant(ggml::Type type, const float* in, size_t size, uint8_t* out, uint64_t* clipped,
                  const float* importance) {
  namespace gi = ggml::internal;
  const DF df;
  const size_t N = hn::Lanes(df);
  constexpr int kBlock = ggml::kSuperBlock;
  const size_t blocks = size / kBlock;
  const bool weighted = importance != nullptr;
  int n = 16;  // group size
  size_t bytes = 0;
  FinishFn finish = nullptr;
  switch (type) {
    case ggml::Type::kQ2_K: bytes = sizeof(ggml::BlockQ2_K), finish = gi::FinishQ2_K; break;
    case ggml::Type::kQ3_K: bytes = sizeof(ggml::BlockQ3_K), finish = gi::FinishQ3_K; break;
    case ggml::Type::kQ4_K: n = 32, bytes = sizeof(ggml::BlockQ4_K), finish = gi::FinishQ4_K; break;
    case ggml::Type::kQ5_K: n = 32, bytes = sizeof(ggml::BlockQ5_K), finish = gi::FinishQ5_K; break;
    case ggml::Type::kQ6_K: bytes = sizeof(ggml::BlockQ6_K), finish = FinishQ6; break;
    default: return;
  }
  const int per_block = kBlock / n;
  // sigma2 of the importance weights per super-block: the mean square (q2_K)
  // or twice it (q3_K, q4_K, q5_K), as the scalar searches compute it.
  std::vector<float> sigma2(weighted ? blocks : 0);
  for (size_t b = 0; b < sigma2.size(); ++b) {
    const float sum = gi::SumSquares(in + b * kBlock, kBlock);
    sigma2[b] = type == ggml::Type::kQ2_K ? sum / kBlock : 2 * sum / kBlock;
  }
  std::vector<gi::KGroupFits> fits(blocks);
  LaneGroups g = {};
  HWY_ALIGN float lane_sigma2[kMaxLanes];
  // The searches' clamps are not counted: the finish counts those of the
  // codes it requantizes.
  const size_t groups = blocks * per_block;
  for (size_t first = 0; first < groups; first += N) {
    const size_t count = std::min(N, groups - first);
    Gather(in, first, count, n, N, g.x);
    if (weighted) {
      Gather(importance, first, count, n, N, g.w);
    }
    if (weighted && type != ggml::Type::kQ6_K) {
      for (size_t k = 0; k < N; ++k) lane_sigma2[k] = k < count ? sigma2[(first + k) / per_block] : 0.f;
      if (n == 16) {
        ImportanceLanes<16>(lane_sigma2, g);
      } else {
        ImportanceLanes<32>(lane_sigma2, g);
      }
    }
    switch (type) {
      case ggml::Type::kQ2_K:
        if (weighted) {
          Qkx2Lanes<16, false>(3, g.x, g.w, -0.9f, 0.05f, 36, g.codes, g.scale,
                                                 g.the_min);
        } else {
          AbsLanes(16, g);
          Qkx2Lanes<16, true>(3, g.x, g.w, -0.5f, 0.1f, 15, g.codes, g.scale,
                                                g.the_min);
        }
        break;
      case ggml::Type::kQ3_K:
        if (weighted) {
          QxLanes<16>(4, g.x, g.w, g.codes, g.scale);
        } else {
          Q3Lanes<16>(4, g.x, g.codes, g.scale);
        }
        break;
      case ggml::Type::kQ4_K:
      case ggml::Type::kQ5_K: {
        const int nmax = type == ggml::Type::kQ4_K ? 15 : 31;
        if (weighted) {
          Qkx2Lanes<32, false>(nmax, g.x, g.w, -0.9f, 0.05f, 36, g.codes,
                                                 g.scale, g.the_min);
        } else {
          RmsPlusAbsLanes(g);
          const float rmin = type == ggml::Type::kQ4_K ? -1.f : -0.5f;
          const int nstep = type == ggml::Type::kQ4_K ? 20 : 15;
          Qkx2Lanes<32, false>(nmax, g.x, g.w, rmin, 0.1f, nstep, g.codes,
                                                 g.scale, g.the_min);
        }
        break;
      }
      default:  // q6_K: the importance itself, or x^2
        QxLanes<16>(32, g.x, weighted ? g.w : nullptr, g.codes, g.scale);
        break;
    }
    for (size_t k = 0; k < count; ++k) {
      gi::KGroupFits& f = fits[(first + k) / per_block];
      const int j = static_cast<int>((first + k) % per_block);
      f.scales[j] = g.scale[k];
      f.mins[j] = g.the_min[k];
      f.weight_sums[j] = g.weight_sum[k];
      for (int i = 0; i < n; ++i) f.codes[j * n + i] = static_cast<uint8_t>(g.codes[i * N + k]);
    }
  }
  for (size_t b = 0; b < blocks; ++b) {
    finish(in + b * kBlock, weighted, fits[b], out + b * bytes, *clipped, RequantizeLanes);
  }
}

// ------------------------------ The weighted legacy types

void EncodeLegacyWeighted(ggml::Type type, const float* in, size_t size, uint8_t* out,
                          uint64_t* clipped, const float* importance) {
  namespace gi = ggml::internal;
  const DF df;
  const size_t N = hn::Lanes(df);
  const size_t blocks = size / 32;
  const float sigma2 = gi::RowMeanSquare(in, size);
  HWY_ALIGN float lane_sigma2[kMaxLanes];
  for (size_t k = 0; k < N; ++k) lane_sigma2[k] = sigma2;
  LaneGroups g = {};
  uint8_t codes[32];
  for (size_t first = 0; first < blocks; first += N) {
    const size_t count = std::min(N, blocks - first);
    Gather(in, first, count, 32, N, g.x);
    Gather(importance, first, count, 32, N, g.w);
    ImportanceLanes<32>(lane_sigma2, g);
    // Padding lanes are flat (all zero) and count no clamps.
    switch (type) {
      case ggml::Type::kQ4_0: *clipped += QxLanes<32>(8, g.x, g.w, g.codes, g.scale); break;
      case ggml::Type::kQ5_0: *clipped += QxLanes<32>(16, g.x, g.w, g.codes, g.scale); break;
      case ggml::Type::kQ4_1:
        *clipped += Qkx2Lanes<32, false>(15, g.x, g.w, -0.9f, 0.05f, 36, g.codes, g.scale,
                                         g.the_min);
        break;
      default:  // q5_1
        *clipped += Qkx2Lanes<32, false>(31, g.x, g.w, -0.9f, 0.05f, 36, g.codes, g.scale,
                                         g.the_min);
        break;
    }
    for (size_t k = 0; k < count; ++k) {
      for (int i = 0; i < 32; ++i) codes[i] = static_cast<uint8_t>(g.codes[i * N + k]);
      const size_t b = first + k;
      switch (type) {
        case ggml::Type::kQ4_0: gi::StoreQ4_0(g.scale[k], codes, out + b * sizeof(ggml::BlockQ4_0)); break;
        case ggml::Type::kQ5_0: gi::StoreQ5_0(g.scale[k], codes, out + b * sizeof(ggml::BlockQ5_0)); break;
        case ggml::Type::kQ4_1:
          gi::StoreQ4_1(g.scale[k], g.the_min[k], codes, out + b * sizeof(ggml::BlockQ4_1));
          break;
        default:
          gi::StoreQ5_1(g.scale[k], g.the_min[k], codes, out + b * sizeof(ggml::BlockQ5_1));
          break;
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace lowp::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lowp::kernels {

HWY_EXPORT(EncodeKQuant);
HWY_EXPORT(EncodeLegacyWeighted);

void EncodeKQuantSimd(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                      uint64_t& clipped, std::span<const float> importance) {
  HWY_DYNAMIC_DISPATCH(EncodeKQuant)
  (type, in.data(), in.size(), out.data(), &clipped,
   importance.empty() ? nullptr : importance.data());
}

void EncodeLegacyWeightedSimd(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                              uint64_t& clipped, std::span<const float> importance) {
  if (importance.empty()) {
    // Without importance these types have no search: codecs' Encode is the
    // whole work (its checks have passed already).
    (void)ggml::Encode(type, in, out, &clipped, importance);
    return;
  }
  HWY_DYNAMIC_DISPATCH(EncodeLegacyWeighted)
  (type, in.data(), in.size(), out.data(), &clipped, importance.data());
}

}  // namespace lowp::kernels
#endif  // HWY_ONCE
