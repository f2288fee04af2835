// ggml's 32-element block types q4_0, q4_1, q5_0, q5_1 and q8_0
// (quantize_row_*_ref and dequantize_row_* of ggml/src/ggml-quants.c).
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "codecs/ggml_blocks.h"
#include "codecs/ggml_ops.h"

namespace lowp::ggml::internal {
namespace {

// (int8_t)(v) then MIN(qmax, ...), counting the clamp.
uint8_t TruncMin(float v, int qmax, uint64_t& clipped) {
  const int q = static_cast<int8_t>(TruncToInt(v));
  if (q > qmax) {
    ++clipped;
    return static_cast<uint8_t>(qmax);
  }
  return static_cast<uint8_t>(q);
}

void MinMax(const float* x, int n, float& min, float& max) {
  min = FLT_MAX;
  max = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < min) min = x[j];
    if (x[j] > max) max = x[j];
  }
}

}  // namespace

// d = max / -8; q = MIN(15, (int8_t)(x / d + 8.5)).
void EncodeQ4_0(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  BlockQ4_0 b;
  const float d = SignedMax(x, 32) / -8;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = ToHalf(d);
  for (int j = 0; j < 16; ++j) {
    const uint8_t lo = TruncMin(x[j] * id + 8.5f, 15, clipped);
    const uint8_t hi = TruncMin(x[j + 16] * id + 8.5f, 15, clipped);
    b.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
  StoreBlock(b, out);
}

// d = (max - min) / 15, m = min; q = MIN(15, (int8_t)((x - min) / d + 0.5)).
void EncodeQ4_1(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  BlockQ4_1 b;
  float min, max;
  MinMax(x, 32, min, max);
  const float d = (max - min) / 15;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = ToHalf(d);
  b.m = ToHalf(min);
  for (int j = 0; j < 16; ++j) {
    const uint8_t lo = TruncMin((x[j] - min) * id + 0.5f, 15, clipped);
    const uint8_t hi = TruncMin((x[j + 16] - min) * id + 0.5f, 15, clipped);
    b.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
  StoreBlock(b, out);
}

// d = max / -16; q = MIN(31, (int8_t)(x / d + 16.5)).
void EncodeQ5_0(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  BlockQ5_0 b;
  const float d = SignedMax(x, 32) / -16;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = ToHalf(d);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const uint8_t lo = TruncMin(x[j] * id + 16.5f, 31, clipped);
    const uint8_t hi = TruncMin(x[j + 16] * id + 16.5f, 31, clipped);
    b.qs[j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
    qh |= static_cast<uint32_t>((lo & 0x10u) >> 4) << j;
    qh |= static_cast<uint32_t>((hi & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(b.qh, &qh, sizeof(qh));
  StoreBlock(b, out);
}

// d = (max - min) / 31, m = min; q = (uint8_t)((x - min) / d + 0.5), no
// clamp (the largest element lands on 31).
void EncodeQ5_1(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  BlockQ5_1 b;
  float min, max;
  MinMax(x, 32, min, max);
  const float d = (max - min) / 31;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = ToHalf(d);
  b.m = ToHalf(min);
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    const uint8_t lo = static_cast<uint8_t>(TruncToInt((x[j] - min) * id + 0.5f));
    const uint8_t hi = static_cast<uint8_t>(TruncToInt((x[j + 16] - min) * id + 0.5f));
    clipped += (lo > 31) + (hi > 31);
    b.qs[j] = static_cast<uint8_t>((lo & 0x0F) | ((hi & 0x0F) << 4));
    qh |= static_cast<uint32_t>((lo & 0x10u) >> 4) << j;
    qh |= static_cast<uint32_t>((hi & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(b.qh, &qh, sizeof(qh));
  StoreBlock(b, out);
}

// d = amax / 127; q = roundf(x / d) (ties away from zero).
void EncodeQ8_0(const float* x, const float* /*qw: ggml ignores it*/, uint8_t* out, uint64_t& clipped) {
  BlockQ8_0 b;
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = ToHalf(d);
  for (int j = 0; j < 32; ++j) {
    const int q = TruncToInt(std::round(x[j] * id));
    clipped += q > 127 || q < -128;
    b.qs[j] = static_cast<int8_t>(q);
  }
  StoreBlock(b, out);
}

void DecodeQ4_0(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockQ4_0>(in);
  const float d = Half(b.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((b.qs[j] & 0x0F) - 8) * d;
    y[j + 16] = static_cast<float>((b.qs[j] >> 4) - 8) * d;
  }
}

void DecodeQ4_1(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockQ4_1>(in);
  const float d = Half(b.d), m = Half(b.m);
  for (int j = 0; j < 16; ++j) {
    const float lo = static_cast<float>(b.qs[j] & 0x0F) * d;
    const float hi = static_cast<float>(b.qs[j] >> 4) * d;
    y[j] = lo + m;
    y[j + 16] = hi + m;
  }
}

namespace {
// Element j's and j + 16's bit 4 from q5's qh word.
int HighBit(uint32_t qh, int j) { return static_cast<int>(((qh >> j) << 4) & 0x10); }
}  // namespace

void DecodeQ5_0(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockQ5_0>(in);
  const float d = Half(b.d);
  uint32_t qh;
  std::memcpy(&qh, b.qh, sizeof(qh));
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(((b.qs[j] & 0x0F) | HighBit(qh, j)) - 16) * d;
    y[j + 16] = static_cast<float>(((b.qs[j] >> 4) | HighBit(qh, j + 16)) - 16) * d;
  }
}

void DecodeQ5_1(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockQ5_1>(in);
  const float d = Half(b.d), m = Half(b.m);
  uint32_t qh;
  std::memcpy(&qh, b.qh, sizeof(qh));
  for (int j = 0; j < 16; ++j) {
    const float lo = static_cast<float>((b.qs[j] & 0x0F) | HighBit(qh, j)) * d;
    const float hi = static_cast<float>((b.qs[j] >> 4) | HighBit(qh, j + 16)) * d;
    y[j] = lo + m;
    y[j + 16] = hi + m;
  }
}

void DecodeQ8_0(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockQ8_0>(in);
  const float d = Half(b.d);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(b.qs[j]) * d;
}

}  // namespace lowp::ggml::internal
