// The scalar references of kernels/nn.h: plain loops, the definition the
// dispatched kernels (nn_simd.cc) are tested against.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>

#include "kernels/nn.h"

namespace lowp {

namespace {

// The eight partial sums of kernels/nn.h added pairwise.
double AddParts(const double (&p)[8]) {
  return ((p[0] + p[1]) + (p[2] + p[3])) + ((p[4] + p[5]) + (p[6] + p[7]));
}

}  // namespace

namespace kernels {

const uint64_t* ExpF32Table() {
  // 2^(i/32) rounded to double (long double's 64-bit exp2 rounded once more:
  // equal to glibc's __exp2f_data.tab, which the exp test checks through
  // every index), stored less i << 47 so that adding k << 47 for k = 32 q + i
  // makes 2^q 2^(i/32).
  static const std::array<uint64_t, 32> table = [] {
    std::array<uint64_t, 32> t;
    for (uint64_t i = 0; i < 32; ++i) {
      const double v = static_cast<double>(std::exp2l(static_cast<long double>(i) / 32));
      t[i] = std::bit_cast<uint64_t>(v) - (i << 47);
    }
    return t;
  }();
  return table.data();
}

}  // namespace kernels

void ExpF32Ref(std::span<const float> in, std::span<float> out) {
  for (size_t i = 0; i < in.size(); ++i) out[i] = std::exp(in[i]);
}

void SoftmaxRef(std::span<float> x) {
  if (x.empty()) return;
  float max = -std::numeric_limits<float>::infinity();
  for (float v : x) max = std::max(max, v);
  double parts[8] = {};
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = std::exp(x[i] - max);
    parts[i % 8] += x[i];
  }
  const float inv = static_cast<float>(1.0 / AddParts(parts));
  for (float& v : x) v *= inv;
}

void RmsNormRef(const float* in, float* out, int64_t rows, int64_t width, const float* weight,
                bool adds_one, double eps) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = in + r * width;
    float* o = out + r * width;
    double parts[8] = {};
    for (int64_t j = 0; j < width; ++j) parts[j % 8] += static_cast<double>(x[j]) * x[j];
    const float scale = static_cast<float>(1.0 / std::sqrt(AddParts(parts) / width + eps));
    for (int64_t j = 0; j < width; ++j) {
      const float w = adds_one ? 1.0f + weight[j] : weight[j];
      o[j] = x[j] * scale * w;
    }
  }
}

void RopeRef(float* x, int64_t heads, int64_t dim, const float* cos, const float* sin) {
  const int64_t half = dim / 2;
  for (int64_t h = 0; h < heads; ++h) {
    float* v = x + h * dim;
    for (int64_t i = 0; i < half; ++i) {
      const float a = v[i], b = v[i + half];
      v[i] = a * cos[i] - b * sin[i];
      v[i + half] = b * cos[i] + a * sin[i];
    }
  }
}

void SiluRef(std::span<float> x) {
  for (float& v : x) v = v / (1.0f + std::exp(-v));
}

void AddToRef(std::span<float> x, std::span<const float> y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
}

void MultiplyByRef(std::span<float> x, std::span<const float> y) {
  for (size_t i = 0; i < x.size(); ++i) x[i] *= y[i];
}

uint64_t CountNonfiniteRef(std::span<const float> x) {
  uint64_t n = 0;
  for (float v : x) n += !std::isfinite(v);
  return n;
}

}  // namespace lowp
