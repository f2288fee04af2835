// The kernels of kernels/nn.h, compiled once per Highway target
// (foreach_target.h re-includes this file) and chosen at run time. Each does
// the float32 and double operations of its reference in kernels/nn.cc in the
// same order (the double sums in the same 8 partial sums), so it equals it bit
// for bit; the exp is glibc's expf algorithm in double lanes.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/nn_simd.cc"
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/nn.h"

HWY_BEFORE_NAMESPACE();
namespace lowp::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;
using D4 = hn::CappedTag<float, 4>;
// Double lanes, at most 8 (the partial sums of nn.h), and the floats they widen.
using DD = hn::CappedTag<double, 8>;
using DH = hn::Rebind<float, DD>;
using DU = hn::RebindToUnsigned<DD>;
using DI = hn::RebindToSigned<DD>;

constexpr float kInf = std::numeric_limits<float>::infinity();

double AddParts(const double* p) {
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

#if HWY_NATIVE_FMA
// std::exp of Lanes(DH) floats as glibc's expf computes it: x 32/ln2 = k + r
// (k the nearest integer, found by adding 1.5 2^52; both steps fused with the
// product, as the FMA build fuses them), 2^(k/32) = table[k mod 32] with k / 32
// added to its exponent, 2^(r/32) ~ 1 + C2 r + C1 r^2 + C0 r^3, the product
// rounded once to float. Then glibc's special cases: NaN and +inf give x + x,
// x > 0x1.62e42ep6 inf, x < -0x1.9fe368p6 (and -inf) 0, x < -0x1.9d1d9ep6
// 2^-149.
HWY_INLINE hn::Vec<DH> Exp(hn::Vec<DH> x, const uint64_t* HWY_RESTRICT table) {
  const DD dd;
  const DH dh;
  const DU du;
  const DI di;
  const auto xd = hn::PromoteTo(dd, x);
  const auto shift = hn::Set(dd, 0x1.8p52);
  const auto inv_ln2_n = hn::Set(dd, 0x1.71547652b82fep+0 * 32);
  const auto shifted = hn::MulAdd(inv_ln2_n, xd, shift);
  const auto k = hn::BitCast(du, shifted);
  const auto r = hn::MulSub(inv_ln2_n, xd, hn::Sub(shifted, shift));
  const auto index = hn::BitCast(di, hn::And(k, hn::Set(du, 31)));
  const auto s = hn::BitCast(dd, hn::Add(hn::GatherIndex(du, table, index), hn::ShiftLeft<47>(k)));
  const auto z = hn::MulAdd(hn::Set(dd, 0x1.c6af84b912394p-5 / (32.0 * 32 * 32)), r,
                            hn::Set(dd, 0x1.ebfce50fac4f3p-3 / (32.0 * 32)));
  const auto r2 = hn::Mul(r, r);
  auto y = hn::MulAdd(r, hn::Set(dd, 0x1.62e42ff0c52d6p-1 / 32), hn::Set(dd, 1.0));
  y = hn::Mul(hn::MulAdd(z, r2, y), s);
  auto f = hn::DemoteTo(dh, y);
  f = hn::IfThenElse(hn::Gt(x, hn::Set(dh, 0x1.62e42ep6f)), hn::Set(dh, kInf), f);
  f = hn::IfThenElse(hn::Lt(x, hn::Set(dh, -0x1.9d1d9ep6f)), hn::Set(dh, 0x1p-149f), f);
  f = hn::IfThenElse(hn::Lt(x, hn::Set(dh, -0x1.9fe368p6f)), hn::Zero(dh), f);
  return hn::IfThenElse(hn::IsNaN(x), hn::Add(x, x), f);
}
#endif

void ExpF32(const float* HWY_RESTRICT in, float* out, size_t n) {
  size_t i = 0;
#if HWY_NATIVE_FMA
  const DH dh;
  const size_t N = hn::Lanes(dh);
  const uint64_t* table = ExpF32Table();
  for (; i + N <= n; i += N) hn::StoreU(Exp(hn::LoadU(dh, in + i), table), dh, out + i);
#endif
  for (; i < n; ++i) out[i] = std::exp(in[i]);
}

// max of x[0, n), NaN ignored as std::max(max, v) ignores it (which of +0
// and -0 is kept does not matter to x - max).
float MaxOf(const float* x, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  float max = -kInf;
  size_t i = 0;
  if (n >= N) {
    auto m = hn::Set(df, -kInf);
    for (; i + N <= n; i += N) {
      const auto v = hn::LoadU(df, x + i);
      m = hn::IfThenElse(hn::Lt(m, v), v, m);
    }
    max = hn::GetLane(hn::MaxOfLanes(df, m));
  }
  for (; i < n; ++i) max = std::max(max, x[i]);
  return max;
}

void Scale(float* x, size_t n, float s) {
  const DF df;
  const size_t N = hn::Lanes(df);
  const auto vs = hn::Set(df, s);
  size_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::Mul(hn::LoadU(df, x + i), vs), df, x + i);
  for (; i < n; ++i) x[i] *= s;
}

void Softmax(float* x, size_t n) {
#if !HWY_NATIVE_FMA
  SoftmaxRef(std::span<float>(x, n));
#else
  if (n == 0) return;
  const float max = MaxOf(x, n);
  const DD dd;
  const DH dh;
  const size_t N = hn::Lanes(dd), K = 8 / N;
  const uint64_t* table = ExpF32Table();
  hn::Vec<DD> sums[8];
  for (size_t k = 0; k < K; ++k) sums[k] = hn::Zero(dd);
  const auto vmax = hn::Set(dh, max);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (size_t k = 0; k < K; ++k) {
      const auto e = Exp(hn::Sub(hn::LoadU(dh, x + i + k * N), vmax), table);
      hn::StoreU(e, dh, x + i + k * N);
      sums[k] = hn::Add(sums[k], hn::PromoteTo(dd, e));
    }
  }
  double parts[8];
  for (size_t k = 0; k < K; ++k) hn::StoreU(sums[k], dd, parts + k * N);
  for (; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    parts[i % 8] += x[i];
  }
  Scale(x, n, static_cast<float>(1.0 / AddParts(parts)));
#endif
}

void RmsNorm(const float* in, float* out, int64_t rows, int64_t width, const float* weight,
             bool adds_one, double eps) {
  const DF df;
  const DD dd;
  const DH dh;
  const size_t NF = hn::Lanes(df), N = hn::Lanes(dd), K = 8 / N;
  const size_t n = static_cast<size_t>(width);
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * width;
    float* o = out + r * width;
    hn::Vec<DD> sums[8];
    for (size_t k = 0; k < K; ++k) sums[k] = hn::Zero(dd);
    size_t j = 0;
    for (; j + 8 <= n; j += 8) {
      for (size_t k = 0; k < K; ++k) {
        const auto v = hn::PromoteTo(dd, hn::LoadU(dh, x + j + k * N));
        sums[k] = hn::Add(sums[k], hn::Mul(v, v));
      }
    }
    double parts[8];
    for (size_t k = 0; k < K; ++k) hn::StoreU(sums[k], dd, parts + k * N);
    for (; j < n; ++j) parts[j % 8] += static_cast<double>(x[j]) * x[j];
    const float scale = static_cast<float>(1.0 / std::sqrt(AddParts(parts) / width + eps));
    const auto vscale = hn::Set(df, scale);
    const auto one = hn::Set(df, 1.0f);
    j = 0;
    for (; j + NF <= n; j += NF) {
      auto w = hn::LoadU(df, weight + j);
      if (adds_one) w = hn::Add(one, w);
      hn::StoreU(hn::Mul(hn::Mul(hn::LoadU(df, x + j), vscale), w), df, o + j);
    }
    for (; j < n; ++j) {
      const float w = adds_one ? 1.0f + weight[j] : weight[j];
      o[j] = x[j] * scale * w;
    }
  }
}

// The rotation of Rope on lanes [i, i + Lanes(d)) of one head.
template <class D>
HWY_INLINE void Rotate(D d, float* v, size_t half, size_t i, const float* cos, const float* sin) {
  const auto a = hn::LoadU(d, v + i), b = hn::LoadU(d, v + i + half);
  const auto c = hn::LoadU(d, cos + i), s = hn::LoadU(d, sin + i);
  hn::StoreU(hn::Sub(hn::Mul(a, c), hn::Mul(b, s)), d, v + i);
  hn::StoreU(hn::Add(hn::Mul(b, c), hn::Mul(a, s)), d, v + i + half);
}

void Rope(float* x, int64_t heads, int64_t dim, const float* cos, const float* sin) {
  const DF df;
  const D4 d4;
  const size_t NF = hn::Lanes(df), N4 = hn::Lanes(d4);
  const size_t half = static_cast<size_t>(dim / 2);
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * dim;
    size_t i = 0;
    for (; i + NF <= half; i += NF) Rotate(df, v, half, i, cos, sin);
    for (; i + N4 <= half; i += N4) Rotate(d4, v, half, i, cos, sin);
    for (; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cos[i] - b * sin[i];
      v[i + half] = b * cos[i] + a * sin[i];
    }
  }
}

void Silu(float* x, size_t n) {
  size_t i = 0;
#if HWY_NATIVE_FMA
  const DH dh;
  const size_t N = hn::Lanes(dh);
  const uint64_t* table = ExpF32Table();
  const auto one = hn::Set(dh, 1.0f);
  for (; i + N <= n; i += N) {
    const auto v = hn::LoadU(dh, x + i);
    hn::StoreU(hn::Div(v, hn::Add(one, Exp(hn::Neg(v), table))), dh, x + i);
  }
#endif
  for (; i < n; ++i) x[i] = x[i] / (1.0f + std::exp(-x[i]));
}

void AddTo(float* x, const float* y, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::Add(hn::LoadU(df, x + i), hn::LoadU(df, y + i)), df, x + i);
  }
  for (; i < n; ++i) x[i] += y[i];
}

void MultiplyBy(float* x, const float* y, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  for (; i + N <= n; i += N) {
    hn::StoreU(hn::Mul(hn::LoadU(df, x + i), hn::LoadU(df, y + i)), df, x + i);
  }
  for (; i < n; ++i) x[i] *= y[i];
}

uint64_t CountNonfinite(const float* x, size_t n) {
  const DF df;
  const size_t N = hn::Lanes(df);
  uint64_t count = 0;
  size_t i = 0;
  for (; i + N <= n; i += N) count += hn::CountTrue(df, hn::Not(hn::IsFinite(hn::LoadU(df, x + i))));
  for (; i < n; ++i) count += !std::isfinite(x[i]);
  return count;
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lowp::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lowp {
namespace kernels {
HWY_EXPORT(ExpF32);
HWY_EXPORT(Softmax);
HWY_EXPORT(RmsNorm);
HWY_EXPORT(Rope);
HWY_EXPORT(Silu);
HWY_EXPORT(AddTo);
HWY_EXPORT(MultiplyBy);
HWY_EXPORT(CountNonfinite);
}  // namespace kernels

void ExpF32(std::span<const float> in, std::span<float> out) {
  HWY_DYNAMIC_DISPATCH(kernels::ExpF32)(in.data(), out.data(), in.size());
}
void Softmax(std::span<float> x) { HWY_DYNAMIC_DISPATCH(kernels::Softmax)(x.data(), x.size()); }
void RmsNorm(const float* in, float* out, int64_t rows, int64_t width, const float* weight,
             bool adds_one, double eps) {
  HWY_DYNAMIC_DISPATCH(kernels::RmsNorm)(in, out, rows, width, weight, adds_one, eps);
}
void Rope(float* x, int64_t heads, int64_t dim, const float* cos, const float* sin) {
  HWY_DYNAMIC_DISPATCH(kernels::Rope)(x, heads, dim, cos, sin);
}
void Silu(std::span<float> x) { HWY_DYNAMIC_DISPATCH(kernels::Silu)(x.data(), x.size()); }
void AddTo(std::span<float> x, std::span<const float> y) {
  HWY_DYNAMIC_DISPATCH(kernels::AddTo)(x.data(), y.data(), x.size());
}
void MultiplyBy(std::span<float> x, std::span<const float> y) {
  HWY_DYNAMIC_DISPATCH(kernels::MultiplyBy)(x.data(), y.data(), x.size());
}
uint64_t CountNonfinite(std::span<const float> x) {
  return HWY_DYNAMIC_DISPATCH(kernels::CountNonfinite)(x.data(), x.size());
}
}  // namespace lowp
#endif  // HWY_ONCE
