// The scalar references of kernels/blocks.h, which state each rule plainly,
// and the public entry points, which run the SIMD kernels.
#include "kernels/blocks.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "formats/packing.h"

namespace lowp {
namespace kernels {

// kernels/quantize_simd.cc and kernels/blocks_simd.cc: the best target of
// the CPU.
void DispatchBlockSignedMax(const float* x, int64_t rows, int64_t cols, int64_t block, float* max);
uint64_t DispatchQuantizeGgmlBlocks(const GgmlElementRule& rule, const float* x, int64_t rows,
                                    int64_t cols, int64_t block, const GgmlBlockParams& params,
                                    float* out);
void DispatchQuantizeCodebookBlocks(const float* x, int64_t rows, int64_t cols, int64_t block,
                                    const float* inverse, const float* scale,
                                    const float* thresholds, const float* values, int32_t count,
                                    float* out);

uint64_t DispatchScaleBlocks(const float* x, int64_t rows, int64_t cols, int64_t block,
                             const float* multiplier, float post, float limit, bool clamp,
                             float* v);
uint64_t DispatchUnscaleBlocks(const float* x, const float* v, int64_t rows, int64_t cols,
                               int64_t block, const float* scale, float subnormal_below,
                               float* out);
uint64_t DispatchDivideBlocks(const float* x, int64_t rows, int64_t cols, int64_t block,
                              const float* divisor, float limit, float* v);
void DispatchBlockMinMaxNonFiniteAsZero(const float* x, int64_t rows, int64_t cols, int64_t block,
                                        float* min, float* max);
uint64_t DispatchQuantizeGgmlFp4Blocks(const float* x, int64_t rows, int64_t cols, int64_t block,
                                       const float* half_scale, float* out);

}  // namespace kernels

void BlockSignedMaxRef(std::span<const float> x, int64_t cols, int64_t block,
                       std::span<float> max) {
  ForEachBlock(std::ssize(x), cols, block, [&](int64_t g, int64_t begin, int64_t end) {
    float amax = 0, m = 0;
    for (int64_t i = begin; i < end; ++i) {
      if (std::isfinite(x[i]) && amax < std::fabs(x[i])) {
        amax = std::fabs(x[i]);
        m = x[i];
      }
    }
    max[g] = m;
  });
}

void BlockSignedMax(std::span<const float> x, int64_t cols, int64_t block, std::span<float> max) {
  if (cols <= 0 || block <= 0) return;
  kernels::DispatchBlockSignedMax(x.data(), static_cast<int64_t>(x.size()) / cols, cols, block,
                                  max.data());
}

uint64_t QuantizeGgmlBlocksRef(const GgmlElementRule& rule, std::span<const float> x, int64_t cols,
                               int64_t block, const GgmlBlockParams& params, std::span<float> out) {
  uint64_t clipped = 0;
  ForEachBlock(std::ssize(x), cols, block, [&](int64_t g, int64_t begin, int64_t end) {
    const float id = params.id[g], d = params.d[g];
    for (int64_t i = begin; i < end; ++i) {
      if (!std::isfinite(x[i])) {
        out[i] = x[i];
        continue;
      }
      if (rule.rule == GgmlRule::kRound) {
        const float v = std::round(x[i] * id);
        int32_t q = 0;
        if (v > 127.0f || v < -128.0f) {
          ++clipped;
          q = v > 0 ? 127 : -128;
        } else if (!std::isnan(v)) {
          q = static_cast<int32_t>(v);
        }
        out[i] = static_cast<float>(q) * d;
        continue;
      }
      const float scaled = rule.rule == GgmlRule::kOffset ? (x[i] - params.min[g]) * id : x[i] * id;
      const float v = scaled + rule.bias;
      int32_t q = rule.zero;
      if (v >= static_cast<float>(rule.qmax + 1)) {
        ++clipped;
        q = rule.qmax;
      } else if (v <= -1.0f) {
        ++clipped;
        q = 0;
      } else if (!std::isnan(v)) {
        q = static_cast<int32_t>(v);  // toward zero
      }
      out[i] = rule.rule == GgmlRule::kOffset ? static_cast<float>(q) * d + params.m[g]
                                              : static_cast<float>(q - rule.zero) * d;
    }
  });
  return clipped;
}

uint64_t QuantizeGgmlBlocks(const GgmlElementRule& rule, std::span<const float> x, int64_t cols,
                            int64_t block, const GgmlBlockParams& params, std::span<float> out) {
  if (cols <= 0 || block <= 0) return 0;
  return kernels::DispatchQuantizeGgmlBlocks(rule, x.data(), static_cast<int64_t>(x.size()) / cols,
                                             cols, block, params, out.data());
}

void QuantizeCodebookBlocksRef(std::span<const float> x, int64_t cols, int64_t block,
                               std::span<const float> inverse, std::span<const float> scale,
                               std::span<const float> thresholds, std::span<const float> values,
                               std::span<float> out) {
  ForEachBlock(std::ssize(x), cols, block, [&](int64_t g, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      if (!std::isfinite(x[i])) {
        out[i] = x[i];
        continue;
      }
      const float y = x[i] * inverse[g];
      size_t code = 0;
      for (float t : thresholds) code += y > t;
      out[i] = values[code] * scale[g];
    }
  });
}

void QuantizeCodebookBlocks(std::span<const float> x, int64_t cols, int64_t block,
                            std::span<const float> inverse, std::span<const float> scale,
                            std::span<const float> thresholds, std::span<const float> values,
                            std::span<float> out) {
  if (cols <= 0 || block <= 0) return;
  if (values.size() > 16 || thresholds.size() + 1 != values.size()) {
    return QuantizeCodebookBlocksRef(x, cols, block, inverse, scale, thresholds, values, out);
  }
  kernels::DispatchQuantizeCodebookBlocks(
      x.data(), static_cast<int64_t>(x.size()) / cols, cols, block, inverse.data(), scale.data(),
      thresholds.data(), values.data(), static_cast<int32_t>(values.size()), out.data());
}

uint64_t ScaleBlocksRef(std::span<const float> x, int64_t cols, int64_t block,
                        std::span<const float> multiplier, float post, float limit, bool clamp,
                        std::span<float> v) {
  uint64_t clipped = 0;
  ForEachBlock(std::ssize(x), cols, block, [&](int64_t g, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float value = (std::isfinite(x[i]) ? x[i] : 0.0f) * multiplier[g] * post;
      clipped += std::fabs(value) > limit;
      if (clamp) value = std::min(std::max(value, -limit), limit);
      v[i] = value;
    }
  });
  return clipped;
}

uint64_t ScaleBlocks(std::span<const float> x, int64_t cols, int64_t block,
                     std::span<const float> multiplier, float post, float limit, bool clamp,
                     std::span<float> v) {
  if (cols <= 0 || block <= 0) return 0;
  return kernels::DispatchScaleBlocks(x.data(), static_cast<int64_t>(x.size()) / cols, cols, block,
                                      multiplier.data(), post, limit, clamp, v.data());
}

uint64_t UnscaleBlocksRef(std::span<const float> x, std::span<const float> v, int64_t cols,
                          int64_t block, std::span<const float> scale, float subnormal_below,
                          std::span<float> out) {
  constexpr float kMax = std::numeric_limits<float>::max();
  uint64_t subnormal = 0;
  ForEachBlock(std::ssize(x), cols, block, [&](int64_t g, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const float a = std::fabs(v[i]);
      subnormal += a > 0 && a < subnormal_below;
      const float y = std::min(std::max(v[i] * scale[g], -kMax), kMax);
      out[i] = std::isfinite(x[i]) ? y : x[i];
    }
  });
  return subnormal;
}

uint64_t UnscaleBlocks(std::span<const float> x, std::span<const float> v, int64_t cols,
                       int64_t block, std::span<const float> scale, float subnormal_below,
                       std::span<float> out) {
  if (cols <= 0 || block <= 0) return 0;
  return kernels::DispatchUnscaleBlocks(x.data(), v.data(), static_cast<int64_t>(x.size()) / cols,
                                        cols, block, scale.data(), subnormal_below, out.data());
}

uint64_t DivideBlocksRef(std::span<const float> x, int64_t cols, int64_t block,
                         std::span<const float> divisor, float limit, std::span<float> v) {
  uint64_t clipped = 0;
  ForEachBlock(std::ssize(x), cols, block, [&](int64_t g, int64_t begin, int64_t end) {
    const float s = divisor[g];
    for (int64_t i = begin; i < end; ++i) {
      if (!std::isfinite(x[i])) {
        v[i] = 0;
      } else if (s == 0) {
        v[i] = std::copysign(0.0f, x[i]);
      } else {
        v[i] = x[i] / s;
        clipped += std::fabs(v[i]) > limit;
      }
    }
  });
  return clipped;
}

uint64_t DivideBlocks(std::span<const float> x, int64_t cols, int64_t block,
                      std::span<const float> divisor, float limit, std::span<float> v) {
  if (cols <= 0 || block <= 0) return 0;
  return kernels::DispatchDivideBlocks(x.data(), static_cast<int64_t>(x.size()) / cols, cols,
                                       block, divisor.data(), limit, v.data());
}

void BlockMinMaxNonFiniteAsZeroRef(std::span<const float> x, int64_t cols, int64_t block,
                                   std::span<float> min, std::span<float> max) {
  ForEachBlock(std::ssize(x), cols, block, [&](int64_t g, int64_t begin, int64_t end) {
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    for (int64_t i = begin; i < end; ++i) {
      const float v = std::isfinite(x[i]) ? x[i] : 0.0f;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    min[g] = lo + 0.0f;  // -0 + +0 is +0
    max[g] = hi + 0.0f;
  });
}

void BlockMinMaxNonFiniteAsZero(std::span<const float> x, int64_t cols, int64_t block,
                                std::span<float> min, std::span<float> max) {
  if (cols <= 0 || block <= 0) return;
  kernels::DispatchBlockMinMaxNonFiniteAsZero(x.data(), static_cast<int64_t>(x.size()) / cols,
                                              cols, block, min.data(), max.data());
}

uint64_t QuantizeGgmlFp4BlocksRef(std::span<const float> x, int64_t cols, int64_t block,
                                  std::span<const float> half_scale, std::span<float> out) {
  static constexpr int8_t kValues[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};
  uint64_t clipped = 0;
  ForEachBlock(std::ssize(x), cols, block, [&](int64_t g, int64_t begin, int64_t end) {
    const float e = half_scale[g];
    for (int64_t i = begin; i < end; ++i) {
      const float v = std::isfinite(x[i]) ? x[i] : 0.0f;
      int best = 0;
      float best_err = std::fabs(kValues[0] * e - v);
      for (int k = 1; k < 16; ++k) {
        const float err = std::fabs(kValues[k] * e - v);
        if (err < best_err) {
          best = k;
          best_err = err;
        }
      }
      clipped += std::fabs(v) > 12 * e;
      out[i] = std::isfinite(x[i]) ? kValues[best] * e : x[i];
    }
  });
  return clipped;
}

uint64_t QuantizeGgmlFp4Blocks(std::span<const float> x, int64_t cols, int64_t block,
                               std::span<const float> half_scale, std::span<float> out) {
  if (cols <= 0 || block <= 0) return 0;
  return kernels::DispatchQuantizeGgmlFp4Blocks(x.data(), static_cast<int64_t>(x.size()) / cols,
                                                cols, block, half_scale.data(), out.data());
}

}  // namespace lowp
