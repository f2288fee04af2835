// ggml's k-quants: 256-element super-blocks of 16 or 32-element groups whose
// scales are themselves quantized (quantize_row_q{2..6}_K_ref, with
// importance weights quantize_row_q{2..6}_K_impl, and dequantize_row_q{2..6}_K
// of ggml/src/ggml-quants.c). Each encoder finds its group scales (the ref's
// way or the impl's), then requantizes every group against the scales as
// stored and packs the codes; the searches themselves are in
// ggml_kquants_search.cc. Float operation for float operation ggml's: sums
// accumulate in the same order, products associate as written there.
#include <cmath>
#include <cstdint>
#include <cstring>

#include "codecs/ggml_blocks.h"
#include "codecs/ggml_kquants_parts.h"
#include "codecs/ggml_kquants_search.h"
#include "codecs/ggml_ops.h"

namespace lowp::ggml::internal {
namespace {

constexpr float kGroupMaxEps = 1e-15f;  // GROUP_MAX_EPS

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

// A requantization's shape, its scales zero.
KRequant RequantOf(int group, int groups, int lo, int hi, bool with_min) {
  KRequant r = {};
  r.group = group;
  r.groups = groups;
  r.lo = lo;
  r.hi = hi;
  r.with_min = with_min;
  return r;
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

// The k-quants' importance (quantize_row_q{2..5}_K_impl): element l weighs
// qw[l] * sqrtf(sigma2 + x[l]^2), sigma2 from the super-block's sum of
// squares.
void ImportanceWeights(const float* x, const float* qw, float sigma2, int n, float* weights) {
  for (int l = 0; l < n; ++l) weights[l] = qw[l] * std::sqrt(sigma2 + x[l] * x[l]);
}

float Sum(const float* w, int n) {
  float sum = 0;
  for (int l = 0; l < n; ++l) sum += w[l];
  return sum;
}

// quantize_row_q2_K_ref's scales: the 16 scales and the 16 minimums each on
// a 4-bit grid up to their largest.
void Q2KGridScales(const KGroupFits& f, BlockQ2_K& b) {
  const float q4scale = 15.f;
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < 16; ++j) {
    if (f.scales[j] > max_scale) max_scale = f.scales[j];
    if (f.mins[j] > max_min) max_min = f.mins[j];
  }
  if (max_scale > 0) {
    const float iscale = q4scale / max_scale;
    for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(NearestInt(iscale * f.scales[j]));
    b.d = ToHalf(max_scale / q4scale);
  } else {
    for (int j = 0; j < 16; ++j) b.scales[j] = 0;
    b.d = ToHalf(0.f);
  }
  if (max_min > 0) {
    const float iscale = q4scale / max_min;
    for (int j = 0; j < 16; ++j) {
      const int l = NearestInt(iscale * f.mins[j]);
      b.scales[j] = static_cast<uint8_t>(b.scales[j] | (l << 4));
    }
    b.dmin = ToHalf(max_min / q4scale);
  } else {
    b.dmin = ToHalf(0.f);
  }
}

// quantize_row_q2_K_impl's: the scales and minimums fitted on their 4-bit
// grids by make_qp_quants, each group weighing its weights' sum.
void Q2KFitScales(const KGroupFits& f, BlockQ2_K& b) {
  uint8_t Ls[16], Lm[16];
  b.d = ToHalf(MakeQpQuants(16, 15, f.scales, f.weight_sums, Ls));
  b.dmin = ToHalf(MakeQpQuants(16, 15, f.mins, f.weight_sums, Lm));
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<uint8_t>(Ls[j] | (Lm[j] << 4));
}

// The codes' scales as stored: group j's d and dm.
void Q2KRequant(const BlockQ2_K& b, KRequant& r) {
  r = RequantOf(16, 16, 0, 3, true);
  for (int j = 0; j < 16; ++j) {
    r.d[j] = Half(b.d) * (b.scales[j] & 0xF);
    r.dm[j] = Half(b.dmin) * (b.scales[j] >> 4);
  }
}

// Group j's 6-bit scale code l (0..63) in q3_K's 12 bytes (zeroed first).
void PackQ3Scale(int j, int l, uint8_t* scales) {
  if (j < 8) {
    scales[j] = l & 0xF;
  } else {
    scales[j - 8] = static_cast<uint8_t>(scales[j - 8] | ((l & 0xF) << 4));
  }
  l >>= 4;
  scales[j % 4 + 8] = static_cast<uint8_t>(scales[j % 4 + 8] | (l << (2 * (j / 4))));
}

// quantize_row_q3_K_ref's scales: the signed scales on a 6-bit grid to the
// one of largest magnitude.
void Q3KGridScales(const KGroupFits& f, BlockQ3_K& b) {
  float max_scale = 0;
  float amax = 0;
  for (int j = 0; j < 16; ++j) {
    const float scale = std::fabs(f.scales[j]);
    if (scale > amax) {
      amax = scale;
      max_scale = f.scales[j];
    }
  }
  std::memset(b.scales, 0, sizeof(b.scales));
  if (max_scale) {
    const float iscale = -32.f / max_scale;
    for (int j = 0; j < 16; ++j) {
      // ggml's int8_t l = nearest_int(...) wraps before it clamps.
      const int8_t l = static_cast<int8_t>(NearestInt(iscale * f.scales[j]));
      PackQ3Scale(j, Clamp(l, -32, 31) + 32, b.scales);
    }
    b.d = ToHalf(1 / iscale);
  } else {
    b.d = ToHalf(0.f);
  }
}

// quantize_row_q3_K_impl's: the scales fitted on their 6-bit grid by
// make_qx_quants weighted with each group's weights' sum.
void Q3KFitScales(const KGroupFits& f, BlockQ3_K& b) {
  int8_t Ls[16];
  std::memset(b.scales, 0, sizeof(b.scales));
  const float d_block = MakeQxQuants(16, 32, f.scales, f.weight_sums, Ls);
  for (int j = 0; j < 16; ++j) PackQ3Scale(j, Ls[j], b.scales);
  b.d = ToHalf(d_block);
}

void Q3KRequant(const BlockQ3_K& b, KRequant& r) {
  r = RequantOf(16, 16, -4, 3, false);
  for (int j = 0; j < 16; ++j) {
    int8_t sc = static_cast<int8_t>(j < 8 ? b.scales[j] & 0xF : b.scales[j - 8] >> 4);
    sc = static_cast<int8_t>((sc | (((b.scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32);
    r.d[j] = Half(b.d) * sc;
    r.dm[j] = 0;
  }
}

// Codes 0..7: bit 2 into hmask (element j at bit j / 32 of byte j % 32),
// the rest packed. ggml's `if (L[j] > 3) { set the bit; L[j] -= 4; }`
// without the branch.
void Q3KPack(BlockQ3_K& b, uint8_t* L) {
  std::memset(b.hmask, 0, sizeof(b.hmask));
  for (int j = 0; j < kSuperBlock; ++j) {
    b.hmask[j % 32] = static_cast<uint8_t>(b.hmask[j % 32] | ((L[j] >> 2) << (j / 32)));
    L[j] &= 3;
  }
  Pack2Bits(L, b.qs);
}

// Group j's 6-bit scale and minimum codes where get_scale_min_k4 reads them
// (j < 4 first: the later groups OR their high bits into those bytes).
void PackScaleMinK4(int j, uint8_t ls, uint8_t lm, uint8_t* q) {
  if (j < 4) {
    q[j] = ls;
    q[j + 4] = lm;
  } else {
    q[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
    q[j - 4] = static_cast<uint8_t>(q[j - 4] | ((ls >> 4) << 6));
    q[j - 0] = static_cast<uint8_t>(q[j - 0] | ((lm >> 4) << 6));
  }
}

// q4_K and q5_K differ only in the code width (nmax 15 or 31) and their
// searches' trials. quantize_row_q{4,5}_K_ref's group search:
// make_qkx2_quants per group weighted by av_x + |x| (av_x the group's rms).
void KSearch(const float* x, int nmax, float rmin, int nstep, KGroupFits& f) {
  uint8_t Laux[32];
  float weights[32];
  for (int j = 0; j < 8; ++j) {
    const float av_x = std::sqrt(SumSquares(x + 32 * j, 32) / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    f.scales[j] = MakeQkx2Quants(32, nmax, x + 32 * j, weights, f.codes + 32 * j, &f.mins[j],
                                 Laux, rmin, 0.1f, nstep, false);
  }
}

// quantize_row_q{4,5}_K_impl's: importance weights with sigma2 twice the mean
// square, make_qkx3_quants (37 trials from nmax - 0.9 in steps of 0.05).
void KSearchWeighted(const float* x, const float* qw, int nmax, KGroupFits& f) {
  uint8_t Laux[32];
  float weights[32];
  const float sigma2 = 2 * SumSquares(x, kSuperBlock) / kSuperBlock;
  for (int j = 0; j < 8; ++j) {
    ImportanceWeights(x + 32 * j, qw + 32 * j, sigma2, 32, weights);
    f.weight_sums[j] = Sum(weights, 32);
    f.scales[j] = MakeQkx2Quants(32, nmax, x + 32 * j, weights, f.codes + 32 * j, &f.mins[j],
                                 Laux, -0.9f, 0.05f, 36, false);
  }
}

// The reference's scales and minimums each on a 6-bit grid up to their
// largest.
void KGridScales(const KGroupFits& f, uint8_t* scales_out, uint16_t& d_out, uint16_t& dmin_out) {
  float max_scale = 0;
  float max_min = 0;
  for (int j = 0; j < 8; ++j) {
    if (f.scales[j] > max_scale) max_scale = f.scales[j];
    if (f.mins[j] > max_min) max_min = f.mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = static_cast<uint8_t>(NearestInt(inv_scale * f.scales[j]));
    const uint8_t lm = static_cast<uint8_t>(NearestInt(inv_min * f.mins[j]));
    PackScaleMinK4(j, ls < 63 ? ls : 63, lm < 63 ? lm : 63, scales_out);
  }
  d_out = ToHalf(max_scale / 63.f);
  dmin_out = ToHalf(max_min / 63.f);
}

// The impl's: the scales and minimums fitted on their 6-bit grids by
// make_qp_quants, each group weighing its weights' sum. q5_K caps the codes
// at 63, q4_K does not: they differ when a negative value's code wrapped in
// uint8_t.
void KFitScales(const KGroupFits& f, bool cap_at_63, uint8_t* scales_out, uint16_t& d_out,
                uint16_t& dmin_out) {
  uint8_t Ls[8], Lm[8];
  const float d_block = MakeQpQuants(8, 63, f.scales, f.weight_sums, Ls);
  const float m_block = MakeQpQuants(8, 63, f.mins, f.weight_sums, Lm);
  for (int j = 0; j < 8; ++j) {
    uint8_t ls = Ls[j], lm = Lm[j];
    if (cap_at_63) {
      ls = ls < 63 ? ls : 63;
      lm = lm < 63 ? lm : 63;
    }
    PackScaleMinK4(j, ls, lm, scales_out);
  }
  d_out = ToHalf(d_block);
  dmin_out = ToHalf(m_block);
}

void KRequantOf(int nmax, const uint8_t* scales, uint16_t d_half, uint16_t dmin_half,
                KRequant& r) {
  r = RequantOf(32, 8, 0, nmax, true);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    ScaleMinK4(j, scales, sc, m);
    r.d[j] = Half(d_half) * sc;
    r.dm[j] = Half(dmin_half) * m;
  }
}

}  // namespace

float SumSquares(const float* x, int n) {
  float sum = 0;
  for (int j = 0; j < n; ++j) sum += x[j] * x[j];
  return sum;
}

void Requantize(const float* x, const KRequant& r, uint8_t* codes, uint64_t& clipped) {
  for (int j = 0; j < r.groups; ++j) {
    const float d = r.d[j];
    if (!d) continue;
    for (int ii = 0; ii < r.group; ++ii) {
      const float v = r.with_min ? x[r.group * j + ii] + r.dm[j] : x[r.group * j + ii];
      const int l = NearestInt(v / d);
      codes[r.group * j + ii] = static_cast<uint8_t>(Clamp(l, r.lo, r.hi, clipped) - r.lo);
    }
  }
}

// With importance (qw), each search is ggml's quantize_row_<type>_impl's;
// without, quantize_row_<type>_ref's (what quantize_<type> runs for each).

// q2_K: each group's make_qkx2_quants weighted by |x| (least absolute error,
// 16 trials); with importance, weights with sigma2 the mean square and the
// least squared error over 37 trials (make_qkx3_quants from nmax - 0.9 in
// steps of 0.05).
void SearchQ2_K(const float* x, const float* qw, KGroupFits& f) {
  uint8_t Laux[16];
  float weights[16];
  if (qw == nullptr) {
    for (int j = 0; j < 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      f.scales[j] = MakeQkx2Quants(16, 3, x + 16 * j, weights, f.codes + 16 * j, &f.mins[j],
                                   Laux, -0.5f, 0.1f, 15, true);
    }
    return;
  }
  const float sigma2 = SumSquares(x, kSuperBlock) / kSuperBlock;
  for (int j = 0; j < 16; ++j) {
    ImportanceWeights(x + 16 * j, qw + 16 * j, sigma2, 16, weights);
    f.weight_sums[j] = Sum(weights, 16);
    f.scales[j] = MakeQkx2Quants(16, 3, x + 16 * j, weights, f.codes + 16 * j, &f.mins[j], Laux,
                                 -0.9f, 0.05f, 36, false);
  }
}

void FinishQ2_K(const float* x, bool weighted, KGroupFits& f, uint8_t* out, uint64_t& clipped,
                RequantizeFn requantize) {
  BlockQ2_K b;
  if (weighted) {
    Q2KFitScales(f, b);
  } else {
    Q2KGridScales(f, b);
  }
  KRequant r;
  Q2KRequant(b, r);
  requantize(x, r, f.codes, clipped);
  Pack2Bits(f.codes, b.qs);
  StoreBlock(b, out);
}

// q3_K: make_q3_quants per group; with importance, weights with sigma2 twice
// the mean square and make_qx_quants with them per group.
void SearchQ3_K(const float* x, const float* qw, KGroupFits& f) {
  int8_t* L = reinterpret_cast<int8_t*>(f.codes);
  if (qw == nullptr) {
    for (int j = 0; j < 16; ++j) f.scales[j] = MakeQ3Quants(16, 4, x + 16 * j, L + 16 * j);
    return;
  }
  float weights[16];
  const float sigma2 = 2 * SumSquares(x, kSuperBlock) / kSuperBlock;
  for (int j = 0; j < 16; ++j) {
    ImportanceWeights(x + 16 * j, qw + 16 * j, sigma2, 16, weights);
    f.weight_sums[j] = Sum(weights, 16);
    f.scales[j] = MakeQxQuants(16, 4, x + 16 * j, weights, L + 16 * j);
  }
}

void FinishQ3_K(const float* x, bool weighted, KGroupFits& f, uint8_t* out, uint64_t& clipped,
                RequantizeFn requantize) {
  BlockQ3_K b;
  if (weighted) {
    Q3KFitScales(f, b);
  } else {
    Q3KGridScales(f, b);
  }
  KRequant r;
  Q3KRequant(b, r);
  requantize(x, r, f.codes, clipped);
  Q3KPack(b, f.codes);
  StoreBlock(b, out);
}

// q4_K and q5_K: codes 0..nmax (15, 31) with a 6-bit scale and min per
// group of 32. Without importance the search starts at rmin and takes nstep
// steps (make_qkx2_quants), with it make_qkx3_quants' weighted search; the
// block's scales are fitted (with importance; capped at 63 for q5_K) or put
// on the grid, and the codes requantized with them.
void SearchScaleMin(const float* x, const float* qw, int nmax, float rmin, int nstep,
                    KGroupFits& f) {
  if (qw == nullptr) {
    KSearch(x, nmax, rmin, nstep, f);
  } else {
    KSearchWeighted(x, qw, nmax, f);
  }
}

template <class Block>
void FinishScaleMin(const float* x, bool weighted, int nmax, bool cap_at_63, KGroupFits& f,
                    Block& b, uint64_t& clipped, RequantizeFn requantize) {
  if (weighted) {
    KFitScales(f, cap_at_63, b.scales, b.d, b.dmin);
  } else {
    KGridScales(f, b.scales, b.d, b.dmin);
  }
  KRequant r;
  KRequantOf(nmax, b.scales, b.d, b.dmin, r);
  requantize(x, r, f.codes, clipped);
}

void SearchQ4_K(const float* x, const float* qw, KGroupFits& f) {
  SearchScaleMin(x, qw, 15, -1.f, 20, f);
}

void FinishQ4_K(const float* x, bool weighted, KGroupFits& f, uint8_t* out, uint64_t& clipped,
                RequantizeFn requantize) {
  BlockQ4_K b;
  FinishScaleMin(x, weighted, 15, /*cap_at_63=*/false, f, b, clipped, requantize);
  const uint8_t* L = f.codes;
  uint8_t* q = b.qs;
  for (int j = 0; j < kSuperBlock; j += 64) {
    for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
    q += 32;
  }
  StoreBlock(b, out);
}

void SearchQ5_K(const float* x, const float* qw, KGroupFits& f) {
  SearchScaleMin(x, qw, 31, -0.5f, 15, f);
}

void FinishQ5_K(const float* x, bool weighted, KGroupFits& f, uint8_t* out, uint64_t& clipped,
                RequantizeFn requantize) {
  BlockQ5_K b;
  FinishScaleMin(x, weighted, 31, /*cap_at_63=*/true, f, b, clipped, requantize);
  const uint8_t* L = f.codes;
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

// quantize_row_q6_K_impl weighs make_qx_quants' fit with the importance
// itself (no sigma2 term; ggml left that variant commented out), the ref
// with x^2; everything after is the same.
void SearchQ6_K(const float* x, const float* qw, KGroupFits& f) {
  int8_t* L = reinterpret_cast<int8_t*>(f.codes);
  for (int ib = 0; ib < 16; ++ib) {
    f.scales[ib] =
        MakeQxQuants(16, 32, x + 16 * ib, qw != nullptr ? qw + 16 * ib : nullptr, L + 16 * ib);
  }
}

void FinishQ6_K(const float* x, KGroupFits& f, uint8_t* out, uint64_t& clipped,
                RequantizeFn requantize) {
  BlockQ6_K b;
  uint8_t* L = f.codes;
  float max_scale = 0;
  float max_abs_scale = 0;
  for (int ib = 0; ib < 16; ++ib) {
    const float abs_scale = std::fabs(f.scales[ib]);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = f.scales[ib];
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
    const int s = NearestInt(iscale * f.scales[ib]);
    b.scales[ib] = static_cast<int8_t>(s < 127 ? s : 127);
  }
  KRequant r = RequantOf(16, 16, -32, 31, false);
  for (int j = 0; j < 16; ++j) {
    r.d[j] = Half(b.d) * b.scales[j];
    r.dm[j] = 0;
  }
  requantize(x, r, L, clipped);
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

void EncodeQ2_K(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  KGroupFits fits;
  SearchQ2_K(x, qw, fits);
  FinishQ2_K(x, qw != nullptr, fits, out, clipped);
}

void EncodeQ3_K(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  KGroupFits fits;
  SearchQ3_K(x, qw, fits);
  FinishQ3_K(x, qw != nullptr, fits, out, clipped);
}

void EncodeQ4_K(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  KGroupFits fits;
  SearchQ4_K(x, qw, fits);
  FinishQ4_K(x, qw != nullptr, fits, out, clipped);
}

void EncodeQ5_K(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  KGroupFits fits;
  SearchQ5_K(x, qw, fits);
  FinishQ5_K(x, qw != nullptr, fits, out, clipped);
}

void EncodeQ6_K(const float* x, const float* qw, uint8_t* out, uint64_t& clipped) {
  KGroupFits fits;
  SearchQ6_K(x, qw, fits);
  FinishQ6_K(x, fits, out, clipped);
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
