// The scalar references of kernels/quantize.h, which state each rule plainly,
// and the public entry points, which run the SIMD kernels.
#include "kernels/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>

#include "formats/packing.h"

namespace lowp {
namespace kernels {

// kernels/quantize_simd.cc: the best target of the CPU.
void DispatchBlockAbsMax(const float* x, int64_t rows, int64_t cols, int64_t block, float* amax);
void DispatchBlockMinMax(const float* x, int64_t rows, int64_t cols, int64_t block, float* min,
                         float* max);
uint64_t DispatchQuantizeIntBlocks(const float* x, int64_t rows, int64_t cols, int64_t block,
                                   const float* scale, const float* zero, int32_t qmin,
                                   int32_t qmax, float* out, int16_t* codes);
size_t DispatchCountCastEvents(const float* x, const float* q, size_t n, float clip_above,
                               float subnormal_below, uint64_t* clipped, uint64_t* subnormal);
size_t DispatchComparePairs(const float* x, const float* q, size_t n, const CompareOptions& options,
                            ErrorStats* stats);

}  // namespace kernels

namespace {


// v clamped to [lo, hi]; a NaN v gives lo (the same as x86's maxps(v, lo)).
float Clamp(float v, float lo, float hi) {
  v = v > lo ? v : lo;
  return v < hi ? v : hi;
}

}  // namespace

void BlockAbsMaxRef(std::span<const float> x, int64_t cols, int64_t block, std::span<float> amax) {
  ForEachBlock(std::ssize(x), cols, block, [&](int64_t g, int64_t begin, int64_t end) {
    float m = 0;
    for (int64_t i = begin; i < end; ++i) {
      const float a = std::fabs(x[i]);
      if (std::isfinite(a) && a > m) m = a;
    }
    amax[g] = m;
  });
}

void BlockMinMaxRef(std::span<const float> x, int64_t cols, int64_t block, std::span<float> min,
                    std::span<float> max) {
  ForEachBlock(std::ssize(x), cols, block, [&](int64_t g, int64_t begin, int64_t end) {
    bool any = false;
    float lo = 0, hi = 0;
    for (int64_t i = begin; i < end; ++i) {
      const float v = x[i];
      if (!std::isfinite(v)) continue;
      if (!any || v < lo) lo = v;
      if (!any || v > hi) hi = v;
      any = true;
    }
    // A zero result is +0, whichever zeros the block holds.
    min[g] = lo == 0 ? 0.0f : lo;
    max[g] = hi == 0 ? 0.0f : hi;
  });
}

uint64_t QuantizeIntBlocksRef(std::span<const float> x, int64_t cols, int64_t block,
                              std::span<const float> scale, std::span<const float> zero,
                              const IntQuantParams& params, std::span<float> out,
                              std::span<int16_t> codes) {
  if (cols <= 0 || block <= 0) return 0;
  const int64_t rows = static_cast<int64_t>(x.size()) / cols;
  const int64_t per_row = BlocksPerRow(cols, block);
  const float qmin = static_cast<float>(params.qmin);
  const float qmax = static_cast<float>(params.qmax);
  uint64_t clipped = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t b = 0; b < per_row; ++b) {
      const int64_t g = r * per_row + b;
      const float s = scale[g];
      const float z = zero.empty() ? 0.0f : zero[g];
      const bool usable = s != 0 && std::isfinite(s);
      const int64_t begin = r * cols + b * block;
      const int64_t end = r * cols + std::min(cols, (b + 1) * block);
      for (int64_t i = begin; i < end; ++i) {
        const float v = x[i];
        float q, o;
        if (!std::isfinite(v)) {
          q = Clamp(z, qmin, qmax);
          o = v;
        } else if (!usable) {
          q = Clamp(z, qmin, qmax);
          o = 0;
        } else {
          const float t = v / s;
          const float rounded = std::nearbyint(t) + z;  // default mode: half to even
          clipped += rounded < qmin || rounded > qmax;
          q = Clamp(rounded, qmin, qmax);
          o = (q - z) * s;
        }
        out[i] = o;
        if (!codes.empty()) codes[i] = static_cast<int16_t>(q);
      }
    }
  }
  return clipped;
}

void ComparePairsRef(std::span<const float> x, std::span<const float> q,
                     const CompareOptions& options, ErrorStats& stats) {
  ErrorStats s;
  for (size_t i = 0; i < x.size(); ++i) s.Observe(x[i], q[i], options);
  stats.Merge(s);
}

void BlockAbsMax(std::span<const float> x, int64_t cols, int64_t block, std::span<float> amax) {
  if (cols <= 0 || block <= 0) return;
  kernels::DispatchBlockAbsMax(x.data(), static_cast<int64_t>(x.size()) / cols, cols, block,
                               amax.data());
}
void BlockMinMax(std::span<const float> x, int64_t cols, int64_t block, std::span<float> min,
                 std::span<float> max) {
  if (cols <= 0 || block <= 0) return;
  kernels::DispatchBlockMinMax(x.data(), static_cast<int64_t>(x.size()) / cols, cols, block,
                               min.data(), max.data());
}
uint64_t QuantizeIntBlocks(std::span<const float> x, int64_t cols, int64_t block,
                           std::span<const float> scale, std::span<const float> zero,
                           const IntQuantParams& params, std::span<float> out,
                           std::span<int16_t> codes) {
  if (cols <= 0 || block <= 0) return 0;
  return kernels::DispatchQuantizeIntBlocks(
      x.data(), static_cast<int64_t>(x.size()) / cols, cols, block, scale.data(),
      zero.empty() ? nullptr : zero.data(), params.qmin, params.qmax, out.data(),
      codes.empty() ? nullptr : codes.data());
}
void CountCastEventsRef(std::span<const float> x, std::span<const float> q, float clip_above,
                        float subnormal_below, uint64_t& clipped, uint64_t& subnormal) {
  for (size_t i = 0; i < x.size(); ++i) {
    const float a = std::fabs(x[i]), b = std::fabs(q[i]);
    clipped += a > clip_above && std::isfinite(a);
    subnormal += b > 0 && b < subnormal_below;
  }
}

void CountCastEvents(std::span<const float> x, std::span<const float> q, float clip_above,
                     float subnormal_below, uint64_t& clipped, uint64_t& subnormal) {
  const size_t done = kernels::DispatchCountCastEvents(x.data(), q.data(), x.size(), clip_above,
                                                       subnormal_below, &clipped, &subnormal);
  CountCastEventsRef(x.subspan(done), q.subspan(done), clip_above, subnormal_below, clipped,
                     subnormal);
}

void ComparePairs(std::span<const float> x, std::span<const float> q, const CompareOptions& options,
                  ErrorStats& stats) {
  const size_t done = kernels::DispatchComparePairs(x.data(), q.data(), x.size(), options, &stats);
  ComparePairsRef(x.subspan(done), q.subspan(done), options, stats);  // the last partial vector
}

}  // namespace lowp
