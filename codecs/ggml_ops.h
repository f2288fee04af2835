// Internal: the scalar operations every ggml codec shares, each the same
// float32 operation ggml performs, and block (de)serialization.
#ifndef LOWP_CODECS_GGML_OPS_H_
#define LOWP_CODECS_GGML_OPS_H_

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "codecs/ggml.h"

namespace lowp::ggml::internal {

// ggml's nearest_int: adds 1.5 * 2^23 and reads the integer out of the
// mantissa. Round-half-even for |x| <= 2^22; beyond that it gives what ggml's
// trick gives (ggml only asserts the bound in debug builds).
inline int NearestInt(float x) {
  const float shifted = x + 12582912.f;
  const int32_t bits = std::bit_cast<int32_t>(shifted);
  return (bits & 0x007fffff) - 0x00400000;
}

// ggml's (intN_t) / (uintN_t) casts of a float: truncation toward zero, as
// x86 computes it for values beyond the target (cvttss2si then the low bits).
inline int32_t TruncToInt(float x) {
  if (!(x > -2147483648.0f && x < 2147483648.0f)) return INT32_MIN;  // cvttss2si's indefinite
  return static_cast<int32_t>(x);
}

// The signed element of largest magnitude, the first one on ties (ggml's
// `if (amax < fabsf(v)) { amax = fabsf(v); max = v; }`), and that magnitude.
inline float SignedMax(const float* x, int n, float* amax_out = nullptr) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    const float a = std::fabs(x[j]);
    if (amax < a) {
      amax = a;
      max = x[j];
    }
  }
  if (amax_out != nullptr) *amax_out = amax;
  return max;
}

// ggml's MAX: `a > b ? a : b`, b when either is NaN.
inline float Max(float a, float b) { return a > b ? a : b; }

// ksigns_iq2xs: the grid i-quants store 7 sign bits per 8 elements; the
// eighth (bit 7) makes the number of negative elements even.
inline uint8_t EvenSigns(uint32_t seven) {
  seven &= 127;
  return static_cast<uint8_t>(seven | (std::popcount(seven) & 1u) << 7);
}

template <typename Block>
Block LoadBlock(const uint8_t* bytes) {
  Block block;
  std::memcpy(&block, bytes, sizeof(Block));
  return block;
}

template <typename Block>
void StoreBlock(const Block& block, uint8_t* bytes) {
  std::memcpy(bytes, &block, sizeof(Block));
}

inline float Half(uint16_t h) { return Fp16ToFp32(h); }
inline uint16_t ToHalf(float x) { return Fp32ToFp16(x); }

// The codecs of one family: x and y are one block's elements.
void EncodeQ4_0(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeQ4_1(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeQ5_0(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeQ5_1(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeQ8_0(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
// ggml's q4_0, q4_1, q5_0 and q5_1 with importance weights qw (not null):
// their weights take the mean square of the whole row, which a block encoder
// does not see, so Encode hands them the row. Encodes the n elements (whole
// blocks) of one row and returns true, or returns false for any other type.
bool EncodeLegacyRow(Type type, const float* x, const float* qw, size_t n, uint8_t* out,
                     uint64_t& clipped);
void DecodeQ4_0(const uint8_t* in, float* y);
void DecodeQ4_1(const uint8_t* in, float* y);
void DecodeQ5_0(const uint8_t* in, float* y);
void DecodeQ5_1(const uint8_t* in, float* y);
void DecodeQ8_0(const uint8_t* in, float* y);

void EncodeQ2_K(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeQ3_K(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeQ4_K(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeQ5_K(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeQ6_K(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void DecodeQ2_K(const uint8_t* in, float* y);
void DecodeQ3_K(const uint8_t* in, float* y);
void DecodeQ4_K(const uint8_t* in, float* y);
void DecodeQ5_K(const uint8_t* in, float* y);
void DecodeQ6_K(const uint8_t* in, float* y);

void EncodeIq4Nl(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeIq4Xs(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeMxfp4(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeNvfp4(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void DecodeIq4Nl(const uint8_t* in, float* y);
void DecodeIq4Xs(const uint8_t* in, float* y);
void DecodeMxfp4(const uint8_t* in, float* y);
void DecodeNvfp4(const uint8_t* in, float* y);

// The grid i-quants (ggml_iq2.cc, ggml_iq1.cc): qw may be null only for
// iq2_s and iq1_m.
void EncodeIq2Xxs(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeIq2Xs(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeIq2S(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeIq1S(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeIq1M(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void DecodeIq2Xxs(const uint8_t* in, float* y);
void DecodeIq2Xs(const uint8_t* in, float* y);
void DecodeIq2S(const uint8_t* in, float* y);
void DecodeIq1S(const uint8_t* in, float* y);
void DecodeIq1M(const uint8_t* in, float* y);
// ggml_iq3.cc: the 3-bit grid i-quants.
void EncodeIq3Xxs(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void EncodeIq3S(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
void DecodeIq3Xxs(const uint8_t* in, float* y);
void DecodeIq3S(const uint8_t* in, float* y);

void DecodeTq1_0(const uint8_t* in, float* y);
void DecodeTq2_0(const uint8_t* in, float* y);
void DecodeQ1_0(const uint8_t* in, float* y);
void DecodeQ2_0(const uint8_t* in, float* y);

}  // namespace lowp::ggml::internal

#endif  // LOWP_CODECS_GGML_OPS_H_
