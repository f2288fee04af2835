// ggml's ternary and 1- and 2-bit types, decoded as dequantize_row_tq1_0,
// dequantize_row_tq2_0, dequantize_row_q1_0 and dequantize_row_q2_0 do (GGUF
// files may hold them; lowp does not write them).
#include <cstdint>

#include "codecs/ggml_blocks.h"
#include "codecs/ggml_ops.h"

namespace lowp::ggml::internal {
namespace {

// Digit n of a base-3 byte: (byte * 3^n mod 256) * 3 >> 8, in 0..2.
float Trit(uint8_t byte, int n, float d) {
  static constexpr uint8_t kPow3[6] = {1, 3, 9, 27, 81, 243};
  const uint8_t q = static_cast<uint8_t>(byte * kPow3[n]);
  const int xi = (static_cast<uint16_t>(q) * 3) >> 8;
  return static_cast<float>(xi - 1) * d;
}

}  // namespace

void DecodeTq1_0(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockTq1_0>(in);
  const float d = Half(b.d);
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < 32; ++m) *y++ = Trit(b.qs[m], n, d);
  }
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < 16; ++m) *y++ = Trit(b.qs[32 + m], n, d);
  }
  for (int n = 0; n < 4; ++n) {
    for (int j = 0; j < 4; ++j) *y++ = Trit(b.qh[j], n, d);
  }
}

void DecodeTq2_0(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockTq2_0>(in);
  const float d = Half(b.d);
  for (int j = 0; j < 64; j += 32) {
    for (int l = 0; l < 4; ++l) {
      for (int m = 0; m < 32; ++m) {
        const int q = (b.qs[j + m] >> (l * 2)) & 3;
        *y++ = static_cast<float>(q - 1) * d;
      }
    }
  }
}

void DecodeQ1_0(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockQ1_0>(in);
  const float d = Half(b.d);
  for (int j = 0; j < 128; ++j) y[j] = (b.qs[j / 8] >> (j % 8)) & 1 ? d : -d;
}

void DecodeQ2_0(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockQ2_0>(in);
  const float d = Half(b.d);
  for (int j = 0; j < 64; ++j) {
    const int q = (b.qs[j / 4] >> ((j % 4) * 2)) & 3;
    y[j] = static_cast<float>(q - 1) * d;
  }
}

}  // namespace lowp::ggml::internal
