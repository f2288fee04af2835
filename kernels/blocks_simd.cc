// The block kernels of kernels/blocks.h that kernels/quantize_simd.cc does
// not hold (the scaled-float division, ggml's zero-for-non-finite min/max and
// its e2m1 least-error rule), compiled once per Highway target
// (foreach_target.h re-includes this file) and chosen at run time. Every
// float operation is one the scalar references in kernels/blocks.cc also do,
// in the same precision, so results match them bit for bit.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/blocks_simd.cc"
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/blocks.h"

HWY_BEFORE_NAMESPACE();
namespace lowp::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DF = hn::ScalableTag<float>;

// Calls vec(d, g, at) over every block of every row, with full vectors of d
// first and the block's tail with a one-lane tag; returns the sum of what vec
// returns.
template <class VecFn>
HWY_INLINE uint64_t EachBlockVector(int64_t rows, int64_t cols, int64_t block, VecFn vec) {
  const DF d;
  const hn::CappedTag<float, 1> d1;
  const size_t N = hn::Lanes(d);
  const int64_t per_row = (cols + block - 1) / block;
  uint64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < per_row; ++g) {
      const size_t len = static_cast<size_t>(std::min(block, cols - g * block));
      const int64_t at = r * cols + g * block;
      const int64_t k = r * per_row + g;
      size_t i = 0;
      for (; i + N <= len; i += N) count += vec(d, k, at + static_cast<int64_t>(i));
      for (; i < len; ++i) count += vec(d1, k, at + static_cast<int64_t>(i));
    }
  }
  return count;
}

// ------------------------------ Scaled floats: x / scale

uint64_t DivideBlocks(const float* HWY_RESTRICT x, int64_t rows, int64_t cols, int64_t block,
                      const float* HWY_RESTRICT divisor, float limit, float* HWY_RESTRICT v) {
  return EachBlockVector(rows, cols, block, [&](auto d, int64_t g, int64_t at) -> size_t {
    const auto in = hn::LoadU(d, x + at);
    const auto s = hn::Set(d, divisor[g]);
    const auto finite = hn::IsFinite(in);
    const auto zero = hn::Eq(s, hn::Zero(d));
    // x / 0 is never computed into a result: +-0 of x's sign instead.
    const auto value = hn::IfThenElse(zero, hn::CopySign(hn::Zero(d), in), hn::Div(in, s));
    const auto result = hn::IfThenElseZero(finite, value);
    hn::StoreU(result, d, v + at);
    return hn::CountTrue(d, hn::And(finite, hn::Gt(hn::Abs(result), hn::Set(d, limit))));
  });
}

// ------------------------------ ggml's sanitized min and max

void BlockMinMaxNonFiniteAsZero(const float* HWY_RESTRICT x, int64_t rows, int64_t cols,
                                int64_t block, float* HWY_RESTRICT min, float* HWY_RESTRICT max) {
  const DF d;
  const size_t N = hn::Lanes(d);
  const int64_t per_row = (cols + block - 1) / block;
  constexpr float kInf = std::numeric_limits<float>::infinity();
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g = 0; g < per_row; ++g) {
      const size_t len = static_cast<size_t>(std::min(block, cols - g * block));
      const float* p = x + r * cols + g * block;
      float lo = kInf, hi = -kInf;
      size_t i = 0;
      if (len >= N) {
        auto vlo = hn::Set(d, kInf), vhi = hn::Set(d, -kInf);
        for (; i + N <= len; i += N) {
          const auto in = hn::LoadU(d, p + i);
          const auto v = hn::IfThenElseZero(hn::IsFinite(in), in);
          vlo = hn::Min(vlo, v);
          vhi = hn::Max(vhi, v);
        }
        lo = hn::GetLane(hn::MinOfLanes(d, vlo));
        hi = hn::GetLane(hn::MaxOfLanes(d, vhi));
      }
      for (; i < len; ++i) {
        const float v = std::isfinite(p[i]) ? p[i] : 0.0f;
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      // A zero result is +0 whatever zeros the block holds.
      min[r * per_row + g] = lo + 0.0f;
      max[r * per_row + g] = hi + 0.0f;
    }
  }
}

// ------------------------------ ggml's e2m1 by least error

// The magnitudes of ggml's e2m1 codes 1..7 (kvalues_mxfp4 at half scale).
constexpr float kFp4Magnitudes[7] = {1, 2, 3, 4, 6, 8, 12};

uint64_t QuantizeGgmlFp4Blocks(const float* HWY_RESTRICT x, int64_t rows, int64_t cols,
                               int64_t block, const float* HWY_RESTRICT half_scale,
                               float* HWY_RESTRICT out) {
  return EachBlockVector(rows, cols, block, [&](auto d, int64_t g, int64_t at) -> size_t {
    const float e = half_scale[g];
    const auto in = hn::LoadU(d, x + at);
    const auto finite = hn::IsFinite(in);
    const auto a = hn::IfThenElseZero(finite, hn::Abs(in));  // a non-finite x is encoded as 0
    // Code 0's error is |0 * e - x| = |x|; a code of the other sign is never
    // nearer (|x| + c rounds to at least |x|), and one of the same sign has
    // error |c - |x|| for either sign of x: the search runs on magnitudes
    // 0 = c0 < c1 < ... < c7. Rounding is monotonic, so the errors fall
    // (weakly) while c <= |x| and rise (weakly) after: the first least error
    // is where the last strict fall lands (code 0 if none).
    auto prev = a;
    auto best = hn::Zero(d);
    for (float k : kFp4Magnitudes) {
      const auto c = hn::Set(d, k * e);
      const auto err = hn::Abs(hn::Sub(c, a));
      best = hn::IfThenElse(hn::Lt(err, prev), c, best);
      prev = err;
    }
    // Code 0 decodes to +0 whatever the sign of x.
    const auto value = hn::IfThenZeroElse(hn::Eq(best, hn::Zero(d)), hn::CopySign(best, in));
    hn::StoreU(hn::IfThenElse(finite, value, in), d, out + at);
    return hn::CountTrue(d, hn::Gt(a, hn::Set(d, 12 * e)));
  });
}

// NOLINTNEXTLINE(google-readability-namespace-comments)
}  // namespace HWY_NAMESPACE
}  // namespace lowp::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lowp::kernels {

HWY_EXPORT(DivideBlocks);
HWY_EXPORT(BlockMinMaxNonFiniteAsZero);
HWY_EXPORT(QuantizeGgmlFp4Blocks);

uint64_t DispatchDivideBlocks(const float* x, int64_t rows, int64_t cols, int64_t block,
                              const float* divisor, float limit, float* v) {
  return HWY_DYNAMIC_DISPATCH(DivideBlocks)(x, rows, cols, block, divisor, limit, v);
}
void DispatchBlockMinMaxNonFiniteAsZero(const float* x, int64_t rows, int64_t cols, int64_t block,
                                        float* min, float* max) {
  HWY_DYNAMIC_DISPATCH(BlockMinMaxNonFiniteAsZero)(x, rows, cols, block, min, max);
}
uint64_t DispatchQuantizeGgmlFp4Blocks(const float* x, int64_t rows, int64_t cols, int64_t block,
                                       const float* half_scale, float* out) {
  return HWY_DYNAMIC_DISPATCH(QuantizeGgmlFp4Blocks)(x, rows, cols, block, half_scale, out);
}

}  // namespace lowp::kernels
#endif  // HWY_ONCE
