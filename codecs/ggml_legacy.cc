// ggml's 32-element block types q4_0, q4_1, q5_0, q5_1 and q8_0
// (quantize_row_*_ref, with importance weights quantize_row_*_impl, and
// dequantize_row_* of ggml/src/ggml-quants.c).
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "codecs/ggml_blocks.h"
#include "codecs/ggml_kquants_parts.h"
#include "codecs/ggml_kquants_search.h"
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

// Codes 0..15: element j in qs[j]'s low nibble and j + 16 in its high one.
void PackNibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>(L[j] | (L[j + 16] << 4));
}

// Codes 0..31: the low 4 bits placed as PackNibbles places them, bit 4 of
// element j in bit j of the little-endian word qh.
void PackQ5(const uint8_t* L, uint8_t* qs, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < 16; ++j) {
    qs[j] = static_cast<uint8_t>((L[j] & 0x0F) | ((L[j + 16] & 0x0F) << 4));
    qh |= static_cast<uint32_t>((L[j] & 0x10u) >> 4) << j;
    qh |= static_cast<uint32_t>((L[j + 16] & 0x10u) >> 4) << (j + 16);
  }
  std::memcpy(qh_bytes, &qh, sizeof(qh));
}

void ImportanceWeights(const float* x, const float* qw, float sigma2, float* weight) {
  for (int j = 0; j < 32; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

// q4_0 and q5_0 with importance: make_qx_quants' symmetric fit, codes
// -8..7 (-16..15) stored + 8 (+ 16) as the search left them, no requantizing.
void WeightedQ4_0(const float* x, const float* qw, float sigma2, uint8_t* out,
                  uint64_t& clipped) {
  float weight[32];
  int8_t L[32];
  ImportanceWeights(x, qw, sigma2, weight);
  const float d = MakeQxQuants(32, 8, x, weight, L, &clipped);
  StoreQ4_0(d, reinterpret_cast<const uint8_t*>(L), out);
}

void WeightedQ5_0(const float* x, const float* qw, float sigma2, uint8_t* out,
                  uint64_t& clipped) {
  float weight[32];
  int8_t L[32];
  ImportanceWeights(x, qw, sigma2, weight);
  const float d = MakeQxQuants(32, 16, x, weight, L, &clipped);
  StoreQ5_0(d, reinterpret_cast<const uint8_t*>(L), out);
}

// q4_1 and q5_1 with importance: make_qkx3_quants' scale and minimum (37
// trials from nmax - 0.9 in steps of 0.05), m = the fitted minimum itself.
void WeightedQ4_1(const float* x, const float* qw, float sigma2, uint8_t* out,
                  uint64_t& clipped) {
  float weight[32];
  uint8_t L[32], Laux[32];
  float min;
  ImportanceWeights(x, qw, sigma2, weight);
  const float d =
      MakeQkx2Quants(32, 15, x, weight, L, &min, Laux, -0.9f, 0.05f, 36, false, &clipped);
  StoreQ4_1(d, min, L, out);
}

void WeightedQ5_1(const float* x, const float* qw, float sigma2, uint8_t* out,
                  uint64_t& clipped) {
  float weight[32];
  uint8_t L[32], Laux[32];
  float min;
  ImportanceWeights(x, qw, sigma2, weight);
  const float d =
      MakeQkx2Quants(32, 31, x, weight, L, &min, Laux, -0.9f, 0.05f, 36, false, &clipped);
  StoreQ5_1(d, min, L, out);
}

}  // namespace

// quantize_row_q4_0_impl .. q5_1_impl weigh element j of a row by
// qw[j] * sqrtf(sigma2 + x[j]^2), sigma2 the mean square of the whole row
// (the k-quants and i-quants take their own super-block's), summed in row
// order.
float RowMeanSquare(const float* x, size_t n) {
  float sum_x2 = 0;
  for (size_t j = 0; j < n; ++j) sum_x2 += x[j] * x[j];
  return sum_x2 / static_cast<float>(n);
}

void StoreQ4_0(float d, const uint8_t* codes, uint8_t* out) {
  BlockQ4_0 b;
  b.d = ToHalf(d);
  PackNibbles(codes, b.qs);
  StoreBlock(b, out);
}

void StoreQ5_0(float d, const uint8_t* codes, uint8_t* out) {
  BlockQ5_0 b;
  b.d = ToHalf(d);
  PackQ5(codes, b.qs, b.qh);
  StoreBlock(b, out);
}

void StoreQ4_1(float d, float neg_min, const uint8_t* codes, uint8_t* out) {
  BlockQ4_1 b;
  b.d = ToHalf(d);
  b.m = ToHalf(-neg_min);
  PackNibbles(codes, b.qs);
  StoreBlock(b, out);
}

void StoreQ5_1(float d, float neg_min, const uint8_t* codes, uint8_t* out) {
  BlockQ5_1 b;
  b.d = ToHalf(d);
  b.m = ToHalf(-neg_min);
  PackQ5(codes, b.qs, b.qh);
  StoreBlock(b, out);
}

bool EncodeLegacyRow(Type type, const float* x, const float* qw, size_t n, uint8_t* out,
                     uint64_t& clipped) {
  struct Weighted {
    Type type;
    void (*encode)(const float* x, const float* qw, float sigma2, uint8_t* out, uint64_t& clipped);
    size_t bytes;
  };
  static constexpr Weighted kWeighted[] = {{Type::kQ4_0, WeightedQ4_0, sizeof(BlockQ4_0)},
                                           {Type::kQ4_1, WeightedQ4_1, sizeof(BlockQ4_1)},
                                           {Type::kQ5_0, WeightedQ5_0, sizeof(BlockQ5_0)},
                                           {Type::kQ5_1, WeightedQ5_1, sizeof(BlockQ5_1)}};
  for (const Weighted& w : kWeighted) {
    if (w.type != type) continue;
    const float sigma2 = RowMeanSquare(x, n);
    for (size_t b = 0; b < n / 32; ++b) {
      w.encode(x + 32 * b, qw + 32 * b, sigma2, out + w.bytes * b, clipped);
    }
    return true;
  }
  return false;
}

// Each block encoder with importance is ggml's quantize_<type> of a one-block
// row (sigma2 over these 32 elements); Encode goes through EncodeLegacyRow.

// The symmetric types, q4_0 and q5_0 (half = 8, 16): d = max / -half;
// q = MIN(2 half - 1, (int8_t)(x / d + half + 0.5)); `pack` stores the codes.
template <class Block, class Pack>
void EncodeSymmetric(const float* x, int half, uint8_t* out, uint64_t& clipped, Pack pack) {
  Block b;
  const float d = SignedMax(x, 32) / static_cast<float>(-half);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = ToHalf(d);
  uint8_t L[32];
  for (int j = 0; j < 32; ++j) {
    L[j] = TruncMin(x[j] * id + (static_cast<float>(half) + 0.5f), 2 * half - 1, clipped);
  }
  pack(L, b);
  StoreBlock(b, out);
}

// The types with a minimum, q4_1 and q5_1 (top = 15, 31): d = (max - min) /
// top, m = min; q = code((x - min) / d + 0.5), `code` clamping or not.
template <class Block, class Code, class Pack>
void EncodeWithMin(const float* x, int top, uint8_t* out, uint64_t& clipped, Code code,
                   Pack pack) {
  Block b;
  float min, max;
  MinMax(x, 32, min, max);
  const float d = (max - min) / static_cast<float>(top);
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  b.d = ToHalf(d);
  b.m = ToHalf(min);
  uint8_t L[32];
  for (int j = 0; j < 32; ++j) L[j] = code((x[j] - min) * id + 0.5f, clipped);
  pack(L, b);
  StoreBlock(b, out);
}

// d = max / -8; q = MIN(15, (int8_t)(x / d + 8.5)).
void EncodeQ4_0(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  if (qw != nullptr) {
    WeightedQ4_0(x, qw, RowMeanSquare(x, 32), out, clipped);
    return;
  }
  EncodeSymmetric<BlockQ4_0>(x, 8, out, clipped,
                             [](const uint8_t* L, BlockQ4_0& b) { PackNibbles(L, b.qs); });
}

// d = (max - min) / 15, m = min; q = MIN(15, (int8_t)((x - min) / d + 0.5)).
void EncodeQ4_1(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  if (qw != nullptr) {
    WeightedQ4_1(x, qw, RowMeanSquare(x, 32), out, clipped);
    return;
  }
  EncodeWithMin<BlockQ4_1>(
      x, 15, out, clipped, [](float v, uint64_t& c) { return TruncMin(v, 15, c); },
      [](const uint8_t* L, BlockQ4_1& b) { PackNibbles(L, b.qs); });
}

// d = max / -16; q = MIN(31, (int8_t)(x / d + 16.5)).
void EncodeQ5_0(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  if (qw != nullptr) {
    WeightedQ5_0(x, qw, RowMeanSquare(x, 32), out, clipped);
    return;
  }
  EncodeSymmetric<BlockQ5_0>(x, 16, out, clipped,
                             [](const uint8_t* L, BlockQ5_0& b) { PackQ5(L, b.qs, b.qh); });
}

// d = (max - min) / 31, m = min; q = (uint8_t)((x - min) / d + 0.5), no
// clamp (the largest element lands on 31).
void EncodeQ5_1(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  if (qw != nullptr) {
    WeightedQ5_1(x, qw, RowMeanSquare(x, 32), out, clipped);
    return;
  }
  EncodeWithMin<BlockQ5_1>(
      x, 31, out, clipped,
      [](float v, uint64_t& c) {
        const auto q = static_cast<uint8_t>(TruncToInt(v));
        c += q > 31;
        return q;
      },
      [](const uint8_t* L, BlockQ5_1& b) { PackQ5(L, b.qs, b.qh); });
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
