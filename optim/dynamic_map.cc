#include "optim/dynamic_map.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace lowp {
namespace {

// torch.linspace(0.1, 1, n) in float32, torch >= 2.0's scalar kernel
// (aten/src/ATen/native/cpu/RangeFactoriesKernel.cpp), separate roundings.
std::vector<float> Linspace(int n) {
  const float start = 0.1f, end = 1.0f;
  const float step = (end - start) / static_cast<float>(n - 1);
  std::vector<float> out(static_cast<size_t>(n));
  const int half = n / 2;
  for (int k = 0; k < n; ++k) {
    if (k < half) {
      const float offset = step * static_cast<float>(k);
      out[k] = start + offset;
    } else {
      const float offset = step * static_cast<float>(n - 1 - k);
      out[k] = end - offset;
    }
  }
  return out;
}

std::array<float, 256> MakeMap(bool is_signed) {
  std::vector<float> data;
  for (int i = 0; i < 7; ++i) {
    const int n = is_signed ? (1 << i) + 1 : (1 << (i + 1)) + 1;
    const std::vector<float> b = Linspace(n);
    // 10 ** (i - 6) is a Python float (an int 1 for i = 6), rounded to
    // float32 by torch before the float32 product.
    const float scale = static_cast<float>(std::pow(10.0, i - 6));
    for (int k = 0; k + 1 < n; ++k) {
      const float mean = (b[k] + b[k + 1]) / 2.0f;
      const float value = scale * mean;
      data.push_back(value);
      if (is_signed) data.push_back(-value);
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  std::sort(data.begin(), data.end());
  std::array<float, 256> map{};
  std::copy(data.begin(), data.end(), map.begin());
  return map;
}

}  // namespace

const std::array<float, 256>& DynamicMap(bool is_signed) {
  static const std::array<float, 256> kSigned = MakeMap(true), kUnsigned = MakeMap(false);
  return is_signed ? kSigned : kUnsigned;
}

uint8_t QuantizeDynamic(const std::array<float, 256>& map, bool is_signed, float x) {
  if (std::isnan(x)) return 0;
  // The first code above x (upper_bound, as a branch-free binary search over
  // the 256 sorted values), then the nearer of it and the one below by the
  // float32 midpoint; a tie goes to the even index.
  int hi = 0;
  for (int step = 128; step > 0; step >>= 1) hi += map[hi + step - 1] <= x ? step : 0;
  hi += hi == 255 && map[255] <= x;
  int q;
  if (hi == 0) {
    q = 0;
  } else if (hi == 256) {
    q = 255;
  } else {
    const int lo = hi - 1;
    const float mid = (map[lo] + map[hi]) * 0.5f;
    q = x < mid ? lo : x > mid ? hi : (lo % 2 == 0 ? lo : hi);
  }
  // The kernel's sign fix-up: a negative value never lands on +0.
  if (is_signed && std::signbit(x) && !std::signbit(map[q])) --q;
  return static_cast<uint8_t>(q);
}

uint64_t RoundTripDynamic(bool is_signed, std::span<float> values) {
  const std::array<float, 256>& map = DynamicMap(is_signed);
  uint64_t zeroed = 0;
  for (size_t begin = 0; begin < values.size(); begin += kDynamicBlock) {
    std::span<float> block =
        values.subspan(begin, std::min<size_t>(kDynamicBlock, values.size() - begin));
    float absmax = 0;
    for (float v : block) absmax = std::max(absmax, std::fabs(v));
    if (absmax == 0) continue;  // stored as zeros; they read back as the same zeros
    for (float& v : block) {
      const float stored = map[QuantizeDynamic(map, is_signed, v / absmax)] * absmax;
      zeroed += v != 0 && stored == 0;
      v = stored;
    }
  }
  return zeroed;
}

}  // namespace lowp
