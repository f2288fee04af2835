// codecs/ggml_legacy.cc's EncodeQ4_0 .. EncodeQ8_0 without importance, 16
// blocks at a time (their statistics, then their scales, then their codes),
// each block's 32 elements in 32 / N vectors (N <= 16), compiled
// once per Highway target (foreach_target.h re-includes this file) and chosen
// once per row. Each step is the scalar one's float operation, lane by lane:
//   - the block statistic is a vector max / min reduction (exact, order-free)
//     with NaN lanes replaced by what the scalar scan's comparisons leave
//     (NaN never wins), then the scalar's choice among equal values: the
//     first element of largest |x| (signed), and for a minimum or maximum of
//     zero the first zero (its sign is stored);
//   - d and id are the scalar expressions on that statistic; the fp16 scale
//     (and minimum) is codecs' Fp32ToFp16 on the integer bits, in vectors;
//   - each element is x * id + bias (q4_1, q5_1: (x - min) * id + bias), two
//     roundings (no FMA: the kernels build with -ffp-contract=off), then
//     codecs' TruncToInt (truncation, INT32_MIN outside int32 and for NaN),
//     the (int8_t) / (uint8_t) cast as its low byte, the clamp and its count;
//     q8_0 rounds half away from zero (roundf) as trunc plus a step when the
//     exact fraction is at least one half;
//   - the codes pack as PackNibbles / PackQ5 do: element j's byte ORed with
//     element j + 16's shifted by 4 (q4: unmasked, as the scalar), q5's bit 4
//     of element j in bit j of qh.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/ggml_legacy_simd.cc"
#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>

#include "codecs/ggml.h"
#include "codecs/ggml_blocks.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/ggml_kquants_simd.h"
#include "kernels/ggml_legacy_simd.h"

HWY_BEFORE_NAMESPACE();
namespace lowp::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// At most 16 lanes, so a block is kV whole vectors and element j + 16 sits
// in vector k + kV / 2 at the lane of element j in vector k.
using DF = hn::CappedTag<float, 16>;
using DI = hn::RebindToSigned<DF>;
using DU8 = hn::Rebind<uint8_t, DF>;
using DI8 = hn::Rebind<int8_t, DF>;
using VF = hn::Vec<DF>;
using VI = hn::Vec<DI>;
constexpr size_t kN = hn::MaxLanes(DF());
constexpr size_t kV = 32 / kN;
static_assert(kN <= 16 && 32 % kN == 0);

struct BlockVecs {
  VF v[kV];
};

HWY_INLINE BlockVecs LoadBlock(const float* x) {
  const DF df;
  BlockVecs b;
  for (size_t k = 0; k < kV; ++k) b.v[k] = hn::LoadU(df, x + k * kN);
  return b;
}

// |v|, and 0 for NaN (the scalar `amax < fabsf(v)` never takes a NaN).
HWY_INLINE VF AbsOrZero(VF v) { return hn::IfThenElseZero(hn::Eq(v, v), hn::Abs(v)); }

// The block's largest |x| (0 when none is above 0), as a vector.
HWY_INLINE VF AbsMax(const BlockVecs& b, VF* abs) {
  const DF df;
  abs[0] = AbsOrZero(b.v[0]);
  VF m = abs[0];
  for (size_t k = 1; k < kV; ++k) {
    abs[k] = AbsOrZero(b.v[k]);
    m = hn::Max(m, abs[k]);
  }
  return hn::MaxOfLanes(df, m);
}

// codecs' SignedMax: the first element of largest |x|, +0 when that is 0.
HWY_INLINE float SignedMax(const float* x, const BlockVecs& b) {
  const DF df;
  VF abs[kV];
  const VF amax = AbsMax(b, abs);
  if (!(hn::GetLane(amax) > 0.0f)) return 0.0f;
  for (size_t k = 0; k < kV; ++k) {
    const intptr_t i = hn::FindFirstTrue(df, hn::Eq(abs[k], amax));
    if (i >= 0) return x[k * kN + static_cast<size_t>(i)];
  }
  return 0.0f;  // not reached: some lane holds amax
}

// The first element equal to `value` (for 0: the first of +0 / -0).
HWY_INLINE float FirstEqual(const float* x, const BlockVecs& b, float value) {
  const DF df;
  for (size_t k = 0; k < kV; ++k) {
    const intptr_t i = hn::FindFirstTrue(df, hn::Eq(b.v[k], hn::Set(df, value)));
    if (i >= 0) return x[k * kN + static_cast<size_t>(i)];
  }
  return value;
}

// codecs' MinMax: from FLT_MAX / -FLT_MAX, `x < min`, `x > max` in element
// order, so NaN never enters and a zero result is the first zero's sign.
HWY_INLINE void MinMax(const float* x, const BlockVecs& b, float& min, float& max) {
  const DF df;
  const VF big = hn::Set(df, FLT_MAX), small = hn::Set(df, -FLT_MAX);
  VF lo = big, hi = small;
  for (size_t k = 0; k < kV; ++k) {
    const auto real = hn::Eq(b.v[k], b.v[k]);
    lo = hn::Min(lo, hn::IfThenElse(real, b.v[k], big));
    hi = hn::Max(hi, hn::IfThenElse(real, b.v[k], small));
  }
  min = hn::GetLane(hn::MinOfLanes(df, lo));
  max = hn::GetLane(hn::MaxOfLanes(df, hi));
  if (min == 0.0f) min = FirstEqual(x, b, 0.0f);
  if (max == 0.0f) max = FirstEqual(x, b, 0.0f);
}

// codecs' TruncToInt: truncation toward zero, INT32_MIN unless
// -2^31 < v < 2^31 (NaN included).
HWY_INLINE VI TruncToInt(VF v) {
  // cvttps2dq is exactly this (0x80000000 for NaN and out of range);
  // Highway's ConvertTo would saturate positive overflow instead.
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
  static_assert(kN == 16);
  return VI{_mm512_cvttps_epi32(v.raw)};
#elif HWY_ARCH_X86 && HWY_TARGET == HWY_AVX2
  static_assert(kN == 8);
  return VI{_mm256_cvttps_epi32(v.raw)};
#elif HWY_ARCH_X86 && (HWY_TARGET == HWY_SSE4 || HWY_TARGET == HWY_SSSE3)
  static_assert(kN == 4);
  return VI{_mm_cvttps_epi32(v.raw)};
#else
  const DF df;
  const DI di;
  const auto inside =
      hn::And(hn::Gt(v, hn::Set(df, -2147483648.0f)), hn::Lt(v, hn::Set(df, 2147483648.0f)));
  // Lanes outside (NaN included) are zeroed before the conversion: converting
  // them is undefined in the scalar target's C++ cast.
  const VI in_range = hn::ConvertTo(di, hn::IfThenElseZero(inside, v));
  return hn::IfThenElse(hn::RebindMask(di, inside), in_range, hn::Set(di, INT32_MIN));
#endif
}

// (int8_t) of an int32: its low byte, sign-extended.
HWY_INLINE VI LowByteSigned(VI i) { return hn::ShiftRight<24>(hn::ShiftLeft<24>(i)); }

// TruncMin: MIN(qmax, (int8_t)v), counting the clamps.
HWY_INLINE VI TruncMin(VF v, int32_t qmax, size_t& clipped) {
  const DI di;
  const VI q = LowByteSigned(TruncToInt(v));
  const auto over = hn::Gt(q, hn::Set(di, qmax));
  clipped += hn::CountTrue(di, over);
  return hn::IfThenElse(over, hn::Set(di, qmax), q);
}

// roundf: trunc, then one step away from zero when |fraction| >= 1/2 (the
// fraction v - trunc(v) is exact; NaN and Inf stay non-finite).
HWY_INLINE VF RoundHalfAway(VF v) {
  const DF df;
  const VF t = hn::Trunc(v);
  const auto step = hn::Ge(hn::Abs(hn::Sub(v, t)), hn::Set(df, 0.5f));
  return hn::IfThenElse(step, hn::Add(t, hn::CopySign(hn::Set(df, 1.0f), v)), t);
}

// PackNibbles: byte j = code j | code j + 16 << 4, each code's low byte
// (q4: codes are not masked, as in the scalar; q5 masks them first).
HWY_INLINE void PackNibbles(const VI* q, uint8_t* qs) {
  const DI di;
  const DU8 du8;
  for (size_t k = 0; k < kV / 2; ++k) {
    const VI byte = hn::And(hn::Or(q[k], hn::ShiftLeft<4>(q[k + kV / 2])), hn::Set(di, 0xFF));
    hn::StoreU(hn::DemoteTo(du8, byte), du8, qs + k * kN);
  }
}

// PackQ5: the low nibbles as PackNibbles places them, bit 4 of code j in bit
// j of the little-endian word qh.
HWY_INLINE void PackQ5(const VI* q, uint8_t* qs, uint8_t* qh_bytes) {
  const DI di;
  VI low[kV];
  uint32_t qh = 0;
  for (size_t k = 0; k < kV; ++k) {
    low[k] = hn::And(q[k], hn::Set(di, 0x0F));
    uint8_t bits[8] = {};
    hn::StoreMaskBits(di, hn::TestBit(q[k], hn::Set(di, 0x10)), bits);
    const uint32_t lanes = (static_cast<uint32_t>(bits[0]) | static_cast<uint32_t>(bits[1]) << 8) &
                           ((1u << kN) - 1u);
    qh |= lanes << (k * kN);
  }
  PackNibbles(low, qs);
  std::memcpy(qh_bytes, &qh, sizeof(qh));
}

// codecs' Fp32ToFp16 (round to nearest even; NaN -> sign | 0x7e00, >= 65520
// -> infinity, below 2^-25 -> 0) on the integer bits, lane by lane.
HWY_INLINE VI Fp32ToFp16(VF v) {
  const DI di;
  const VI bits = hn::BitCast(di, v);
  const VI sign = hn::And(hn::ShiftRight<16>(bits), hn::Set(di, 0x8000));
  const VI abs = hn::And(bits, hn::Set(di, 0x7fffffff));
  const VI one = hn::Set(di, 1);
  // Normal: rebias, drop 13 bits, round half to even.
  const VI r = hn::Sub(abs, hn::Set(di, 0x38000000));
  const VI qn = hn::ShiftRight<13>(r);
  const VI rest_n = hn::And(r, hn::Set(di, 0x1fff));
  const auto up_n = hn::Or(hn::Gt(rest_n, hn::Set(di, 0x1000)),
                           hn::And(hn::Eq(rest_n, hn::Set(di, 0x1000)),
                                   hn::Eq(hn::And(qn, one), one)));
  const VI normal = hn::Add(qn, hn::IfThenElseZero(up_n, one));
  // Subnormal: the value in units of 2^-24 (shift 14..24, clamped so other
  // lanes shift by a defined amount), half to even.
  const VI exp = hn::ShiftRight<23>(abs);
  const VI mant = hn::Or(hn::And(abs, hn::Set(di, 0x7fffff)), hn::Set(di, 0x800000));
  const VI shift = hn::Min(hn::Max(hn::Sub(hn::Set(di, 126), exp), hn::Set(di, 14)), hn::Set(di, 24));
  const VI qs = hn::Shr(mant, shift);
  const VI bit = hn::Shl(one, shift);
  const VI rest_s = hn::And(mant, hn::Sub(bit, one));
  const VI half = hn::ShiftRight<1>(bit);
  const auto up_s = hn::Or(hn::Gt(rest_s, half),
                           hn::And(hn::Eq(rest_s, half), hn::Eq(hn::And(qs, one), one)));
  const VI subnormal = hn::IfThenElseZero(hn::Gt(exp, hn::Set(di, 101)),
                                          hn::Add(qs, hn::IfThenElseZero(up_s, one)));
  VI h = hn::IfThenElse(hn::Gt(abs, hn::Set(di, 0x387fffff)), normal, subnormal);
  h = hn::IfThenElse(hn::Gt(abs, hn::Set(di, 0x477fefff)), hn::Set(di, 0x7c00), h);
  h = hn::IfThenElse(hn::Gt(abs, hn::Set(di, 0x7f800000)), hn::Set(di, 0x7e00), h);
  return hn::Or(sign, h);
}

// Fp32ToFp16 of n values (n a multiple of kN).
void ToHalves(const float* in, size_t n, uint16_t* out) {
  const DF df;
  const hn::Rebind<uint16_t, DF> du16;
  for (size_t i = 0; i < n; i += kN) {
    hn::StoreU(hn::DemoteTo(du16, Fp32ToFp16(hn::LoadU(df, in + i))), du16, out + i);
  }
}

void StoreHalf(uint16_t h, uint8_t* at) { std::memcpy(at, &h, sizeof(h)); }

// Each type in three steps, which EncodeBlocks runs over a batch of blocks
// at a time so that one block's scale does not wait on its statistic's
// reduction and its divisions (the blocks are independent):
//   Stat(x, a, b): the block statistic(s); Scale(a, b): d;
//   Codes(x, a, id, hd, hm, out, clipped): the codes and the block's bytes,
//   hd and hm the fp16 of d and (kStoresMin) of a.

// q4_0 (kHalf 8), q5_0 (16): a = the signed max, d = a / -kHalf;
// q = MIN(2 kHalf - 1, (int8_t)(x * id + kHalf + 0.5)).
template <int kHalf>
struct Symmetric {
  using Block = std::conditional_t<kHalf == 8, ggml::BlockQ4_0, ggml::BlockQ5_0>;
  static void Stat(const float* x, float& a, float& /*b*/) { a = SignedMax(x, LoadBlock(x)); }
  static float Scale(float a, float /*b*/) { return a / -static_cast<float>(kHalf); }
  static constexpr bool kStoresMin = false;
  static void Codes(const float* x, float /*a*/, float id, uint16_t hd, uint16_t /*hm*/,
                    uint8_t* out, size_t& clipped) {
    const DF df;
    const BlockVecs b = LoadBlock(x);
    VI q[kV];
    for (size_t k = 0; k < kV; ++k) {
      const VF v = hn::Add(hn::Mul(b.v[k], hn::Set(df, id)), hn::Set(df, kHalf + 0.5f));
      q[k] = TruncMin(v, 2 * kHalf - 1, clipped);
    }
    StoreHalf(hd, out + offsetof(Block, d));
    if constexpr (kHalf == 8) {
      PackNibbles(q, out + offsetof(Block, qs));
    } else {
      PackQ5(q, out + offsetof(Block, qs), out + offsetof(Block, qh));
    }
  }
};

// q4_1 (kQmax 15), q5_1 (31): a = min, b = max, d = (b - a) / kQmax, m = a;
// q4_1: q = MIN(15, (int8_t)((x - min) * id + 0.5)); q5_1: q = (uint8_t)(...),
// counted when above 31.
template <int kQmax>
struct Offset {
  using Block = std::conditional_t<kQmax == 15, ggml::BlockQ4_1, ggml::BlockQ5_1>;
  static void Stat(const float* x, float& a, float& b) { MinMax(x, LoadBlock(x), a, b); }
  static float Scale(float a, float b) { return (b - a) / static_cast<float>(kQmax); }
  static constexpr bool kStoresMin = true;
  static void Codes(const float* x, float min, float id, uint16_t hd, uint16_t hm, uint8_t* out,
                    size_t& clipped) {
    const DF df;
    const DI di;
    const BlockVecs b = LoadBlock(x);
    VI q[kV];
    for (size_t k = 0; k < kV; ++k) {
      const VF v = hn::Add(hn::Mul(hn::Sub(b.v[k], hn::Set(df, min)), hn::Set(df, id)),
                           hn::Set(df, 0.5f));
      if constexpr (kQmax == 15) {
        q[k] = TruncMin(v, 15, clipped);
      } else {
        q[k] = hn::And(TruncToInt(v), hn::Set(di, 0xFF));
        clipped += hn::CountTrue(di, hn::Gt(q[k], hn::Set(di, 31)));
      }
    }
    StoreHalf(hd, out + offsetof(Block, d));
    StoreHalf(hm, out + offsetof(Block, m));
    if constexpr (kQmax == 15) {
      PackNibbles(q, out + offsetof(Block, qs));
    } else {
      PackQ5(q, out + offsetof(Block, qs), out + offsetof(Block, qh));
    }
  }
};

// q8_0: a = amax, d = a / 127; q = roundf(x * id), counted outside int8,
// stored as its low byte.
struct Q8 {
  using Block = ggml::BlockQ8_0;
  static void Stat(const float* x, float& a, float& /*b*/) {
    VF abs[kV];
    a = hn::GetLane(AbsMax(LoadBlock(x), abs));
  }
  static float Scale(float a, float /*b*/) { return a / 127.0f; }
  static constexpr bool kStoresMin = false;
  static void Codes(const float* x, float /*a*/, float id, uint16_t hd, uint16_t /*hm*/,
                    uint8_t* out, size_t& clipped) {
    const DF df;
    const DI di;
    const DI8 di8;
    const BlockVecs b = LoadBlock(x);
    StoreHalf(hd, out + offsetof(Block, d));
    int8_t* qs = reinterpret_cast<int8_t*>(out + offsetof(Block, qs));
    for (size_t k = 0; k < kV; ++k) {
      const VI q = TruncToInt(RoundHalfAway(hn::Mul(b.v[k], hn::Set(df, id))));
      clipped +=
          hn::CountTrue(di, hn::Or(hn::Gt(q, hn::Set(di, 127)), hn::Lt(q, hn::Set(di, -128))));
      hn::StoreU(hn::DemoteTo(di8, LowByteSigned(q)), di8, qs + k * kN);
    }
  }
};

template <class Kind>
void EncodeBlocks(const float* in, size_t blocks, uint8_t* out, uint64_t* clipped) {
  constexpr size_t kBatch = 16;  // a multiple of kN
  size_t count = 0;
  float a[kBatch] = {}, b[kBatch] = {}, d[kBatch] = {}, id[kBatch] = {};
  uint16_t hd[kBatch], hm[kBatch] = {};
  for (size_t first = 0; first < blocks; first += kBatch) {
    const size_t n = blocks - first < kBatch ? blocks - first : kBatch;
    const float* x = in + 32 * first;
    uint8_t* o = out + sizeof(typename Kind::Block) * first;
    for (size_t i = 0; i < n; ++i) Kind::Stat(x + 32 * i, a[i], b[i]);
    for (size_t i = 0; i < n; ++i) {
      d[i] = Kind::Scale(a[i], b[i]);
      id[i] = d[i] != 0.0f ? 1.0f / d[i] : 0.0f;
    }
    ToHalves(d, kBatch, hd);
    if constexpr (Kind::kStoresMin) ToHalves(a, kBatch, hm);
    for (size_t i = 0; i < n; ++i) {
      Kind::Codes(x + 32 * i, a[i], id[i], hd[i], hm[i], o + sizeof(typename Kind::Block) * i,
                  count);
    }
  }
  *clipped += count;
}

void EncodeLegacy(ggml::Type type, const float* in, size_t size, uint8_t* out,
                  uint64_t* clipped) {
  const size_t blocks = size / 32;
  switch (type) {
    case ggml::Type::kQ4_0: EncodeBlocks<Symmetric<8>>(in, blocks, out, clipped); break;
    case ggml::Type::kQ5_0: EncodeBlocks<Symmetric<16>>(in, blocks, out, clipped); break;
    case ggml::Type::kQ4_1: EncodeBlocks<Offset<15>>(in, blocks, out, clipped); break;
    case ggml::Type::kQ5_1: EncodeBlocks<Offset<31>>(in, blocks, out, clipped); break;
    default: EncodeBlocks<Q8>(in, blocks, out, clipped); break;  // q8_0
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace lowp::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lowp::kernels {

HWY_EXPORT(EncodeLegacy);

void EncodeLegacySimd(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                      uint64_t& clipped, std::span<const float> importance) {
  if (!importance.empty() && type != ggml::Type::kQ8_0) {
    EncodeLegacyWeightedSimd(type, in, out, clipped, importance);
    return;
  }
  HWY_DYNAMIC_DISPATCH(EncodeLegacy)(type, in.data(), in.size(), out.data(), &clipped);
}

}  // namespace lowp::kernels
#endif  // HWY_ONCE
