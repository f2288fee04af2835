// The quantization kernels of kernels/quantize.h, compiled once per Highway
// target (foreach_target.h re-includes this file) and chosen at run time.
// Every float operation is one the scalar references in kernels/quantize.cc
// also do, in the same precision, so results match them bit for bit; only the
// sums of ComparePairs differ: they run in float over short runs, then in
// double, within the bound that kernels/error_stats.h states.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/quantize_simd.cc"
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/blocks.h"
#include "kernels/quantize.h"

HWY_BEFORE_NAMESPACE();
namespace lowp::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

constexpr float kInf = std::numeric_limits<float>::infinity();

// ------------------------------ Block absmax and min/max

// max |v| over the finite v of p[0, n), 0 when none. Max is idempotent, so a
// short end is covered by one more vector overlapping the previous ones.
HWY_INLINE float AbsMaxRange(const float* HWY_RESTRICT p, size_t n) {
  const DF d;
  const size_t N = hn::Lanes(d);
  if (n < N) {
    float m = 0;
    for (size_t i = 0; i < n; ++i) {
      const float a = std::fabs(p[i]);
      if (a < kInf && a > m) m = a;
    }
    return m;
  }
  const auto inf = hn::Set(d, kInf);
  auto finite_abs = [&](size_t i) {
    const auto a = hn::Abs(hn::LoadU(d, p + i));
    return hn::IfThenElseZero(hn::Lt(a, inf), a);  // NaN compares false
  };
  auto m0 = hn::Zero(d), m1 = hn::Zero(d), m2 = hn::Zero(d), m3 = hn::Zero(d);
  size_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    m0 = hn::Max(m0, finite_abs(i));
    m1 = hn::Max(m1, finite_abs(i + N));
    m2 = hn::Max(m2, finite_abs(i + 2 * N));
    m3 = hn::Max(m3, finite_abs(i + 3 * N));
  }
  for (; i + N <= n; i += N) m0 = hn::Max(m0, finite_abs(i));
  if (i < n) m1 = hn::Max(m1, finite_abs(n - N));
  const auto m = hn::Max(hn::Max(m0, m1), hn::Max(m2, m3));
  return hn::GetLane(hn::MaxOfLanes(d, m));
}

// Min and max over the finite v of p[0, n), both 0 when none; a zero result
// is +0.
HWY_INLINE void MinMaxRange(const float* HWY_RESTRICT p, size_t n, float* lo_out, float* hi_out) {
  const DF d;
  const size_t N = hn::Lanes(d);
  float lo = kInf, hi = -kInf;
  if (n < N) {
    for (size_t i = 0; i < n; ++i) {
      const float v = p[i];
      if (!(std::fabs(v) < kInf)) continue;
      lo = v < lo ? v : lo;
      hi = v > hi ? v : hi;
    }
  } else {
    const auto inf = hn::Set(d, kInf);
    const auto minus_inf = hn::Set(d, -kInf);
    auto lo0 = inf, lo1 = inf, hi0 = minus_inf, hi1 = minus_inf;
    auto step = [&](size_t i, decltype(lo0)& lo_acc, decltype(hi0)& hi_acc) {
      const auto v = hn::LoadU(d, p + i);
      const auto finite = hn::Lt(hn::Abs(v), inf);
      lo_acc = hn::Min(lo_acc, hn::IfThenElse(finite, v, inf));
      hi_acc = hn::Max(hi_acc, hn::IfThenElse(finite, v, minus_inf));
    };
    size_t i = 0;
    for (; i + 2 * N <= n; i += 2 * N) {
      step(i, lo0, hi0);
      step(i + N, lo1, hi1);
    }
    for (; i + N <= n; i += N) step(i, lo0, hi0);
    if (i < n) step(n - N, lo1, hi1);
    lo = hn::GetLane(hn::MinOfLanes(d, hn::Min(lo0, lo1)));
    hi = hn::GetLane(hn::MaxOfLanes(d, hn::Max(hi0, hi1)));
  }
  if (lo > hi) lo = hi = 0;  // no finite element
  *lo_out = lo == 0 ? 0.0f : lo;
  *hi_out = hi == 0 ? 0.0f : hi;
}

// For blocks of a few vectors the horizontal reduction of each block costs
// more than its elements: Lanes(d) whole blocks, consecutive in memory, are
// reduced together. v[k] holds block k's lane-wise partial result; each
// level combines adjacent lanes of every pair of vectors (ConcatEven and
// ConcatOdd), halving the lanes per block, until lane k of the result is
// block k's.
template <class D, class Op>
HWY_INLINE hn::Vec<D> TransposeReduce(D d, hn::Vec<D>* v, Op op) {
#if HWY_TARGET == HWY_SCALAR
  (void)d;
  (void)op;
  return v[0];
#else
  for (size_t count = hn::Lanes(d); count > 1; count /= 2) {
    for (size_t j = 0; j < count / 2; ++j) {
      v[j] =
          op(hn::ConcatEven(d, v[2 * j + 1], v[2 * j]), hn::ConcatOdd(d, v[2 * j + 1], v[2 * j]));
    }
  }
  return v[0];
#endif
}

// Whether blocks of `block` along rows of `cols` are reduced Lanes at a time:
// whole vectors per block, whole blocks per row, and few enough vectors that
// the reduction matters.
HWY_INLINE bool GroupedBlocks(int64_t cols, int64_t block) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(DF()));
  return N > 1 && block % N == 0 && cols % block == 0 && block <= 16 * N;
}

// amax[k] and, with kSigned, the signed max and min of the finite elements
// of blocks first .. first + Lanes (non-finite ones as 0).
template <bool kSigned>
HWY_INLINE void ReduceBlockGroup(const float* HWY_RESTRICT x, size_t block,
                                 float* HWY_RESTRICT amax, float* HWY_RESTRICT max,
                                 float* HWY_RESTRICT min) {
  const DF d;
  constexpr size_t kMax = HWY_MAX_BYTES / sizeof(float);
  const size_t N = hn::Lanes(d);
  const auto inf = hn::Set(d, kInf);
  hn::Vec<DF> hi[kMax], lo[kMax];
  for (size_t k = 0; k < N; ++k) {
    const float* p = x + k * block;
    auto h = hn::Zero(d), l = hn::Zero(d);
    for (size_t i = 0; i < block; i += N) {
      const auto v = hn::LoadU(d, p + i);
      if constexpr (kSigned) {
        const auto f = hn::IfThenElseZero(hn::Lt(hn::Abs(v), inf), v);
        h = hn::Max(h, f);
        l = hn::Min(l, f);
      } else {
        const auto a = hn::Abs(v);
        h = hn::Max(h, hn::IfThenElseZero(hn::Lt(a, inf), a));  // NaN compares false
      }
    }
    hi[k] = h;
    lo[k] = l;
  }
  const auto max_op = [](auto a, auto b) { return hn::Max(a, b); };
  const auto hi_all = TransposeReduce(d, hi, max_op);
  if constexpr (kSigned) {
    const auto lo_all = TransposeReduce(d, lo, [](auto a, auto b) { return hn::Min(a, b); });
    hn::StoreU(hi_all, d, max);
    hn::StoreU(lo_all, d, min);
    hn::StoreU(hn::Max(hi_all, hn::Neg(lo_all)), d, amax);
  } else {
    hn::StoreU(hi_all, d, amax);
  }
}

void BlockAbsMax(const float* HWY_RESTRICT x, int64_t rows, int64_t cols, int64_t block,
                 float* HWY_RESTRICT amax) {
  const int64_t per_row = (cols + block - 1) / block;
  if (GroupedBlocks(cols, block)) {
    const int64_t N = static_cast<int64_t>(hn::Lanes(DF()));
    const int64_t blocks = rows * per_row;
    int64_t g = 0;
    for (; g + N <= blocks; g += N) {
      ReduceBlockGroup<false>(x + g * block, static_cast<size_t>(block), amax + g, nullptr,
                              nullptr);
    }
    for (; g < blocks; ++g) amax[g] = AbsMaxRange(x + g * block, static_cast<size_t>(block));
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < per_row; ++b) {
      const int64_t begin = b * block;
      const int64_t len = (b + 1 < per_row ? block : cols - begin);
      amax[r * per_row + b] = AbsMaxRange(x + r * cols + begin, static_cast<size_t>(len));
    }
  }
}

void BlockMinMax(const float* HWY_RESTRICT x, int64_t rows, int64_t cols, int64_t block,
                 float* HWY_RESTRICT min, float* HWY_RESTRICT max) {
  const int64_t per_row = (cols + block - 1) / block;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < per_row; ++b) {
      const int64_t begin = b * block;
      const int64_t len = (b + 1 < per_row ? block : cols - begin);
      MinMaxRange(x + r * cols + begin, static_cast<size_t>(len), min + r * per_row + b,
                  max + r * per_row + b);
    }
  }
}

// ------------------------------ Integer quantize-dequantize

// a > b ? a : b and a < b ? a : b, as the reference writes them (x86's maxps
// and minps; the scalar target's Max and Min differ for NaN).
template <class V>
HWY_INLINE V MaxLike(V a, V b) {
#if HWY_TARGET == HWY_SCALAR
  return hn::IfThenElse(hn::Gt(a, b), a, b);
#else
  return hn::Max(a, b);
#endif
}
template <class V>
HWY_INLINE V MinLike(V a, V b) {
#if HWY_TARGET == HWY_SCALAR
  return hn::IfThenElse(hn::Lt(a, b), a, b);
#else
  return hn::Min(a, b);
#endif
}

// Round to nearest integer, ties to even, keeping the sign of a zero result
// (std::nearbyint in the default rounding mode).
template <class D, class V>
HWY_INLINE V RoundHalfEven(D d, V t) {
#if HWY_TARGET <= HWY_SSE4
  (void)d;
  return hn::Round(t);  // roundps, nearest even
#else
  // Adding 2^23 leaves no fraction bits, so the FPU rounds to an integer.
  const auto two23 = hn::Set(d, 8388608.0f);
  const auto a = hn::Abs(t);
  const auto rounded = hn::CopySignToAbs(hn::Sub(hn::Add(a, two23), two23), t);
  return hn::IfThenElse(hn::Lt(a, two23), rounded, t);  // large, Inf and NaN: as they are
#endif
}

struct QuantBlock {
  float scale, zero, lo, hi, q_special;  // q_special: zero clamped to [lo, hi]
};

// One vector of D (a full one, or one lane for a block's end). kUsable: the
// block's scale is finite and nonzero. Returns the clipped lanes.
template <bool kUsable, bool kCodes, class D>
HWY_INLINE size_t QuantizeVec(D d, const QuantBlock& b, const float* HWY_RESTRICT x,
                              float* HWY_RESTRICT out, int16_t* HWY_RESTRICT codes) {
  const auto v = hn::LoadU(d, x);
  const auto finite = hn::Lt(hn::Abs(v), hn::Set(d, kInf));
  size_t clipped = 0;
  hn::Vec<D> q, o;
  if constexpr (kUsable) {
    const auto zero = hn::Set(d, b.zero);
    const auto lo = hn::Set(d, b.lo);
    const auto hi = hn::Set(d, b.hi);
    const auto scale = hn::Set(d, b.scale);
    const auto rounded = hn::Add(RoundHalfEven(d, hn::Div(v, scale)), zero);
    const auto clip = hn::Or(hn::Lt(rounded, lo), hn::Gt(rounded, hi));
    q = MinLike(MaxLike(rounded, lo), hi);
    o = hn::Mul(hn::Sub(q, zero), scale);
    if (HWY_LIKELY(hn::AllTrue(d, finite))) {
      clipped = hn::CountTrue(d, clip);
    } else {
      clipped = hn::CountTrue(d, hn::And(clip, finite));
      q = hn::IfThenElse(finite, q, hn::Set(d, b.q_special));
      o = hn::IfThenElse(finite, o, v);
    }
  } else {
    q = hn::Set(d, b.q_special);
    o = hn::IfThenZeroElse(finite, v);
  }
  hn::StoreU(o, d, out);
  if constexpr (kCodes) {
    const hn::RebindToSigned<D> di;
    const hn::Rebind<int16_t, D> d16;
    hn::StoreU(hn::DemoteTo(d16, hn::ConvertTo(di, q)), d16, codes);  // q is an int16 already
  }
  return clipped;
}

template <bool kUsable, bool kCodes>
HWY_INLINE uint64_t QuantizeRange(const QuantBlock& b, const float* HWY_RESTRICT x, size_t n,
                                  float* HWY_RESTRICT out, int16_t* HWY_RESTRICT codes) {
  const DF d;
  const hn::CappedTag<float, 1> d1;
  const size_t N = hn::Lanes(d);
  uint64_t clipped = 0;
  size_t i = 0;
  for (; i + N <= n; i += N) {
    clipped += QuantizeVec<kUsable, kCodes>(d, b, x + i, out + i, kCodes ? codes + i : nullptr);
  }
  // One lane at a time: out may be x itself, so no overlapping vector.
  for (; i < n; ++i) {
    clipped += QuantizeVec<kUsable, kCodes>(d1, b, x + i, out + i, kCodes ? codes + i : nullptr);
  }
  return clipped;
}

uint64_t QuantizeIntBlocks(const float* HWY_RESTRICT x, int64_t rows, int64_t cols, int64_t block,
                           const float* HWY_RESTRICT scale, const float* HWY_RESTRICT zero,
                           int32_t qmin, int32_t qmax, float* out, int16_t* HWY_RESTRICT codes) {
  const int64_t per_row = (cols + block - 1) / block;
  const float lo = static_cast<float>(qmin), hi = static_cast<float>(qmax);
  uint64_t clipped = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < per_row; ++g) {
      const int64_t begin = g * block;
      const size_t len = static_cast<size_t>(g + 1 < per_row ? block : cols - begin);
      const int64_t at = r * cols + begin;
      QuantBlock b;
      b.scale = scale[r * per_row + g];
      b.zero = zero ? zero[r * per_row + g] : 0.0f;
      b.lo = lo;
      b.hi = hi;
      const float z = b.zero > lo ? b.zero : lo;
      b.q_special = z < hi ? z : hi;
      const bool usable = b.scale != 0 && std::fabs(b.scale) < kInf;
      int16_t* c = codes ? codes + at : nullptr;
      if (usable) {
        clipped += codes ? QuantizeRange<true, true>(b, x + at, len, out + at, c)
                         : QuantizeRange<true, false>(b, x + at, len, out + at, c);
      } else {
        clipped += codes ? QuantizeRange<false, true>(b, x + at, len, out + at, c)
                         : QuantizeRange<false, false>(b, x + at, len, out + at, c);
      }
    }
  }
  return clipped;
}

// ------------------------------ A cast's events

// The whole vectors of [0, n); returns how many elements they cover.
size_t CountCastEvents(const float* HWY_RESTRICT x, const float* HWY_RESTRICT q, size_t n,
                       float clip_above, float subnormal_below, uint64_t* clipped,
                       uint64_t* subnormal) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const auto clip = hn::Set(d, clip_above), sub = hn::Set(d, subnormal_below);
  const auto inf = hn::Set(d, kInf), zero = hn::Zero(d);
  uint64_t c = 0, s = 0;
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const auto a = hn::Abs(hn::LoadU(d, x + i)), b = hn::Abs(hn::LoadU(d, q + i));
    c += hn::CountTrue(d, hn::And(hn::Gt(a, clip), hn::Lt(a, inf)));
    s += hn::CountTrue(d, hn::And(hn::Gt(b, zero), hn::Lt(b, sub)));
  }
  *clipped += c;
  *subnormal += s;
  return i;
}

// ------------------------------ ggml's q-types and codebooks (kernels/blocks.h)

// The signed element of p[0, n) of largest |v| over the finite ones, the
// first on ties; 0 when none.
HWY_INLINE float SignedMaxRange(const float* HWY_RESTRICT p, size_t n) {
  const float amax = AbsMaxRange(p, n);
  if (amax == 0) return 0;
  const DF d;
  const size_t N = hn::Lanes(d);
  const auto target = hn::Set(d, amax);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    const intptr_t k = hn::FindFirstTrue(d, hn::Eq(hn::Abs(hn::LoadU(d, p + i)), target));
    if (k >= 0) return p[i + static_cast<size_t>(k)];
  }
  for (; i < n; ++i) {
    if (std::fabs(p[i]) == amax) return p[i];
  }
  return 0;  // not reached: amax is some element's magnitude
}

void BlockSignedMax(const float* HWY_RESTRICT x, int64_t rows, int64_t cols, int64_t block,
                    float* HWY_RESTRICT max) {
  const int64_t per_row = (cols + block - 1) / block;
  if (GroupedBlocks(cols, block)) {
    const int64_t N = static_cast<int64_t>(hn::Lanes(DF()));
    const int64_t blocks = rows * per_row;
    HWY_ALIGN float amax[HWY_MAX_BYTES / sizeof(float)], hi[HWY_MAX_BYTES / sizeof(float)],
        lo[HWY_MAX_BYTES / sizeof(float)];
    int64_t g = 0;
    for (; g + N <= blocks; g += N) {
      ReduceBlockGroup<true>(x + g * block, static_cast<size_t>(block), amax, hi, lo);
      for (int64_t k = 0; k < N; ++k) {
        // The element of largest magnitude is the max or the min, unless both
        // have it (then the first of them) or it is 0.
        const float a = amax[k];
        max[g + k] = a == 0 ? 0.0f
                     : hi[k] != -lo[k]
                         ? (hi[k] == a ? hi[k] : lo[k])
                         : SignedMaxRange(x + (g + k) * block, static_cast<size_t>(block));
      }
    }
    for (; g < blocks; ++g) max[g] = SignedMaxRange(x + g * block, static_cast<size_t>(block));
    return;
  }
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < per_row; ++g) {
      const int64_t begin = g * block;
      const size_t len = static_cast<size_t>(std::min(block, cols - begin));
      max[r * per_row + g] = SignedMaxRange(x + r * cols + begin, len);
    }
  }
}

struct GgmlBlock {
  float id, d, min, m;
};

// roundf: half away from zero. t - trunc(t) is exact, so the comparison with
// 1/2 decides; large values, infinities and NaN come back as they are.
template <class D>
HWY_INLINE hn::Vec<D> RoundHalfAway(D d, hn::Vec<D> t) {
  const auto whole = hn::Trunc(t);
  const auto up = hn::Ge(hn::Abs(hn::Sub(t, whole)), hn::Set(d, 0.5f));
  return hn::Add(whole, hn::IfThenElseZero(up, hn::CopySign(hn::Set(d, 1.0f), t)));
}

// One vector of D (a full one, or one lane at a block's end); returns the
// clipped lanes.
template <GgmlRule kRule, class D>
HWY_INLINE size_t GgmlVec(D d, const GgmlElementRule& rule, const GgmlBlock& b,
                          const float* HWY_RESTRICT x, float* HWY_RESTRICT out) {
  const hn::RebindToSigned<D> di;
  const auto v = hn::LoadU(d, x);
  const auto finite = hn::Lt(hn::Abs(v), hn::Set(d, kInf));
  const auto id = hn::Set(d, b.id), scale = hn::Set(d, b.d);
  hn::Vec<D> o;
  hn::Mask<D> clip;
  if constexpr (kRule == GgmlRule::kRound) {
    const auto t = RoundHalfAway(d, hn::Mul(v, id));
    const auto hi = hn::Set(d, 127.0f), lo = hn::Set(d, -128.0f);
    clip = hn::Or(hn::Gt(t, hi), hn::Lt(t, lo));
    const auto q = hn::IfThenZeroElse(hn::IsNaN(t), MinLike(MaxLike(t, lo), hi));
    o = hn::Mul(q, scale);
  } else {
    const auto scaled =
        kRule == GgmlRule::kOffset ? hn::Mul(hn::Sub(v, hn::Set(d, b.min)), id) : hn::Mul(v, id);
    const auto t = hn::Add(scaled, hn::Set(d, rule.bias));
    const auto qmax = hn::Set(d, static_cast<float>(rule.qmax));
    const auto above = hn::Ge(t, hn::Add(qmax, hn::Set(d, 1.0f)));
    const auto below = hn::Le(t, hn::Set(d, -1.0f));
    clip = hn::Or(above, below);
    // In range, the conversion truncates toward zero exactly.
    // (NaN and the clamped lanes converted as 0: no float-to-int overflow.)
    auto q = hn::ConvertTo(d, hn::ConvertTo(di, hn::IfThenZeroElse(hn::Or(clip, hn::IsNaN(t)), t)));
    q = hn::IfThenElse(above, qmax, hn::IfThenZeroElse(below, q));
    q = hn::IfThenElse(hn::IsNaN(t), hn::Set(d, static_cast<float>(rule.zero)), q);
    o = kRule == GgmlRule::kOffset
            ? hn::Add(hn::Mul(q, scale), hn::Set(d, b.m))
            : hn::Mul(hn::Sub(q, hn::Set(d, static_cast<float>(rule.zero))), scale);
  }
  hn::StoreU(hn::IfThenElse(finite, o, v), d, out);
  return hn::CountTrue(d, hn::And(clip, finite));
}

template <GgmlRule kRule>
uint64_t GgmlRows(const GgmlElementRule& rule, const float* HWY_RESTRICT x, int64_t rows,
                  int64_t cols, int64_t block, const GgmlBlockParams& params,
                  float* HWY_RESTRICT out) {
  const DF d;
  const hn::CappedTag<float, 1> d1;
  const size_t N = hn::Lanes(d);
  const int64_t per_row = (cols + block - 1) / block;
  uint64_t clipped = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < per_row; ++g) {
      const int64_t k = r * per_row + g;
      GgmlBlock b{params.id[k], params.d[k], 0, 0};
      if constexpr (kRule == GgmlRule::kOffset) {
        b.min = params.min[k];
        b.m = params.m[k];
      }
      const size_t len = static_cast<size_t>(std::min(block, cols - g * block));
      const float* xb = x + r * cols + g * block;
      float* ob = out + r * cols + g * block;
      size_t i = 0;
      for (; i + N <= len; i += N) clipped += GgmlVec<kRule>(d, rule, b, xb + i, ob + i);
      for (; i < len; ++i) clipped += GgmlVec<kRule>(d1, rule, b, xb + i, ob + i);
    }
  }
  return clipped;
}

uint64_t QuantizeGgmlBlocks(const GgmlElementRule& rule, const float* HWY_RESTRICT x, int64_t rows,
                            int64_t cols, int64_t block, const GgmlBlockParams& params,
                            float* HWY_RESTRICT out) {
  switch (rule.rule) {
    case GgmlRule::kTrunc:
      return GgmlRows<GgmlRule::kTrunc>(rule, x, rows, cols, block, params, out);
    case GgmlRule::kOffset:
      return GgmlRows<GgmlRule::kOffset>(rule, x, rows, cols, block, params, out);
    case GgmlRule::kRound:
      return GgmlRows<GgmlRule::kRound>(rule, x, rows, cols, block, params, out);
  }
  return 0;
}

// values[code] for every lane, `values` padded to a multiple of the lanes.
template <class D>
HWY_INLINE hn::Vec<D> LookupValues(D d, const float* HWY_RESTRICT values, int32_t count,
                                   hn::Vec<hn::RebindToSigned<D>> code) {
  const hn::RebindToSigned<D> di;
  const int32_t N = static_cast<int32_t>(hn::Lanes(d));
  auto result = hn::Zero(d);
  for (int32_t base = 0; base < count; base += N) {
    const auto local = hn::Sub(code, hn::Set(di, base));
    const auto in_table = hn::And(hn::Gt(local, hn::Set(di, -1)), hn::Lt(local, hn::Set(di, N)));
    const auto found = hn::TableLookupLanes(
        hn::LoadU(d, values + base), hn::IndicesFromVec(d, hn::And(local, hn::Set(di, N - 1))));
    result = hn::IfThenElse(hn::RebindMask(d, in_table), found, result);
  }
  return result;
}

template <class D>
HWY_INLINE void CodebookVec(D d, float inverse, float scale, const float* HWY_RESTRICT thresholds,
                            const float* HWY_RESTRICT values, int32_t count,
                            const float* HWY_RESTRICT x, float* HWY_RESTRICT out) {
  const hn::RebindToSigned<D> di;
  const auto v = hn::LoadU(d, x);
  const auto finite = hn::Lt(hn::Abs(v), hn::Set(d, kInf));
  const auto y = hn::Mul(v, hn::Set(d, inverse));
  auto code = hn::Zero(di);
  for (int32_t k = 0; k + 1 < count; ++k) {  // minus -1 for each threshold exceeded
    code = hn::Sub(code, hn::BitCast(di, hn::VecFromMask(d, hn::Gt(y, hn::Set(d, thresholds[k])))));
  }
  const auto o = hn::Mul(LookupValues(d, values, count, code), hn::Set(d, scale));
  hn::StoreU(hn::IfThenElse(finite, o, v), d, out);
}

void QuantizeCodebookBlocks(const float* HWY_RESTRICT x, int64_t rows, int64_t cols, int64_t block,
                            const float* HWY_RESTRICT inverse, const float* HWY_RESTRICT scale,
                            const float* HWY_RESTRICT thresholds, const float* HWY_RESTRICT values,
                            int32_t count, float* HWY_RESTRICT out) {
  const DF d;
  const hn::CappedTag<float, 1> d1;
  const size_t N = hn::Lanes(d);
  HWY_ALIGN float table[32] = {};  // padded for the lookups of the widest vector
  for (int32_t k = 0; k < count; ++k) table[k] = values[k];
  const int64_t per_row = (cols + block - 1) / block;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < per_row; ++g) {
      const int64_t k = r * per_row + g;
      const size_t len = static_cast<size_t>(std::min(block, cols - g * block));
      const float* xb = x + r * cols + g * block;
      float* ob = out + r * cols + g * block;
      size_t i = 0;
      for (; i + N <= len; i += N) {
        CodebookVec(d, inverse[k], scale[k], thresholds, table, count, xb + i, ob + i);
      }
      for (; i < len; ++i) {
        CodebookVec(d1, inverse[k], scale[k], thresholds, table, count, xb + i, ob + i);
      }
    }
  }
}

// ------------------------------ Block-scaled floats (MX) around the rounding

template <class D>
HWY_INLINE size_t ScaleVec(D d, float m, float post, float limit, bool clamp,
                           const float* HWY_RESTRICT x, float* HWY_RESTRICT v) {
  const auto in = hn::LoadU(d, x);
  const auto finite = hn::Lt(hn::Abs(in), hn::Set(d, kInf));
  auto value = hn::Mul(hn::Mul(hn::IfThenElseZero(finite, in), hn::Set(d, m)), hn::Set(d, post));
  const auto lim = hn::Set(d, limit);
  const size_t clipped = hn::CountTrue(d, hn::Gt(hn::Abs(value), lim));
  if (clamp) value = hn::Min(hn::Max(value, hn::Neg(lim)), lim);  // value is never NaN
  hn::StoreU(value, d, v);
  return clipped;
}

uint64_t ScaleBlocks(const float* HWY_RESTRICT x, int64_t rows, int64_t cols, int64_t block,
                     const float* HWY_RESTRICT multiplier, float post, float limit, bool clamp,
                     float* HWY_RESTRICT v) {
  const DF d;
  const hn::CappedTag<float, 1> d1;
  const size_t N = hn::Lanes(d);
  const int64_t per_row = (cols + block - 1) / block;
  uint64_t clipped = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < per_row; ++g) {
      const float m = multiplier[r * per_row + g];
      const size_t len = static_cast<size_t>(std::min(block, cols - g * block));
      const int64_t at = r * cols + g * block;
      size_t i = 0;
      for (; i + N <= len; i += N)
        clipped += ScaleVec(d, m, post, limit, clamp, x + at + i, v + at + i);
      for (; i < len; ++i) clipped += ScaleVec(d1, m, post, limit, clamp, x + at + i, v + at + i);
    }
  }
  return clipped;
}

template <class D>
HWY_INLINE size_t UnscaleVec(D d, float s, float subnormal_below, const float* HWY_RESTRICT x,
                             const float* HWY_RESTRICT v, float* HWY_RESTRICT out) {
  const auto in = hn::LoadU(d, x);
  const auto value = hn::LoadU(d, v);
  const auto a = hn::Abs(value);
  const size_t subnormal =
      hn::CountTrue(d, hn::And(hn::Gt(a, hn::Zero(d)), hn::Lt(a, hn::Set(d, subnormal_below))));
  const auto max = hn::Set(d, std::numeric_limits<float>::max());
  const auto y = hn::Min(hn::Max(hn::Mul(value, hn::Set(d, s)), hn::Neg(max)), max);
  hn::StoreU(hn::IfThenElse(hn::Lt(hn::Abs(in), hn::Set(d, kInf)), y, in), d, out);
  return subnormal;
}

uint64_t UnscaleBlocks(const float* HWY_RESTRICT x, const float* HWY_RESTRICT v, int64_t rows,
                       int64_t cols, int64_t block, const float* HWY_RESTRICT scale,
                       float subnormal_below, float* HWY_RESTRICT out) {
  const DF d;
  const hn::CappedTag<float, 1> d1;
  const size_t N = hn::Lanes(d);
  const int64_t per_row = (cols + block - 1) / block;
  uint64_t subnormal = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < per_row; ++g) {
      const float s = scale[r * per_row + g];
      const size_t len = static_cast<size_t>(std::min(block, cols - g * block));
      const int64_t at = r * cols + g * block;
      size_t i = 0;
      for (; i + N <= len; i += N) {
        subnormal += UnscaleVec(d, s, subnormal_below, x + at + i, v + at + i, out + at + i);
      }
      for (; i < len; ++i) {
        subnormal += UnscaleVec(d1, s, subnormal_below, x + at + i, v + at + i, out + at + i);
      }
    }
  }
  return subnormal;
}

// ------------------------------ Comparison of x with q

// The rule (ErrorStats::Observe states it per element): where |x| and |q| are
// at most kFloatRange, e = q - x and r = |e| / |x| are float operations (r in
// double where the float overflows); elsewhere both are double. The sums run
// in float partials of kCompareRun terms each (kVirtualLanes below), and the
// partials then add in double; a run whose float partials could overflow or
// underflow (a partial's max |x|, |q| or |e| in (0, kFloatTiny) or above
// kFloatRange, or its max r above kFloatRange) is summed again in double.
constexpr size_t kCompareRun = 16;
constexpr float kFloatTiny = 0x1p-40f;

#if HWY_TARGET == HWY_SCALAR
using DD = hn::Rebind<double, DF>;  // one lane: promote it whole
#else
using DD = hn::Rebind<double, hn::Half<DF>>;            // promote each half
#endif

// v promoted to double: both halves (one lane on HWY_SCALAR).
template <class F>
HWY_INLINE void ForHalves(hn::Vec<DF> v, const F& f) {
  const DD dd;
#if HWY_TARGET == HWY_SCALAR
  f(hn::PromoteTo(dd, v));
#else
  const hn::Half<DF> dh;
  f(hn::PromoteTo(dd, hn::LowerHalf(dh, v)));
  f(hn::PromoteTo(dd, hn::UpperHalf(dh, v)));
#endif
}

// Sums and maxima in double, per lane.
struct Accumulators {
  using V = hn::Vec<DD>;
  V ee, xx, qq, xq, ae, ae_max, rel, rel2, rel_max;
  explicit Accumulators(DD dd)
      : ee(hn::Zero(dd)),
        xx(hn::Zero(dd)),
        qq(hn::Zero(dd)),
        xq(hn::Zero(dd)),
        ae(hn::Zero(dd)),
        ae_max(hn::Zero(dd)),
        rel(hn::Zero(dd)),
        rel2(hn::Zero(dd)),
        rel_max(hn::Zero(dd)) {}

  // One element per lane in double: x and q finite (0 in lanes not
  // measured), axr |x| where the relative error counts and +Inf elsewhere,
  // ef and rf the float e and r (used where the rule takes them).
  HWY_INLINE void AddExact(V x, V q, V axr, V ef, V rf) {
    const DD dd;
    const auto in_range = hn::Le(hn::Max(hn::Abs(x), hn::Abs(q)), hn::Set(dd, kFloatRange));
    const V e = hn::IfThenElse(in_range, ef, hn::Sub(q, x));
    const V a = hn::Abs(e);
    ee = hn::MulAdd(e, e, ee);
    xx = hn::MulAdd(x, x, xx);
    qq = hn::MulAdd(q, q, qq);
    xq = hn::MulAdd(x, q, xq);
    ae = hn::Add(ae, a);
    ae_max = hn::Max(ae_max, a);
    const auto r_float = hn::And(in_range, hn::Lt(rf, hn::Set(dd, HUGE_VAL)));  // NaN: false
    const V r = hn::IfThenElse(r_float, rf, hn::Div(a, axr));
    rel = hn::Add(rel, r);
    rel2 = hn::MulAdd(r, r, rel2);
    rel_max = hn::Max(rel_max, r);
  }

  void Fold(DD dd, ErrorStats& s) const {
    s.sum_squared_error += hn::GetLane(hn::SumOfLanes(dd, ee));
    s.sum_squared_input += hn::GetLane(hn::SumOfLanes(dd, xx));
    s.sum_squared_output += hn::GetLane(hn::SumOfLanes(dd, qq));
    s.sum_product += hn::GetLane(hn::SumOfLanes(dd, xq));
    s.sum_abs_error += hn::GetLane(hn::SumOfLanes(dd, ae));
    s.max_abs_error = std::max(s.max_abs_error, hn::GetLane(hn::MaxOfLanes(dd, ae_max)));
    s.sum_relative_error += hn::GetLane(hn::SumOfLanes(dd, rel));
    s.sum_squared_relative_error += hn::GetLane(hn::SumOfLanes(dd, rel2));
    s.max_relative_error = std::max(s.max_relative_error, hn::GetLane(hn::MaxOfLanes(dd, rel_max)));
  }
};

// The float partials and lane maxima of one run.
struct FloatRun {
  using V = hn::Vec<DF>;
  V ee, xx, qq, xq, ae, rel, rel2, max_x, max_q, max_e, max_r;
  FloatRun() : FloatRun(DF()) {}
  explicit FloatRun(DF d)
      : ee(hn::Zero(d)),
        xx(hn::Zero(d)),
        qq(hn::Zero(d)),
        xq(hn::Zero(d)),
        ae(hn::Zero(d)),
        rel(hn::Zero(d)),
        rel2(hn::Zero(d)),
        max_x(hn::Zero(d)),
        max_q(hn::Zero(d)),
        max_e(hn::Zero(d)),
        max_r(hn::Zero(d)) {}

  HWY_INLINE void Add(V x, V q, V ax, V aq, V axr) {
    const V e = hn::Sub(q, x);
    const V a = hn::Abs(e);
    ee = hn::MulAdd(e, e, ee);
    xx = hn::MulAdd(x, x, xx);
    qq = hn::MulAdd(q, q, qq);
    xq = hn::MulAdd(x, q, xq);
    ae = hn::Add(ae, a);
    const V r = hn::Div(a, axr);
    rel = hn::Add(rel, r);
    rel2 = hn::MulAdd(r, r, rel2);
    max_x = hn::Max(max_x, ax);
    max_q = hn::Max(max_q, aq);
    max_e = hn::Max(max_e, a);
    max_r = hn::Max(max_r, r);
  }

  // Whether every partial is within the bound of the header: no lane's
  // maximum lies in (0, kFloatTiny) nor above kFloatRange.
  HWY_INLINE bool Safe(DF d) const {
    const V tiny = hn::Set(d, kFloatTiny), range = hn::Set(d, kFloatRange), zero = hn::Zero(d);
    auto small = [&](V m) { return hn::And(hn::Gt(m, zero), hn::Lt(m, tiny)); };
    const auto big = hn::Gt(hn::Max(hn::Max(max_x, max_q), max_r), range);
    return hn::AllFalse(d, hn::Or(big, hn::Or(small(max_x), hn::Or(small(max_q), small(max_e)))));
  }

  // Adds the partials and maxima, promoted (exactly) to double.
  HWY_INLINE void AddTo(Accumulators& acc) const {
    ForHalves(ee, [&](auto v) { acc.ee = hn::Add(acc.ee, v); });
    ForHalves(xx, [&](auto v) { acc.xx = hn::Add(acc.xx, v); });
    ForHalves(qq, [&](auto v) { acc.qq = hn::Add(acc.qq, v); });
    ForHalves(xq, [&](auto v) { acc.xq = hn::Add(acc.xq, v); });
    ForHalves(ae, [&](auto v) { acc.ae = hn::Add(acc.ae, v); });
    ForHalves(rel, [&](auto v) { acc.rel = hn::Add(acc.rel, v); });
    ForHalves(rel2, [&](auto v) { acc.rel2 = hn::Add(acc.rel2, v); });
    ForHalves(max_e, [&](auto v) { acc.ae_max = hn::Max(acc.ae_max, v); });
    ForHalves(max_r, [&](auto v) { acc.rel_max = hn::Max(acc.rel_max, v); });
  }
};

// x and q of one vector with the lanes not measured set to 0 (no error, not
// zeroed, below the relative floor, which is at least the smallest
// subnormal), |x|, |q|, and axr: |x| where the relative error counts, +Inf
// elsewhere (so that |e| / axr is 0 there).
struct Pair {
  hn::Vec<DF> x, q, ax, aq, axr;
};

// The float partials: element i adds to partial i % kVirtualLanes within runs
// of kCompareRun * kVirtualLanes elements, whatever the vector length (16,
// 8 or 4 floats: one, two or four vectors), so every x86 target forms the
// same float partials, and those with FMA the same bits.
constexpr size_t kVirtualLanes = 16;
constexpr size_t kMaxLanes = hn::MaxLanes(DF());
constexpr size_t kParts =
    kMaxLanes <= kVirtualLanes && kVirtualLanes % kMaxLanes == 0 ? kVirtualLanes / kMaxLanes : 1;

// Elements [0, n) with n a multiple of kParts * Lanes(DF). The sums stay in local
// vectors (registers) and the counts in scalars until the end.
template <bool kSubnormal, bool kClip>
void CompareRange(const float* HWY_RESTRICT xp, const float* HWY_RESTRICT qp, size_t n,
                  float relative_floor, float subnormal_below, float clip_above, ErrorStats& s) {
  const DF d;
  const DD dd;
  const size_t N = hn::Lanes(d);
  const auto inf = hn::Set(d, kInf);
  const auto zero = hn::Zero(d);
  const auto floor = hn::Set(d, relative_floor);
  const auto sub_below = hn::Set(d, subnormal_below);
  const auto clip = hn::Set(d, clip_above);
  Accumulators acc(dd);
  uint64_t nan = 0, inf_in = 0, nonfinite = 0, not_relative = 0, zeroed = 0, subnormal = 0,
           clipped = 0;
  // The pair at i; with kCount, its counts too.
  auto load = [&](size_t i, auto count) HWY_ATTR {
    constexpr bool kCount = decltype(count)::value;
    Pair p{hn::LoadU(d, xp + i), hn::LoadU(d, qp + i), zero, zero, zero};
    p.ax = hn::Abs(p.x);
    p.aq = hn::Abs(p.q);
    const auto x_finite = hn::Lt(p.ax, inf);
    const auto measured = hn::And(x_finite, hn::Lt(p.aq, inf));
    if constexpr (kSubnormal && kCount) {
      subnormal += hn::CountTrue(d, hn::And(hn::Gt(p.aq, zero), hn::Lt(p.aq, sub_below)));
    }
    auto clip_mask = hn::Gt(p.ax, clip);
    if (HWY_UNLIKELY(!hn::AllTrue(d, measured))) {
      if constexpr (kCount) {
        nan += hn::CountTrue(d, hn::IsNaN(p.x));  // Ne is ordered: false for NaN
        inf_in += hn::CountTrue(d, hn::Eq(p.ax, inf));
        nonfinite += hn::CountTrue(d, hn::AndNot(measured, x_finite));
      }
      clip_mask = hn::And(clip_mask, x_finite);
      p.x = hn::IfThenElseZero(measured, p.x);
      p.q = hn::IfThenElseZero(measured, p.q);
      p.ax = hn::Abs(p.x);
      p.aq = hn::Abs(p.q);
    }
    const auto below = hn::Lt(p.ax, floor);
    if constexpr (kCount) {
      if constexpr (kClip) clipped += hn::CountTrue(d, clip_mask);
      zeroed += hn::CountTrue(d, hn::AndNot(hn::Eq(p.x, zero), hn::Eq(p.q, zero)));
      not_relative += hn::CountTrue(d, below);
    }
    p.axr = hn::IfThenElse(below, inf, p.ax);
    return p;
  };
  // kParts vectors make the kVirtualLanes partials (one vector on targets
  // whose vectors do not divide them).
  const size_t step = kParts * N;
  for (size_t begin = 0; begin < n; begin += kCompareRun * step) {
    const size_t end = std::min(n, begin + kCompareRun * step);
    FloatRun f[kParts];
    for (size_t i = begin; i < end; i += step) {
      for (size_t k = 0; k < kParts; ++k) {
        const Pair p = load(i + k * N, std::true_type());
        f[k].Add(p.x, p.q, p.ax, p.aq, p.axr);
      }
    }
    bool safe = true;
    for (size_t k = 0; k < kParts; ++k) safe = safe && f[k].Safe(d);
    if (HWY_LIKELY(safe)) {
      for (size_t k = 0; k < kParts; ++k) f[k].AddTo(acc);
      continue;
    }
    for (size_t i = begin; i < end; i += N) {  // the run again, in double
      const Pair p = load(i, std::false_type());
      const auto ef = hn::Sub(p.q, p.x);
      const auto rf = hn::Div(hn::Abs(ef), p.axr);
#if HWY_TARGET == HWY_SCALAR
      acc.AddExact(hn::PromoteTo(dd, p.x), hn::PromoteTo(dd, p.q), hn::PromoteTo(dd, p.axr),
                   hn::PromoteTo(dd, ef), hn::PromoteTo(dd, rf));
#else
      const hn::Half<DF> dh;
      auto lo = [&](hn::Vec<DF> v) { return hn::PromoteTo(dd, hn::LowerHalf(dh, v)); };
      auto hi = [&](hn::Vec<DF> v) { return hn::PromoteTo(dd, hn::UpperHalf(dh, v)); };
      acc.AddExact(lo(p.x), lo(p.q), lo(p.axr), lo(ef), lo(rf));
      acc.AddExact(hi(p.x), hi(p.q), hi(p.axr), hi(ef), hi(rf));
#endif
    }
  }
  acc.Fold(dd, s);
  s.count += n;
  s.nan_inputs += nan;
  s.inf_inputs += inf_in;
  s.nonfinite_outputs += nonfinite;
  s.measured += n - nan - inf_in - nonfinite;
  s.relative_count += n - not_relative;  // lanes not measured are below the floor too
  s.zeroed += zeroed;
  s.subnormal += subnormal;
  s.clipped += clipped;
}

// Compares x[0, n) with q[0, n) into *stats and returns how many elements it
// covered (a multiple of kParts vectors; the caller does the rest).
size_t ComparePairs(const float* HWY_RESTRICT x, const float* HWY_RESTRICT q, size_t n,
                    const CompareOptions& options, ErrorStats* stats) {
  const DF d;
  const size_t step = kParts * hn::Lanes(d);
  const size_t covered = n / step * step;
  // |x| >= floor and x != 0 is |x| >= max(floor, smallest subnormal); a NaN
  // floor admits nothing.
  const float min_sub = std::numeric_limits<float>::denorm_min();
  float floor = options.relative_floor > min_sub ? options.relative_floor : min_sub;
  if (std::isnan(options.relative_floor)) floor = kInf;
  const float sub = options.subnormal_below, clip = options.clip_above;
  ErrorStats s;
  if (sub > 0) {        // else nothing counts
    if (clip < kInf) {  // +Inf: nothing counts
      CompareRange<true, true>(x, q, covered, floor, sub, clip, s);
    } else {
      CompareRange<true, false>(x, q, covered, floor, sub, clip, s);
    }
  } else if (!(clip >= kInf)) {  // a NaN clip_above: the masks are all false
    CompareRange<false, true>(x, q, covered, floor, sub, clip, s);
  } else {
    CompareRange<false, false>(x, q, covered, floor, sub, clip, s);
  }
  stats->Merge(s);
  return covered;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lowp::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lowp::kernels {

HWY_EXPORT(BlockAbsMax);
HWY_EXPORT(BlockMinMax);
HWY_EXPORT(QuantizeIntBlocks);
HWY_EXPORT(ComparePairs);
HWY_EXPORT(BlockSignedMax);
HWY_EXPORT(CountCastEvents);
HWY_EXPORT(ScaleBlocks);
HWY_EXPORT(UnscaleBlocks);

uint64_t DispatchScaleBlocks(const float* x, int64_t rows, int64_t cols, int64_t block,
                             const float* multiplier, float post, float limit, bool clamp,
                             float* v) {
  return HWY_DYNAMIC_DISPATCH(ScaleBlocks)(x, rows, cols, block, multiplier, post, limit, clamp, v);
}
uint64_t DispatchUnscaleBlocks(const float* x, const float* v, int64_t rows, int64_t cols,
                               int64_t block, const float* scale, float subnormal_below,
                               float* out) {
  return HWY_DYNAMIC_DISPATCH(UnscaleBlocks)(x, v, rows, cols, block, scale, subnormal_below, out);
}

size_t DispatchCountCastEvents(const float* x, const float* q, size_t n, float clip_above,
                               float subnormal_below, uint64_t* clipped, uint64_t* subnormal) {
  return HWY_DYNAMIC_DISPATCH(CountCastEvents)(x, q, n, clip_above, subnormal_below, clipped,
                                               subnormal);
}
HWY_EXPORT(QuantizeGgmlBlocks);
HWY_EXPORT(QuantizeCodebookBlocks);

void DispatchBlockSignedMax(const float* x, int64_t rows, int64_t cols, int64_t block, float* max) {
  HWY_DYNAMIC_DISPATCH(BlockSignedMax)(x, rows, cols, block, max);
}
uint64_t DispatchQuantizeGgmlBlocks(const GgmlElementRule& rule, const float* x, int64_t rows,
                                    int64_t cols, int64_t block, const GgmlBlockParams& params,
                                    float* out) {
  return HWY_DYNAMIC_DISPATCH(QuantizeGgmlBlocks)(rule, x, rows, cols, block, params, out);
}
void DispatchQuantizeCodebookBlocks(const float* x, int64_t rows, int64_t cols, int64_t block,
                                    const float* inverse, const float* scale,
                                    const float* thresholds, const float* values, int32_t count,
                                    float* out) {
  HWY_DYNAMIC_DISPATCH(QuantizeCodebookBlocks)
  (x, rows, cols, block, inverse, scale, thresholds, values, count, out);
}

void DispatchBlockAbsMax(const float* x, int64_t rows, int64_t cols, int64_t block, float* amax) {
  HWY_DYNAMIC_DISPATCH(BlockAbsMax)(x, rows, cols, block, amax);
}
void DispatchBlockMinMax(const float* x, int64_t rows, int64_t cols, int64_t block, float* min,
                         float* max) {
  HWY_DYNAMIC_DISPATCH(BlockMinMax)(x, rows, cols, block, min, max);
}
uint64_t DispatchQuantizeIntBlocks(const float* x, int64_t rows, int64_t cols, int64_t block,
                                   const float* scale, const float* zero, int32_t qmin,
                                   int32_t qmax, float* out, int16_t* codes) {
  return HWY_DYNAMIC_DISPATCH(QuantizeIntBlocks)(x, rows, cols, block, scale, zero, qmin, qmax, out,
                                                 codes);
}
size_t DispatchComparePairs(const float* x, const float* q, size_t n, const CompareOptions& options,
                            ErrorStats* stats) {
  return HWY_DYNAMIC_DISPATCH(ComparePairs)(x, q, n, options, stats);
}

}  // namespace lowp::kernels
#endif  // HWY_ONCE
