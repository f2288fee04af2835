#include "codecs/ggml_vec_dot.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace lowp::ggml {
namespace {

// ggml's nearest_int: round half to even by the 1.5 * 2^23 trick (valid for
// |x| < 2^22, which |iscale * x| <= 127 is).
int NearestInt(float x) {
  const float v = x + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &v, sizeof(i));
  return (i & 0x007fffff) - 0x00400000;
}

// quantize_row_q8_0_ref (q8_1's d and qs are the same).
void Q8_0(std::span<const float> x, std::span<float> y) {
  for (size_t b = 0; b < x.size(); b += 32) {
    float amax = 0.0f;
    for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[b + j]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const float stored = Fp16ToFp32(Fp32ToFp16(d));
    for (size_t j = 0; j < 32; ++j) {
      const float q = std::round(x[b + j] * id);  // roundf: half away from zero
      y[b + j] = stored * static_cast<float>(static_cast<int8_t>(q));
    }
  }
}

// quantize_row_q8_K_ref.
void Q8_K(std::span<const float> x, std::span<float> y) {
  for (size_t b = 0; b < x.size(); b += 256) {
    float amax = 0.0f, max = 0.0f;
    for (size_t j = 0; j < 256; ++j) {
      const float ax = std::fabs(x[b + j]);
      if (ax > amax) {
        amax = ax;
        max = x[b + j];
      }
    }
    if (amax == 0.0f) {
      std::fill_n(y.begin() + static_cast<ptrdiff_t>(b), 256, 0.0f);
      continue;
    }
    const float iscale = -127.0f / max;
    const float d = 1.0f / iscale;
    for (size_t j = 0; j < 256; ++j) {
      const int q = std::min(127, NearestInt(iscale * x[b + j]));
      y[b + j] = d * static_cast<float>(q);
    }
  }
}

float Bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if ((u & 0x7fffffff) > 0x7f800000) {  // NaN: quiet, as ggml_compute_fp32_to_bf16
    u = (u | 0x00400000) & 0xffff0000;
  } else {
    u = (u + (0x7fff + ((u >> 16) & 1))) & 0xffff0000;
  }
  float y;
  std::memcpy(&y, &u, 4);
  return y;
}

}  // namespace

std::optional<Type> VecDotType(Type type) {
  switch (type) {
    case Type::kF32:
    case Type::kF16:
    case Type::kBF16:
      return type;
    case Type::kQ4_0:
    case Type::kQ5_0:
    case Type::kQ8_0:
    case Type::kIQ4_NL:
    case Type::kMXFP4:
    case Type::kNVFP4:
      return Type::kQ8_0;
    case Type::kQ4_1:
    case Type::kQ5_1:
      return Type::kQ8_1;
    case Type::kQ2_K:
    case Type::kQ3_K:
    case Type::kQ4_K:
    case Type::kQ5_K:
    case Type::kQ6_K:
    case Type::kIQ2_XXS:
    case Type::kIQ2_XS:
    case Type::kIQ3_XXS:
    case Type::kIQ1_S:
    case Type::kIQ3_S:
    case Type::kIQ2_S:
    case Type::kIQ4_XS:
    case Type::kIQ1_M:
    case Type::kTQ1_0:
    case Type::kTQ2_0:
      return Type::kQ8_K;
    default:
      return std::nullopt;
  }
}

void RoundForVecDot(Type vec_dot_type, std::span<const float> in, std::span<float> out) {
  switch (vec_dot_type) {
    case Type::kQ8_0:
    case Type::kQ8_1:
      return Q8_0(in, out);
    case Type::kQ8_K:
      return Q8_K(in, out);
    case Type::kF16:
      for (size_t i = 0; i < in.size(); ++i) out[i] = Fp16ToFp32(Fp32ToFp16(in[i]));
      return;
    case Type::kBF16:
      for (size_t i = 0; i < in.size(); ++i) out[i] = Bf16(in[i]);
      return;
    default:
      if (out.data() != in.data()) std::copy(in.begin(), in.end(), out.begin());
      return;
  }
}

}  // namespace lowp::ggml
