// ggml's k-quants: 256-element super-blocks of 16 or 32-element groups whose
// scales are themselves quantized (quantize_row_q{2..6}_K_ref and
// dequantize_row_q{2..6}_K of ggml/src/ggml-quants.c, with their helpers
// make_qkx2_quants, make_q3_quants and make_qx_quants). The searches are
// ggml's, float operation for float operation: sums accumulate in the same
// order, products associate as written there (w * x * l is (w * x) * l).
#include <cmath>
#include <cstdint>
#include <cstring>

#include "codecs/ggml_blocks.h"
#include "codecs/ggml_ops.h"

namespace lowp::ggml::internal {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // GROUP_MAX_EPS

int Clamp(int v, int lo, int hi, uint64_t& clipped) {
  if (v < lo) {
    ++clipped;
    return lo;
  }
  if (v > hi) {
    ++clipped;
    return hi;
  }
  return v;
}

int Clamp(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

// make_qkx2_quants: the scale and minimum of an asymmetric n-element group
// with codes 0..nmax, chosen among nstep + 1 trial scales by the weighted
// error (absolute if use_mad, else squared). Returns the scale; *the_min is
// the negated minimum (>= 0).
float MakeQkx2Quants(int n, int nmax, const float* x, const float* weights, uint8_t* L,
                     float* the_min, uint8_t* Laux, float rmin, float rdelta, int nstep,
                     bool use_mad) {
  float min = x[0];
  float max = x[0];
  float sum_w = weights[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    const float w = weights[i];
    sum_w += w;
    sum_x += w * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1 / iscale;
  float best_error = 0;
  for (int i = 0; i < n; ++i) {
    const int l = NearestInt(iscale * (x[i] - min));
    L[i] = static_cast<uint8_t>(Clamp(l, 0, nmax));
    float diff = scale * L[i] + min - x[i];
    diff = use_mad ? std::fabs(diff) : diff * diff;
    best_error += weights[i] * diff;
  }
  if (nstep < 1) {
    *the_min = -min;
    return scale;
  }
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + rdelta * is + nmax) / (max - min);
    float sum_l = 0, sum_l2 = 0, sum_xl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      const float w = weights[i];
      sum_l += w * l;
      sum_l2 += w * l * l;
      sum_xl += w * l * x[i];
    }
    const float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0) {
        this_min = 0;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0;
      for (int i = 0; i < n; ++i) {
        float diff = this_scale * Laux[i] + this_min - x[i];
        diff = use_mad ? std::fabs(diff) : diff * diff;
        cur_error += weights[i] * diff;
      }
      if (cur_error < best_error) {
        std::memcpy(L, Laux, static_cast<size_t>(n));
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// make_q3_quants with do_rmse: a symmetric n-element group with codes
// -nmax..nmax-1 (stored + nmax), refined by up to 5 passes that move one
// code at a time while the weighted fit improves.
float MakeQ3Quants(int n, int nmax, const float* x, int8_t* L) {
  float amax;
  const float max = SignedMax(x, n, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  const float iscale = -nmax / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < n; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * L[i];
      if (slx > 0) {
        float sl2 = suml2 - w * L[i] * L[i];
        const int new_l = Clamp(NearestInt(x[i] * sl2 / slx), -nmax, nmax - 1);
        if (new_l != L[i]) {
          slx += w * x[i] * new_l;
          sl2 += w * new_l * new_l;
          if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
            L[i] = static_cast<int8_t>(new_l);
            sumlx = slx;
            suml2 = sl2;
            ++n_changed;
          }
        }
      }
    }
    if (!n_changed) break;
  }
  for (int i = 0; i < n; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// make_qx_quants with rmse_type 1 and no importance: a symmetric group with
// codes -nmax..nmax-1, the best of 19 trial scales by the x^2-weighted fit.
float MakeQxQuants(int n, int nmax, const float* x, int8_t* L) {
  float amax;
  const float max = SignedMax(x, n, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    return 0.f;
  }
  float iscale = -nmax / max;
  float sumlx = 0;
  float suml2 = 0;
  for (int i = 0; i < n; ++i) {
    const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * l;
    suml2 += w * l * l;
  }
  float scale = suml2 ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(nmax + 0.1f * is) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < n; ++i) {
      const int l = Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1);
      const float w = x[i] * x[i];
      sumlx += w * x[i] * l;
      suml2 += w * l * l;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < n; ++i) {
        L[i] = static_cast<int8_t>(nmax + Clamp(NearestInt(iscale * x[i]), -nmax, nmax - 1));
      }
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// get_scale_min_k4: group j's 6-bit scale and minimum in q4_K/q5_K's 12 bytes.
void ScaleMinK4(int j, const uint8_t* q, uint8_t& d, uint8_t& m) {
  if (j < 4) {
    d = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    d = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
  }
}

// Packs codes 0..3 four to a byte, as q2_K and q3_K store them.
void Pack2Bits(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < kSuperBlock; j += 128) {
    for (int l = 0; l < 32; ++l) {
      qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) |
                                            (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
    }
  }
}

// q4_K and q5_K share everything but the code width (nmax 15 or 31) and
// their search's trial range: the group scales and minimums, their 6-bit
// packing, and the final codes.
void KScalesAndCodes(const float* x, int nmax, float rmin, int nstep, uint8_t* scales_out,
                     uint16_t& d_out, uint16_t& dmin_out, uint8_t* L, uint64_t& clipped) {
  uint8_t Laux[32];
  float weights[32];
  float mins[8];
  float scales[8];
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = MakeQkx2Quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin,
                               0.1f, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    uint8_t ls = static_cast<uint8_t>(NearestInt(inv_scale * scales[j]));
    uint8_t lm = static_cast<uint8_t>(NearestInt(inv_min * mins[j]));
    ls = ls < 63 ? ls : 63;
    lm = lm < 63 ? lm : 63;
    if (j < 4) {
      scales_out[j] = ls;
      scales_out[j + 4] = lm;
    } else {
      scales_out[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      scales_out[j - 4] |= static_cast<uint8_t>((ls >> 4) << 6);
      scales_out[j - 0] |= static_cast<uint8_t>((lm >> 4) << 6);
    }
  }
  d_out = ToHalf(max_scale / 63.f);
  dmin_out = ToHalf(max_min / 63.f);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    ScaleMinK4(j, scales_out, sc, m);
    const float d = Half(d_out) * sc;
    if (!d) continue;
    const float dm = Half(dmin_out) * m;
    for (int ii = 0; ii < 32; ++ii) {
      const int l = NearestInt((x[32 * j + ii] + dm) / d);
      L[32 * j + ii] = static_cast<uint8_t>(Clamp(l, 0, nmax, clipped));
    }
  }
}

}  // namespace

void EncodeQ2_K(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  BlockQ2_K b;
  uint8_t L[kSuperBlock];
  uint8_t Laux[16];
  float weights[16];
  float mins[16];
  float scales[16];
  const float q4scale = 15.f;
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < 16; ++j) {
    for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
    scales[j] = MakeQkx2Quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f,
                               0.1f, 15, true);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  if (max_scale > 0) {
    const float iscale = q4scale / max_scale;
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(NearestInt(iscale * scales[j]));
    b.d = ToHalf(max_scale / q4scale);
  } else {
    for (int j = 0; j < 16; ++j) b.scales[j] = 0;
    b.d = ToHalf(0.f);
  }
  if (max_min > 0) {
    const float iscale = q4scale / max_min;
    for (int j = 0; j < 16; ++j) {
      const int l = NearestInt(iscale * mins[j]);
      b.scales[j] = static_cast<uint8_t>(b.scales[j] | (l << 4));
    }
    b.dmin = ToHalf(max_min / q4scale);
  } else {
    b.dmin = ToHalf(0.f);
  }
  for (int j = 0; j < 16; ++j) {
    const float d = Half(b.d) * (b.scales[j] & 0xF);
    if (!d) continue;
    const float dm = Half(b.dmin) * (b.scales[j] >> 4);
    for (int ii = 0; ii < 16; ++ii) {
      const int l = NearestInt((x[16 * j + ii] + dm) / d);
      L[16 * j + ii] = static_cast<uint8_t>(Clamp(l, 0, 3, clipped));
    }
  }
  Pack2Bits(L, b.qs);
  StoreBlock(b, out);
}

void EncodeQ3_K(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  BlockQ3_K b;
  int8_t L[kSuperBlock];
  float scales[16];
  float max_scale = 0;
  float amax = 0;
  for (int j = 0; j < 16; ++j) {
    scales[j] = MakeQ3Quants(16, 4, x + 16 * j, L + 16 * j);
    const float scale = std::fabs(scales[j]);
    if (scale > amax) {
      amax = scale;
      max_scale = scales[j];
    }
  }
  std::memset(b.scales, 0, sizeof(b.scales));
  if (max_scale) {
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < 16; ++j) {
      int8_t l = static_cast<int8_t>(NearestInt(iscale * scales[j]));
      l = static_cast<int8_t>(Clamp(l, -32, 31) + 32);
      if (j < 8) {
        b.scales[j] = l & 0xF;
      } else {
        b.scales[j - 8] = static_cast<uint8_t>(b.scales[j - 8] | ((l & 0xF) << 4));
      }
      l = static_cast<int8_t>(l >> 4);
      b.scales[j % 4 + 8] = static_cast<uint8_t>(b.scales[j % 4 + 8] | (l << (2 * (j / 4))));
    }
    b.d = ToHalf(1 / iscale);
  } else {
    b.d = ToHalf(0.f);
  }
  for (int j = 0; j < 16; ++j) {
    int8_t sc = static_cast<int8_t>(j < 8 ? b.scales[j] & 0xF : b.scales[j - 8] >> 4);
    sc = static_cast<int8_t>((sc | (((b.scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
    const float d = Half(b.d) * sc;
    if (!d) continue;
    for (int ii = 0; ii < 16; ++ii) {
      const int l = NearestInt(x[16 * j + ii] / d);
      L[16 * j + ii] = static_cast<int8_t>(Clamp(l, -4, 3, clipped) + 4);
    }
  }
  std::memset(b.hmask, 0, sizeof(b.hmask));
  int m = 0;
  uint8_t hm = 1;
  for (int j = 0; j < kSuperBlock; ++j) {
    if (L[j] > 3) {
      b.hmask[m] |= hm;
      L[j] = static_cast<int8_t>(L[j] - 4);
    }
    if (++m == kSuperBlock / 8) {
      m = 0;
      hm = static_cast<uint8_t>(hm << 1);
    }
  }
  uint8_t U[kSuperBlock];
  for (int j = 0; j < kSuperBlock; ++j) U[j] = static_cast<uint8_t>(L[j]);
  Pack2Bits(U, b.qs);
  StoreBlock(b, out);
}

void EncodeQ4_K(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  BlockQ4_K b;
  uint8_t L[kSuperBlock];
  KScalesAndCodes(x, 15, -1.f, 20, b.scales, b.d, b.dmin, L, clipped);
  uint8_t* q = b.qs;
  for (int j = 0; j < kSuperBlock; j += 64) {
    for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    q += 32;
  }
  StoreBlock(b, out);
}

void EncodeQ5_K(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  BlockQ5_K b;
  uint8_t L[kSuperBlock];
  KScalesAndCodes(x, 31, -0.5f, 15, b.scales, b.d, b.dmin, L, clipped);
  std::memset(b.qh, 0, sizeof(b.qh));
  uint8_t* ql = b.qs;
  uint8_t m1 = 1, m2 = 2;
  for (int n = 0; n < kSuperBlock; n += 64) {
    for (int j = 0; j < 32; ++j) {
      int l1 = L[n + j];
      if (l1 > 15) {
        l1 -= 16;
        b.qh[j] |= m1;
      }
      int l2 = L[n + j + 32];
      if (l2 > 15) {
        l2 -= 16;
        b.qh[j] |= m2;
      }
      ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
    }
    m1 = static_cast<uint8_t>(m1 << 2);
    m2 = static_cast<uint8_t>(m2 << 2);
    ql += 32;
  }
  StoreBlock(b, out);
}

void EncodeQ6_K(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  BlockQ6_K b;
  int8_t L[kSuperBlock];
  float scales[16];
  float max_scale = 0;
  float max_abs_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    const float scale = MakeQxQuants(16, 32, x + 16 * ib, L + 16 * ib);
    scales[ib] = scale;
    const float abs_scale = std::fabs(scale);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scale;
    }
  }
  if (max_abs_scale < kGroupMaxEps) {
    std::memset(&b, 0, sizeof(b));
    b.d = ToHalf(0.f);
    StoreBlock(b, out);
    return;
  }
  const float iscale = -128.f / max_scale;
  b.d = ToHalf(1 / iscale);
  for (int ib = 0; ib < 16; ++ib) {
    const int s = NearestInt(iscale * scales[ib]);
    b.scales[ib] = static_cast<int8_t>(s < 127 ? s : 127);
  }
  for (int j = 0; j < 16; ++j) {
    const float d = Half(b.d) * b.scales[j];
    if (!d) continue;
    for (int ii = 0; ii < 16; ++ii) {
      const int l = NearestInt(x[16 * j + ii] / d);
      L[16 * j + ii] = static_cast<int8_t>(Clamp(l, -32, 31, clipped) + 32);
    }
  }
  uint8_t* ql = b.ql;
  uint8_t* qh = b.qh;
  for (int j = 0; j < kSuperBlock; j += 128) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t q1 = L[j + l + 0] & 0xF;
      const uint8_t q2 = L[j + l + 32] & 0xF;
      const uint8_t q3 = L[j + l + 64] & 0xF;
      const uint8_t q4 = L[j + l + 96] & 0xF;
      ql[l + 0] = static_cast<uint8_t>(q1 | (q3 << 4));
      ql[l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
      qh[l] = static_cast<uint8_t>((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) |
                                   ((L[j + l + 64] >> 4) << 4) | ((L[j + l + 96] >> 4) << 6));
    }
    ql += 64;
    qh += 32;
  }
  StoreBlock(b, out);
}

void DecodeQ2_K(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockQ2_K>(in);
  const float d = Half(b.d);
  const float min = Half(b.dmin);
  const uint8_t* q = b.qs;
  int is = 0;
  for (int n = 0; n < kSuperBlock; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        const uint8_t sc = b.scales[is++];
        const float dl = d * (sc & 0xF);
        const float ml = min * (sc >> 4);
        for (int l = 0; l < 16; ++l) {
          const float v = dl * ((q[l + 16 * half] >> shift) & 3);
          *y++ = v - ml;
        }
      }
      shift += 2;
    }
    q += 32;
  }
}

void DecodeQ3_K(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockQ3_K>(in);
  const float d_all = Half(b.d);
  int8_t scales[16];
  for (int g = 0; g < 16; ++g) {
    const int low = g < 8 ? b.scales[g] & 0xF : b.scales[g - 8] >> 4;
    const int high = (b.scales[8 + g % 4] >> (2 * (g / 4))) & 3;
    scales[g] = static_cast<int8_t>(low | (high << 4));
  }
  const uint8_t* q = b.qs;
  uint8_t m = 1;
  int is = 0;
  for (int n = 0; n < kSuperBlock; n += 128) {
    int shift = 0;
    for (int j = 0; j < 4; ++j) {
      for (int half = 0; half < 2; ++half) {
        const float dl = d_all * (scales[is++] - 32);
        for (int l = 16 * half; l < 16 * half + 16; ++l) {
          const int v = ((q[l] >> shift) & 3) - ((b.hmask[l] & m) ? 0 : 4);
          *y++ = dl * v;
        }
      }
      shift += 2;
      m = static_cast<uint8_t>(m << 1);
    }
    q += 32;
  }
}

void DecodeQ4_K(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockQ4_K>(in);
  const float d = Half(b.d);
  const float min = Half(b.dmin);
  const uint8_t* q = b.qs;
  int is = 0;
  for (int j = 0; j < kSuperBlock; j += 64) {
    uint8_t sc, m;
    ScaleMinK4(is + 0, b.scales, sc, m);
    const float d1 = d * sc, m1 = min * m;
    ScaleMinK4(is + 1, b.scales, sc, m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) {
      const float v = d1 * (q[l] & 0xF);
      *y++ = v - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const float v = d2 * (q[l] >> 4);
      *y++ = v - m2;
    }
    q += 32;
    is += 2;
  }
}

void DecodeQ5_K(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockQ5_K>(in);
  const float d = Half(b.d);
  const float min = Half(b.dmin);
  const uint8_t* ql = b.qs;
  int is = 0;
  uint8_t u1 = 1, u2 = 2;
  for (int j = 0; j < kSuperBlock; j += 64) {
    uint8_t sc, m;
    ScaleMinK4(is + 0, b.scales, sc, m);
    const float d1 = d * sc, m1 = min * m;
    ScaleMinK4(is + 1, b.scales, sc, m);
    const float d2 = d * sc, m2 = min * m;
    for (int l = 0; l < 32; ++l) {
      const float v = d1 * ((ql[l] & 0xF) + (b.qh[l] & u1 ? 16 : 0));
      *y++ = v - m1;
    }
    for (int l = 0; l < 32; ++l) {
      const float v = d2 * ((ql[l] >> 4) + (b.qh[l] & u2 ? 16 : 0));
      *y++ = v - m2;
    }
    ql += 32;
    is += 2;
    u1 = static_cast<uint8_t>(u1 << 2);
    u2 = static_cast<uint8_t>(u2 << 2);
  }
}

void DecodeQ6_K(const uint8_t* in, float* y) {
  const auto b = LoadBlock<BlockQ6_K>(in);
  const float d = Half(b.d);
  const uint8_t* ql = b.ql;
  const uint8_t* qh = b.qh;
  const int8_t* sc = b.scales;
  for (int n = 0; n < kSuperBlock; n += 128) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l + 0] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l + 0] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l + 0] = d * sc[is + 0] * q1;
      y[l + 32] = d * sc[is + 2] * q2;
      y[l + 64] = d * sc[is + 4] * q3;
      y[l + 96] = d * sc[is + 6] * q4;
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

}  // namespace lowp::ggml::internal
