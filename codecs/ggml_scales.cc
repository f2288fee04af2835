// ggml's block-scale encodings of its fp4 types (ggml-impl.h's
// ggml_e8m0_to_fp32_half, ggml_ue4m3_to_fp32 and ggml_fp32_to_ue4m3).
#include "codecs/ggml_scales.h"

#include <bit>
#include <cmath>
#include <cstdint>

#include "codecs/ggml_ops.h"

namespace lowp::ggml {

using internal::TruncToInt;

// ggml_e8m0_to_fp32_half: 2^(e - 128), the denormals for e < 2.
float E8m0Half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  return std::bit_cast<float>(bits);
}

// ggml_ue4m3_to_fp32: an unsigned e4m3 scale at half its value; 0 and 0x7F
// (and, by the formula, every code) decode without NaN.
float Ue4m3Half(uint8_t x) {
  if (x == 0 || x == 0x7F) return 0.0f;
  const int exp = (x >> 3) & 0xF;
  const int man = x & 0x7;
  const float raw = exp == 0 ? std::ldexp(static_cast<float>(man), -9)
                             : std::ldexp(1.0f + static_cast<float>(man) / 8.0f, exp - 7);
  return raw * 0.5f;
}

// ggml_fp32_to_ue4m3: rounds half up on the mantissa's first dropped bit,
// saturates at 448 (0x7E), flushes what is below half the least subnormal.
uint8_t ToUe4m3(float x) {
  if (!(x > 0.0f)) return 0;
  if (x > 448.0f) x = 448.0f;
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const int fp32_exp = static_cast<int>((bits >> 23) & 0xFF) - 127;
  const int fp32_man = static_cast<int>((bits >> 20) & 0x7);
  int exp = fp32_exp + 7;
  if (exp <= 0) {
    int man = TruncToInt(x * 512.0f + 0.5f);
    if (man > 7) man = 7;
    if (man < 1) return 0;
    return static_cast<uint8_t>(man);
  }
  if (exp >= 15) return 0x7E;
  int man = fp32_man + static_cast<int>((bits >> 19) & 1);
  if (man > 7) {
    man = 0;
    if (++exp >= 15) return 0x7E;
  }
  return static_cast<uint8_t>((exp << 3) | man);
}

}  // namespace lowp::ggml
