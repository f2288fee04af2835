// ggml's iq4_nl / iq4_xs scale search with the 16 candidate scales of one
// 32-element group in SIMD lanes (kernels/ggml_iq4_simd.h). Each lane runs one
// candidate's fit (codecs' Iq4Fit) over the group in element order, so its
// sums see the same float operations in the same order as the scalar
// search; codecs' Iq4Candidates, Iq4ChooseScale and PackIq4* do the rest.
// Compiled once per Highway target; no fused multiply-add.
//
// The nearest grid value of a = id * x: ggml bisects, then keeps the lower
// neighbour lo when the float difference a - lo < hi - a. For every float a
// in [lo, hi) that decides exactly as a < (lo + hi) / 2: the midpoint m and
// half the gap h are representable and rounding is monotone, so both sides
// could only tie when a is within half an ulp(h) of m, and the floats next
// to every midpoint of these values are further apart than that
// (tests/ggml_encode_iq_test.cc checks every float near each midpoint). So
// the value is -127 plus the gap above each midpoint with !(a < m): NaN
// passes them all and gets 113 like ggml's bisection, -inf none.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ggml_iq4_simd.cc"
#include <cstddef>
#include <cstdint>

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "codecs/ggml_blocks.h"
#include "codecs/ggml_iq4.h"
#include "kernels/ggml_iq4_simd.h"

HWY_BEFORE_NAMESPACE();
namespace lowp::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
namespace gi = ggml::internal;

// At most one vector's worth of candidates per pass.
using DC = hn::CappedTag<float, gi::kIq4Candidates>;
using VC = hn::Vec<DC>;

struct Boundaries {
  float mid[15];
  float gap[15];
};

constexpr Boundaries MakeBoundaries() {
  Boundaries b{};
  for (int k = 0; k < 15; ++k) {
    b.mid[k] = (ggml::kIq4Values[k] + ggml::kIq4Values[k + 1]) / 2.0f;
    b.gap[k] = static_cast<float>(ggml::kIq4Values[k + 1] - ggml::kIq4Values[k]);
  }
  return b;
}
constexpr Boundaries kBoundaries = MakeBoundaries();

// Sums of integers below 2^24: exact in any order.
HWY_INLINE VC NearestValue(DC d, VC a) {
  VC q = hn::Set(d, static_cast<float>(ggml::kIq4Values[0]));
  for (int k = 0; k < 15; ++k) {
    const auto below = hn::Lt(a, hn::Set(d, kBoundaries.mid[k]));
    q = hn::Add(q, hn::IfThenZeroElse(below, hn::Set(d, kBoundaries.gap[k])));
  }
  return q;
}

float GroupScale(const float* xb, const float* weight) {
  HWY_ALIGN float ids[gi::kIq4Candidates];
  HWY_ALIGN float sumqx[gi::kIq4Candidates];
  HWY_ALIGN float sumq2[gi::kIq4Candidates];
  float max;
  if (!gi::Iq4Candidates(xb, ids, &max)) return 0;
  const DC d;
  const size_t n = hn::Lanes(d);
  for (size_t k = 0; k < gi::kIq4Candidates; k += n) {
    const VC id = hn::Load(d, ids + k);
    VC sx = hn::Zero(d), s2 = hn::Zero(d);
    for (int j = 0; j < gi::kIq4Group; ++j) {
      const VC x = hn::Set(d, xb[j]);
      const VC q = NearestValue(d, hn::Mul(id, x));
      const VC wq = hn::Mul(hn::Set(d, weight[j]), q);
      sx = hn::Add(sx, hn::Mul(wq, x));
      s2 = hn::Add(s2, hn::Mul(wq, q));
    }
    hn::Store(sx, d, sumqx + k);
    hn::Store(s2, d, sumq2 + k);
  }
  return gi::Iq4ChooseScale(sumqx, sumq2);
}

void EncodeRow(ggml::Type type, const float* in, size_t count, uint8_t* out, uint64_t* clipped,
               const float* importance) {
  const bool xs = type == ggml::Type::kIQ4_XS;
  const int block = xs ? ggml::kSuperBlock : gi::kIq4Group;
  const size_t bytes = static_cast<size_t>(ggml::Info(type).bytes);
  float weight[ggml::kSuperBlock];
  float scales[ggml::kSuperBlock / gi::kIq4Group];
  uint64_t count_clipped = 0;
  for (size_t b = 0; b < count / block; ++b) {
    const float* x = in + b * block;
    gi::Iq4Weights(x, importance == nullptr ? nullptr : importance + b * block, block, weight);
    for (int g = 0; g < block / gi::kIq4Group; ++g) {
      scales[g] = GroupScale(x + gi::kIq4Group * g, weight + gi::kIq4Group * g);
    }
    if (xs) {
      gi::PackIq4Xs(x, scales, out + b * bytes, count_clipped);
    } else {
      gi::PackIq4Nl(x, scales[0], out + b * bytes, count_clipped);
    }
  }
  *clipped += count_clipped;
}

void NearestValues(const float* a, size_t n, float* q) {
  const DC d;
  const size_t lanes = hn::Lanes(d);
  size_t i = 0;
  for (; i + lanes <= n; i += lanes) hn::StoreU(NearestValue(d, hn::LoadU(d, a + i)), d, q + i);
  for (; i < n; ++i) q[i] = hn::GetLane(NearestValue(d, hn::Set(d, a[i])));
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lowp::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lowp::kernels {

HWY_EXPORT(EncodeRow);
HWY_EXPORT(NearestValues);

void EncodeIq4Fast(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                   uint64_t& clipped, std::span<const float> importance) {
  HWY_DYNAMIC_DISPATCH(EncodeRow)(type, in.data(), in.size(), out.data(), &clipped,
                                  importance.empty() ? nullptr : importance.data());
}

void Iq4NearestValues(const float* a, size_t n, float* q) {
  HWY_DYNAMIC_DISPATCH(NearestValues)(a, n, q);
}

}  // namespace lowp::kernels
#endif  // HWY_ONCE
