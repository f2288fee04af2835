// ggml's codebook types: iq4_nl and iq4_xs (a 16-value non-uniform grid,
// quantize_iq4_nl / quantize_iq4_xs with ntry = 7, weighing each element by
// x^2 or, with importance, by qw * sqrtf(sigma2 + x^2)) and ggml's own MXFP4
// and NVFP4 (e2m1 codes chosen by best_index_mxfp4, whose strict `<` keeps
// the first of two equally near codes: ties go to the smaller magnitude,
// where OCP's conversion rounds to even; both ignore importance).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "codecs/ggml_blocks.h"
#include "codecs/ggml_iq4.h"
#include "codecs/ggml_ops.h"
#include "codecs/ggml_scales.h"

namespace lowp::ggml::internal {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // GROUP_MAX_EPS
constexpr int kIq4Tries = 7;
static_assert(kIq4Candidates == 2 * kIq4Tries + 2);

void PackNibbles(const uint8_t* L, int n, uint8_t* q4) {
  for (int i = 0; i < n / 32; ++i) {
    for (int j = 0; j < 16; ++j) {
      q4[16 * i + j] = static_cast<uint8_t>(L[32 * i + j] | (L[32 * i + 16 + j] << 4));
    }
  }
}

// best_index_mxfp4: the first code of least |value * e - x|.
uint8_t BestFp4(float x, float e, uint64_t& clipped) {
  int best_index = 0;
  float best_err = std::fabs(kFp4Values[0] * e - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(kFp4Values[i] * e - x);
    if (err < best_err) {
      best_index = i;
      best_err = err;
    }
  }
  clipped += std::fabs(x) > 12 * e;
  return static_cast<uint8_t>(best_index);
}

}  // namespace

int Iq4BestIndex(float x, uint64_t* clipped) {
  const int8_t* val = kIq4Values;
  if (x <= val[0]) {
    if (clipped != nullptr && x < val[0]) ++*clipped;
    return 0;
  }
  if (x >= val[15]) {
    if (clipped != nullptr && x > val[15]) ++*clipped;
    return 15;
  }
  int ml = 0, mu = 15;
  while (mu - ml > 1) {
    const int mav = (ml + mu) / 2;
    if (x < val[mav]) {
      mu = mav;
    } else {
      ml = mav;
    }
  }
  return x - val[mu - 1] < val[mu] - x ? mu - 1 : mu;
}

// sigma2 is twice the super-block's mean square (ggml's `sigma2 *=
// 2.f/super_block_size` after summing, in that order: 2.f / n is exact for
// n = 32 and 256).
void Iq4Weights(const float* x, const float* qw, int n, float* weight) {
  if (qw == nullptr) {
    for (int j = 0; j < n; ++j) weight[j] = x[j] * x[j];
    return;
  }
  float sigma2 = 0;
  for (int j = 0; j < n; ++j) sigma2 += x[j] * x[j];
  sigma2 *= 2.f / n;
  for (int j = 0; j < n; ++j) weight[j] = qw[j] * std::sqrt(sigma2 + x[j] * x[j]);
}

// ggml's first fit uses d = -max / values[0] and id = 1 / d, then
// id = (itry + values[0]) / max for itry = -7..7.
bool Iq4Candidates(const float* xb, float* ids, float* max) {
  float amax;
  *max = SignedMax(xb, kIq4Group, &amax);
  if (amax < kGroupMaxEps) return false;
  const int8_t* values = kIq4Values;
  const float d = -*max / values[0];
  ids[0] = 1 / d;
  for (int itry = -kIq4Tries; itry <= kIq4Tries; ++itry) {
    ids[1 + kIq4Tries + itry] = (itry + values[0]) / *max;
  }
  return true;
}

void Iq4Fit(const float* xb, const float* weight, float id, float* sumqx, float* sumq2) {
  float sx = 0, s2 = 0;
  for (int j = 0; j < kIq4Group; ++j) {
    const float q = kIq4Values[Iq4BestIndex(id * xb[j], nullptr)];
    const float w = weight[j];
    sx += w * q * xb[j];
    s2 += w * q * q;
  }
  *sumqx = sx;
  *sumq2 = s2;
}

// The first fit sets the scale (0 when its sumq2 is not positive); each try
// replaces it when its fit is strictly better.
float Iq4ChooseScale(const float* sumqx, const float* sumq2) {
  float d = sumq2[0] > 0 ? sumqx[0] / sumq2[0] : 0.f;
  float best = d * sumqx[0];
  for (int k = 1; k < kIq4Candidates; ++k) {
    if (sumq2[k] > 0 && sumqx[k] * sumqx[k] > best * sumq2[k]) {
      d = sumqx[k] / sumq2[k];
      best = d * sumqx[k];
    }
  }
  return d;
}

// Returns 0 for a group of zeros; with importance also 0 when every weight
// is 0.
float Iq4GroupScale(const float* xb, const float* weight) {
  float ids[kIq4Candidates], sumqx[kIq4Candidates], sumq2[kIq4Candidates], max;
  if (!Iq4Candidates(xb, ids, &max)) return 0;
  for (int k = 0; k < kIq4Candidates; ++k) Iq4Fit(xb, weight, ids[k], &sumqx[k], &sumq2[k]);
  return Iq4ChooseScale(sumqx, sumq2);
}

void PackIq4Nl(const float* x, float scale, uint8_t* out, uint64_t& clipped) {
  BlockIq4Nl b;
  uint8_t L[kIq4Group];
  b.d = ToHalf(scale);
  const float id = scale ? 1 / scale : 0;
  for (int j = 0; j < kIq4Group; ++j) L[j] = static_cast<uint8_t>(Iq4BestIndex(id * x[j], &clipped));
  PackNibbles(L, kIq4Group, b.qs);
  StoreBlock(b, out);
}

void PackIq4Xs(const float* x, const float* scales, uint8_t* out, uint64_t& clipped) {
  BlockIq4Xs b;
  uint8_t L[kSuperBlock];
  float max_scale = 0, amax_scale = 0;
  for (int ib = 0; ib < 8; ++ib) {
    const float abs_d = std::fabs(scales[ib]);
    if (abs_d > amax_scale) {
      amax_scale = abs_d;
      max_scale = scales[ib];
    }
  }
  b.scales_h = 0;
  std::memset(b.scales_l, 0, sizeof(b.scales_l));
  const float d = -max_scale / 32;
  b.d = ToHalf(d);
  const float id = d ? 1 / d : 0.f;
  for (int ib = 0; ib < 8; ++ib) {
    int l = NearestInt(id * scales[ib]);
    l = l < -32 ? -32 : l > 31 ? 31 : l;
    const float dl = d * l;
    const float idl = dl ? 1 / dl : 0.f;
    for (int j = 0; j < kIq4Group; ++j) {
      L[32 * ib + j] = static_cast<uint8_t>(Iq4BestIndex(idl * x[32 * ib + j], &clipped));
    }
    l += 32;
    const uint8_t l_l = l & 0xf;
    const uint8_t l_h = static_cast<uint8_t>(l >> 4);
    if (ib % 2 == 0) {
      b.scales_l[ib / 2] = l_l;
    } else {
      b.scales_l[ib / 2] = static_cast<uint8_t>(b.scales_l[ib / 2] | (l_l << 4));
    }
    b.scales_h = static_cast<uint16_t>(b.scales_h | (l_h << 2 * (ib % 8)));
  }
  PackNibbles(L, kSuperBlock, b.qs);
  StoreBlock(b, out);
}

void EncodeIq4Nl(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  float weight[kIq4Group];
  Iq4Weights(x, qw, kIq4Group, weight);
  PackIq4Nl(x, Iq4GroupScale(x, weight), out, clipped);
}

// Each group's scale is searched alone; the super-block's scale and the
// groups' 6-bit multiples of it come from them (PackIq4Xs).
void EncodeIq4Xs(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  float scales[8];
  float weight[kSuperBlock];
  Iq4Weights(x, qw, kSuperBlock, weight);
  for (int ib = 0; ib < 8; ++ib) {
    scales[ib] = Iq4GroupScale(x + kIq4Group * ib, weight + kIq4Group * ib);
  }
  PackIq4Xs(x, scales, out, clipped);
}

// e = floor(log2(amax)) - 2 + 127 (0 for a block of zeros); codes against
// the half scale 2^(e - 128) with kFp4Values doubled.
void EncodeMxfp4(const float* x, const float* /*qw: ggml ignores it*/, uint8_t* out, uint64_t& clipped) {
  BlockMxfp4 b;
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) {
    if (amax < std::fabs(x[j])) amax = std::fabs(x[j]);
  }
  b.e = amax > 0.0f
            ? static_cast<uint8_t>(TruncToInt(std::floor(std::log2(amax)) - 2 + 127))
            : 0;
  const float d = E8m0Half(b.e);
  for (int j = 0; j < 16; ++j) {
    const uint8_t lo = BestFp4(x[j], d, clipped);
    const uint8_t hi = BestFp4(x[j + 16], d, clipped);
    b.qs[j] = static_cast<uint8_t>(lo | (hi << 4));
  }
  StoreBlock(b, out);
}

// Each 16-element sub-block: scale = ue4m3(amax / 6), codes as MXFP4's.
void EncodeNvfp4(const float* x, const float* /*qw: ggml ignores it*/, uint8_t* out, uint64_t& clipped) {
  BlockNvfp4 b;
  for (int s = 0; s < 4; ++s) {
    const float* xb = x + 16 * s;
    float amax = 0.0f;
    for (int j = 0; j < 16; ++j) {
      if (amax < std::fabs(xb[j])) amax = std::fabs(xb[j]);
    }
    b.d[s] = ToUe4m3(amax / 6.0f);
    const float d = Ue4m3Half(b.d[s]);
    for (int j = 0; j < 8; ++j) {
      const uint8_t lo = BestFp4(xb[j], d, clipped);
      const uint8_t hi = BestFp4(xb[j + 8], d, clipped);
      b.qs[8 * s + j] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
  StoreBlock(b, out);
}

void DecodeIq4Nl(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockIq4Nl>(in);
  const float d = Half(b.d);
  for (int j = 0; j < 16; ++j) {
    y[j] = d * kIq4Values[b.qs[j] & 0xf];
    y[j + 16] = d * kIq4Values[b.qs[j] >> 4];
  }
}

void DecodeIq4Xs(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockIq4Xs>(in);
  const float d = Half(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const int ls = ((b.scales_l[ib / 2] >> 4 * (ib % 2)) & 0xf) | (((b.scales_h >> 2 * ib) & 3) << 4);
    const float dl = d * (ls - 32);
    const uint8_t* qs = b.qs + 16 * ib;
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * kIq4Values[qs[j] & 0xf];
      y[j + 16] = dl * kIq4Values[qs[j] >> 4];
    }
    y += 32;
  }
}

void DecodeMxfp4(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockMxfp4>(in);
  const float d = E8m0Half(b.e);
  for (int j = 0; j < 16; ++j) {
    y[j] = kFp4Values[b.qs[j] & 0x0F] * d;
    y[j + 16] = kFp4Values[b.qs[j] >> 4] * d;
  }
}

void DecodeNvfp4(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockNvfp4>(in);
  for (int s = 0; s < 4; ++s) {
    const float d = Ue4m3Half(b.d[s]);
    for (int j = 0; j < 8; ++j) {
      y[16 * s + j] = kFp4Values[b.qs[8 * s + j] & 0x0F] * d;
      y[16 * s + j + 8] = kFp4Values[b.qs[8 * s + j] >> 4] * d;
    }
  }
}

}  // namespace lowp::ggml::internal
