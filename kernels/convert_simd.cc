// The conversion kernels, compiled once per Highway target (foreach_target.h
// re-includes this file) and chosen at run time. Everything is integer
// arithmetic on the float32 bit pattern, so the result never depends on the
// target, the FPU's rounding mode or its flush-to-zero flags; the only float
// operation is int32 -> float32 of integers below 2^24 (exact).
//
// How a finite float32 is encoded (the reference's rule 3, lane by lane):
//  - normalise: significand `sig` in [2^23, 2^24) and the exponent `top` of
//    its leading bit (a float32 subnormal goes through int -> float);
//  - the grid step is 2^quantum with quantum = max(top - m, min_exponent - m)
//    (integers: 0), so `shift` = quantum - (top - 23) low bits are dropped;
//  - round n = sig >> shift by the mode, then the magnitude is
//    ((quantum + m + bias - 1) << m) + n, which carries a rounded-up
//    significand into the exponent field and covers subnormals too;
//  - lanes that need a special rule (NaN, infinity, zero, daz/ftz, overflow,
//    underflow) are fixed up by selects only when a vector holds one.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/convert_simd.cc"
#include <type_traits>

#include "hwy/cache_control.h"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "kernels/convert.h"
#include "kernels/dispatch.h"
#include "kernels/plan.h"

HWY_BEFORE_NAMESPACE();
namespace lowp::kernels {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

using DU = hn::ScalableTag<uint32_t>;
using DI = hn::RebindToSigned<DU>;
using DF = hn::RebindToFloat<DU>;
using VU = hn::Vec<DU>;
using VI = hn::Vec<DI>;
using MU = hn::Mask<DU>;

// Lanes of the widest vector any target has: the size of per-vector buffers.
constexpr size_t kMaxLanes = HWY_MAX_BYTES / sizeof(uint32_t);

constexpr uint32_t kInexactBit = 1, kOverflowBit = 2, kSaturatedBit = 4, kFlushedBit = 8,
                   kUnderflowBit = 16;
constexpr int kNearestEven = 0, kNearestAway = 1, kTowardZero = 2, kTowardPositive = 3,
              kTowardNegative = 4, kOdd = 5, kStochastic = 6;

HWY_INLINE MU NoLanes(DU du) { return hn::MaskFromVec(hn::Zero(du)); }

HWY_INLINE VU BySign(DU du, MU negative, const uint32_t (&pair)[2]) {
  return hn::IfThenElse(negative, hn::Set(du, pair[1]), hn::Set(du, pair[0]));
}

HWY_INLINE VU Fmix(DU du, VU h) {
  h = hn::Xor(h, hn::ShiftRight<16>(h));
  h = hn::Mul(h, hn::Set(du, 0x85EBCA6Bu));
  h = hn::Xor(h, hn::ShiftRight<13>(h));
  h = hn::Mul(h, hn::Set(du, 0xC2B2AE35u));
  return hn::Xor(h, hn::ShiftRight<16>(h));
}

// RandomBits(seed, index + lane) for every lane (formats/reference.cc).
HWY_INLINE VU RandomBits(DU du, const EncodePlan& p, uint64_t index) {
  const VU base_lo = hn::Set(du, static_cast<uint32_t>(index));
  const VU lo = hn::Add(hn::Iota(du, 0), base_lo);
  const VU carry = hn::VecFromMask(du, hn::Lt(lo, base_lo));  // all ones where lo wrapped
  const VU hi = hn::Sub(hn::Set(du, static_cast<uint32_t>(index >> 32)), carry);
  const VU h = Fmix(du, hn::Xor(lo, hn::Set(du, p.k0)));
  return Fmix(du, hn::Add(h, hn::Xor(hi, hn::Set(du, p.k1))));
}

// float32 bits -> codes. `source_subnormal` marks inputs that are subnormal in
// the format they came from (what daz reads as zero). With kEvents, `*events`
// receives each lane's EncodeEvent bits.
// Nearest-even |x| on the grid of a plan with grid_fast (kernels/plan.h):
// false when a lane is NaN, Inf or beyond the largest finite value once
// rounded (the encoder's general path takes those vectors).
// The exponent field of |x|'s quantum, at least the smallest normal's, and
// C = 1.5 * 2^23 * quantum: |x| + C rounds |x| to a multiple of the quantum.
HWY_INLINE hn::Vec<DF> GridConstant(const EncodePlan& p, VU magnitude_bits, VI* field) {
  const DU du;
  const DI di;
  *field =
      hn::Max(hn::BitCast(di, hn::ShiftRight<23>(magnitude_bits)), hn::Set(di, p.grid_min_field));
  return hn::BitCast(
      DF(), hn::Or(hn::ShiftLeft<23>(hn::BitCast(du, hn::Add(*field, hn::Set(di, 23 - p.m)))),
                   hn::Set(du, 0x400000u)));
}

HWY_INLINE bool GridRound(const EncodePlan& p, hn::Vec<DF> x, hn::Vec<DF>* rounded) {
  const DU du;
  const DF df;
  const auto a = hn::Abs(x);
  VI field;
  const auto c = GridConstant(p, hn::BitCast(du, a), &field);
  const auto r = hn::Sub(hn::Add(a, c), c);
  const auto max = hn::Set(df, p.grid_max);
  *rounded = r;
  return hn::AllTrue(df, hn::And(hn::Le(a, hn::Add(max, max)), hn::Le(r, max)));
}

// An integer format's code of |x| = a (sign by `negative`): sig >> (150 -
// exponent field) rounded to nearest even, negated for negatives, masked to
// the code's bits; no saturation. The shift count is clamped to [0, 31]:
// lanes beyond the format's range compute too (their result is discarded),
// and a negative count is undefined where the shift is C++'s (HWY_SCALAR).
HWY_INLINE VU RoundToIntegerCode(VU a, MU negative, VU code_mask) {
  const DU du;
  const DI di;
  const VI field = hn::BitCast(di, hn::ShiftRight<23>(a));
  const VU s = hn::BitCast(
      du, hn::Max(hn::Min(hn::Sub(hn::Set(di, 150), field), hn::Set(di, 31)), hn::Zero(di)));
  const VU sig = hn::Or(hn::And(a, hn::Set(du, 0x7FFFFFu)), hn::Set(du, 0x800000u));
  const VU n = hn::Shr(sig, s);
  const VU unit = hn::Shl(hn::Set(du, 1), s);
  const VU rem = hn::And(sig, hn::Sub(unit, hn::Set(du, 1)));
  const MU up = hn::Gt(hn::Add(rem, hn::And(n, hn::Set(du, 1))), hn::ShiftRight<1>(unit));
  const VU rounded = hn::Sub(n, hn::VecFromMask(du, up));
  const VU value = hn::IfThenElse(negative, hn::Sub(hn::Zero(du), rounded), rounded);
  return hn::And(value, code_mask);
}

template <int R, bool kEvents>
HWY_INLINE VU EncodeVec(const EncodePlan& p, VU bits, MU source_subnormal, uint64_t index,
                        VU* events) {
  const DU du;
  const DI di;
  const DF df;
  const VU a = hn::And(bits, hn::Set(du, 0x7FFFFFFFu));
  const VI ai = hn::BitCast(di, a);
  const MU negative = hn::RebindMask(du, hn::Lt(hn::BitCast(di, bits), hn::Zero(di)));

  if constexpr (R == kNearestEven && !kEvents) {
    // Every finite result, subnormals included: the multiple n of the
    // quantum that a + C rounds to sits in the low bits of a + C, and the
    // code is ((field - min field) << m) + n for subnormal and normal
    // results alike (a carry into the next binade included).
    if (p.grid_fast) {
      const auto ax = hn::BitCast(df, a);
      VI field;
      const auto c = GridConstant(p, a, &field);
      const VI n =
          hn::Sub(hn::BitCast(di, hn::And(hn::BitCast(du, hn::Add(ax, c)), hn::Set(du, 0x7FFFFFu))),
                  hn::Set(di, 0x400000));
      const VI magnitude =
          hn::Add(hn::ShiftLeftSame(hn::Sub(field, hn::Set(di, p.grid_min_field)), p.m), n);
      const auto max = hn::Set(df, p.grid_max);
      if (hn::AllTrue(di, hn::And(hn::RebindMask(di, hn::Le(ax, hn::Add(max, max))),
                                  hn::Lt(magnitude, hn::Set(di, p.max_magnitude + 1))))) {
        return hn::Or(hn::BitCast(du, magnitude),
                      hn::ShiftLeftSame(hn::ShiftRight<31>(bits), p.bits - 1));
      }
    }
    if (p.fast) {
      const VI key = p.is_signed ? ai : hn::BitCast(di, bits);
      const auto in_range =
          hn::AndNot(hn::Lt(key, hn::Set(di, p.fast_lo)), hn::Lt(key, hn::Set(di, p.fast_hi)));
      if (hn::AllTrue(di, in_range)) {
        const VU tie = p.fast_tie_always
                           ? hn::Set(du, 1)
                           : hn::And(hn::ShiftRightSame(a, p.fast_shift), hn::Set(du, 1));
        const VU biased = hn::Add(a, hn::Set(du, p.fast_add));
        const VU magnitude = hn::ShiftRightSame(hn::Add(biased, tie), p.fast_shift);
        if (!p.is_signed) return magnitude;
        return hn::Or(magnitude, hn::ShiftLeftSame(hn::ShiftRight<31>(bits), p.bits - 1));
      }
    }
    if (p.int_fast_hi != 0) {
      // Integers, |x| below the largest value + 1/2: n = sig >> (150 - field)
      // rounded, no saturation, no special lane.
      const VU key = p.is_signed ? a : bits;  // unsigned: negatives are out
      if (hn::AllTrue(du, hn::Lt(key, hn::Set(du, static_cast<uint32_t>(p.int_fast_hi))))) {
        return RoundToIntegerCode(a, negative, hn::Set(du, p.code_mask));
      }
    }
  }

  // Normalise to sig in [2^23, 2^24) and top = floor(log2 |x|).
  const MU f32_subnormal = hn::RebindMask(du, hn::Lt(ai, hn::Set(di, 0x800000)));
  const VU as_float = hn::BitCast(du, hn::ConvertTo(df, ai));  // exact below 2^24
  const VU normal = hn::IfThenElse(f32_subnormal, as_float, a);
  const VI top = hn::Sub(
      hn::BitCast(di, hn::ShiftRight<23>(normal)),
      hn::BitCast(di, hn::IfThenElse(f32_subnormal, hn::Set(du, 127 + 149), hn::Set(du, 127))));
  const VU sig = hn::Or(hn::And(normal, hn::Set(du, 0x7FFFFFu)), hn::Set(du, 0x800000u));
  const VI quantum = hn::Max(hn::Sub(top, hn::Set(di, p.quantum_m)), hn::Set(di, p.quantum_min));
  const VI shift = hn::Max(hn::Add(hn::Sub(quantum, top), hn::Set(di, 23)), hn::Zero(di));
  const VU s = hn::BitCast(du, hn::Min(shift, hn::Set(di, 31)));

  // Round sig / 2^s to an integer n.
  VU n = hn::Shr(sig, s);
  const VU unit = hn::Shl(hn::Set(du, 1), s);
  const VU rem = hn::And(sig, hn::Sub(unit, hn::Set(du, 1)));
  const MU inexact = hn::Ne(rem, hn::Zero(du));
  const VU half = hn::Max(hn::ShiftRight<1>(unit), hn::Set(du, 1));  // never 0
  MU up;
  if constexpr (R == kNearestEven) {
    up = hn::Gt(hn::Add(rem, hn::And(n, hn::Set(du, 1))), half);
  } else if constexpr (R == kNearestAway) {
    up = hn::Not(hn::Lt(rem, half));
  } else if constexpr (R == kTowardZero || R == kOdd) {
    up = NoLanes(du);
  } else if constexpr (R == kTowardPositive) {
    up = hn::AndNot(negative, inexact);
  } else if constexpr (R == kTowardNegative) {
    up = hn::And(negative, inexact);
  } else {
    // Top 32 bits of the dropped fraction rem / 2^shift (shift uncapped).
    const VU shift_u = hn::BitCast(du, hn::Min(shift, hn::Set(di, 63)));
    const MU within32 = hn::Lt(shift_u, hn::Set(du, 33));
    const VU left = hn::Shl(sig, hn::Min(hn::Sub(hn::Set(du, 32), shift_u), hn::Set(du, 31)));
    const VU right = hn::Shr(sig, hn::Min(hn::Sub(shift_u, hn::Set(du, 32)), hn::Set(du, 31)));
    VU fraction = hn::IfThenElse(within32, left, right);
    fraction = hn::IfThenZeroElse(hn::Eq(shift_u, hn::Zero(du)), fraction);
    up = hn::Lt(RandomBits(du, p, index), fraction);
  }
  if constexpr (R == kOdd) {
    n = hn::Or(n, hn::IfThenElseZero(inexact, hn::Set(du, 1)));
  } else {
    n = hn::Sub(n, hn::VecFromMask(du, up));
  }

  VU ev;
  if constexpr (kEvents) ev = hn::IfThenElseZero(inexact, hn::Set(du, kInexactBit));
  const MU nan_in = hn::RebindMask(du, hn::Gt(ai, hn::Set(di, 0x7F800000)));
  const MU inf_in = hn::RebindMask(du, hn::Eq(ai, hn::Set(di, 0x7F800000)));
  const MU zero_in = hn::Eq(a, hn::Zero(du));
  const MU daz_in = p.daz ? source_subnormal : NoLanes(du);
  const MU n_zero = hn::Eq(n, hn::Zero(du));
  MU special =
      hn::Or(hn::Or(hn::RebindMask(du, hn::Gt(ai, hn::Set(di, 0x7F7FFFFF))), zero_in), daz_in);
  // A result rounded to zero is already the right code (sign | 0) where the
  // format has a signed zero; elsewhere, or to report underflow, fix it up.
  if (kEvents || !p.plain_zero) special = hn::Or(special, n_zero);

  VU code;
  if (p.is_int) {
    const MU beyond = hn::RebindMask(du, hn::Gt(top, hn::Set(di, p.bits - 1)));
    const VI magnitude = hn::BitCast(di, n);
    const VI value =
        hn::IfThenElse(hn::RebindMask(di, negative), hn::Sub(hn::Zero(di), magnitude), magnitude);
    const VI clamped =
        hn::Min(hn::Max(value, hn::Set(di, p.int_lowest)), hn::Set(di, p.int_highest));
    const MU overflow = hn::Or(beyond, hn::RebindMask(du, hn::Ne(value, clamped)));
    code = hn::And(hn::BitCast(du, clamped), hn::Set(du, p.code_mask));
    special = hn::Or(special, overflow);
    if (hn::AllFalse(du, special)) {
      if constexpr (kEvents) *events = ev;
      return code;
    }
    code = hn::IfThenElse(overflow, BySign(du, negative, p.largest), code);
    if constexpr (kEvents) {
      ev = hn::Or(ev, hn::IfThenElseZero(overflow,
                                         hn::Set(du, kInexactBit | kOverflowBit | kSaturatedBit)));
      ev = hn::Or(ev, hn::IfThenElseZero(hn::AndNot(overflow, n_zero), hn::Set(du, kUnderflowBit)));
    }
  } else {
    const VU field = hn::BitCast(du, hn::Add(quantum, hn::Set(di, p.field_offset)));
    const VU magnitude = hn::Add(hn::ShiftLeftSame(field, p.m), n);
    const VU sign = hn::IfThenElseZero(negative, hn::Set(du, p.sign_mask));
    code = hn::Or(sign, magnitude);
    const MU overflow =
        hn::RebindMask(du, hn::Gt(hn::BitCast(di, magnitude), hn::Set(di, p.max_magnitude)));
    const MU subnormal_out = p.ftz ? hn::Lt(n, hn::Set(du, 1u << p.m)) : NoLanes(du);
    special = hn::Or(special, hn::Or(overflow, subnormal_out));
    if (p.is_signed) {
      if (hn::AllFalse(du, special)) {
        if constexpr (kEvents) *events = ev;
        return code;
      }
    } else {
      special = hn::Or(special, negative);
    }
    const VU zero = BySign(du, negative, p.zero);
    code = hn::IfThenElse(subnormal_out, zero, code);
    if constexpr (kEvents)
      ev = hn::Or(ev,
                  hn::IfThenElseZero(hn::AndNot(n_zero, subnormal_out), hn::Set(du, kFlushedBit)));
    if (p.has_zero) {
      code = hn::IfThenElse(n_zero, zero, code);
      if constexpr (kEvents)
        ev = hn::Or(ev, hn::IfThenElseZero(n_zero, hn::Set(du, kUnderflowBit)));
    } else {
      code = hn::IfThenZeroElse(n_zero, code);  // e8m0: the smallest value 2^-127
    }
    const MU toward_zero =
        hn::RebindMask(du, hn::Ne(BySign(du, negative, p.toward_zero), hn::Zero(du)));
    const MU saturates = hn::And(overflow, toward_zero);
    const MU spills = hn::AndNot(toward_zero, overflow);
    code = hn::IfThenElse(saturates, BySign(du, negative, p.largest), code);
    code = hn::IfThenElse(spills, BySign(du, negative, p.overflow), code);
    if constexpr (kEvents) {
      ev = hn::Or(ev, hn::IfThenElseZero(saturates,
                                         hn::Set(du, kInexactBit | kOverflowBit | kSaturatedBit)));
      ev = hn::Or(ev, hn::IfThenElseZero(spills, BySign(du, negative, p.overflow_events)));
    }
    if (!p.is_signed) {  // e8m0: a negative number is NaN
      code = hn::IfThenElse(negative, hn::Set(du, p.nan[1]), code);
      if constexpr (kEvents) ev = hn::IfThenElse(negative, hn::Set(du, kInexactBit), ev);
    }
  }
  // Special inputs last: they override whatever the arithmetic made of them.
  const VU zero = BySign(du, negative, p.zero);
  code = hn::IfThenElse(hn::Or(zero_in, daz_in), zero, code);
  code = hn::IfThenElse(inf_in, BySign(du, negative, p.inf), code);
  VU nan = BySign(du, negative, p.nan);
  if (p.keep_payload) {
    const VU payload = hn::ShiftRightSame(hn::And(a, hn::Set(du, 0x7FFFFFu)), 23 - p.m);
    nan = hn::Or(
        hn::Or(hn::IfThenElseZero(negative, hn::Set(du, p.sign_mask)), hn::Set(du, p.nan_quiet)),
        payload);
  }
  code = hn::IfThenElse(nan_in, nan, code);
  if constexpr (kEvents) {
    ev = hn::IfThenZeroElse(zero_in, ev);
    ev = hn::IfThenElse(daz_in, hn::Set(du, kFlushedBit | kInexactBit), ev);
    ev = hn::IfThenElse(inf_in, BySign(du, negative, p.inf_events), ev);
    ev = hn::IfThenElse(nan_in, hn::Set(du, p.nan_events), ev);
    *events = ev;
  }
  return code;
}

// One vector of inputs as float32 bits, and which of them are subnormal in
// their own format.
struct Loaded {
  VU bits;
  MU subnormal;
};

HWY_INLINE Loaded LoadSource(const EncodePlan& p, const void* in, size_t i) {
  const DU du;
  const DI di;
  const DF df;
  if (p.source == Source::kFloat32) {
    const VU bits = hn::LoadU(du, static_cast<const uint32_t*>(in) + i);
    if (!p.daz) return {bits, NoLanes(du)};
    const VI a = hn::BitCast(di, hn::And(bits, hn::Set(du, 0x7FFFFFFFu)));
    const auto subnormal = hn::And(hn::Lt(a, hn::Set(di, 0x800000)), hn::Gt(a, hn::Zero(di)));
    return {bits, hn::RebindMask(du, subnormal)};
  }
  const hn::Rebind<uint16_t, DU> d16;
  const VU h = hn::PromoteTo(du, hn::LoadU(d16, static_cast<const uint16_t*>(in) + i));
  if (p.source == Source::kBFloat16) {
    const VU bits = hn::ShiftLeft<16>(h);
    const VI a = hn::BitCast(di, hn::And(bits, hn::Set(du, 0x7FFFFFFFu)));
    const auto subnormal = hn::And(hn::Lt(a, hn::Set(di, 0x800000)), hn::Gt(a, hn::Zero(di)));
    return {bits, hn::RebindMask(du, subnormal)};
  }
  // fp16: exact widening in integer arithmetic (no NaN quieting).
  const VU sign = hn::ShiftLeft<16>(hn::And(h, hn::Set(du, 0x8000u)));
  const VU mag = hn::And(h, hn::Set(du, 0x7FFFu));
  const MU special = hn::Gt(mag, hn::Set(du, 0x7BFFu));
  const MU small = hn::Lt(mag, hn::Set(du, 0x400u));
  VU bits = hn::Add(hn::ShiftLeft<13>(mag),
                    hn::IfThenElse(special, hn::Set(du, 0x70000000u), hn::Set(du, 0x38000000u)));
  const VU sub = hn::BitCast(
      du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, mag)), hn::Set(df, 1.0f / 16777216.0f)));
  bits = hn::Or(sign, hn::IfThenElse(small, sub, bits));
  return {bits, hn::AndNot(hn::Eq(mag, hn::Zero(du)), small)};
}

// Stores 2N codes (c0 first) at element `i` of `out` in the plan's storage.
template <Storage S>
HWY_INLINE void StoreCodes(VU c0, VU c1, uint8_t* out, size_t i) {
  const DU du;
  const DI di;
  const size_t N = hn::Lanes(du);
  switch (S) {
    case Storage::kWord:
      hn::StoreU(c0, du, reinterpret_cast<uint32_t*>(out) + i);
      hn::StoreU(c1, du, reinterpret_cast<uint32_t*>(out) + i + N);
      return;
    case Storage::kHalf: {
      const hn::Rebind<uint16_t, DU> d16;
      hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, c0)), d16, reinterpret_cast<uint16_t*>(out) + i);
      hn::StoreU(hn::DemoteTo(d16, hn::BitCast(di, c1)), d16,
                 reinterpret_cast<uint16_t*>(out) + i + N);
      return;
    }
    case Storage::kByte: {
      const hn::Rebind<uint8_t, DU> d8;
      hn::StoreU(hn::DemoteTo(d8, hn::BitCast(di, c0)), d8, out + i);
      hn::StoreU(hn::DemoteTo(d8, hn::BitCast(di, c1)), d8, out + i + N);
      return;
    }
    case Storage::kNibble: {
#if HWY_TARGET == HWY_SCALAR
      out[i / 2] = static_cast<uint8_t>(hn::GetLane(c0) | (hn::GetLane(c1) << 4));
#else
      // Lanes 2j and 2j+1 -> one byte in lane 2j: c[2j] | c[2j+1] << 4.
      const hn::Repartition<uint64_t, DU> d64;
      const VU p0 =
          hn::BitCast(du, hn::Or(hn::BitCast(d64, c0), hn::ShiftRight<28>(hn::BitCast(d64, c0))));
      const VU p1 =
          hn::BitCast(du, hn::Or(hn::BitCast(d64, c1), hn::ShiftRight<28>(hn::BitCast(d64, c1))));
      const VU bytes = hn::ConcatEven(du, p1, p0);
      const hn::Rebind<uint8_t, DU> d8;
      hn::StoreU(hn::DemoteTo(d8, hn::BitCast(di, hn::And(bytes, hn::Set(du, 0xFFu)))), d8,
                 out + i / 2);
#endif
      return;
    }
  }
}

#undef LOWP_HAVE_F16C
#if HWY_TARGET <= HWY_AVX2 && !defined(HWY_DISABLE_F16C)
#define LOWP_HAVE_F16C 1
// vcvtps2ph: nearest-even fp16 with payload-keeping NaNs; the canonical NaN
// policy is a select on the (rare) vectors that hold a NaN.
HWY_INLINE void F16cPair(const EncodePlan& p, const float* in, size_t i, uint8_t* out) {
  const DU du;
  const DF df;
  const hn::Rebind<hwy::float16_t, DF> dh;
  const hn::Rebind<uint16_t, DF> d16;
  const size_t N = hn::Lanes(du);
  const auto x0 = hn::LoadU(df, in + i);
  const auto x1 = hn::LoadU(df, in + i + N);
  auto h0 = hn::BitCast(d16, hn::DemoteTo(dh, x0));
  auto h1 = hn::BitCast(d16, hn::DemoteTo(dh, x1));
  if (!p.keep_payload && HWY_UNLIKELY(!hn::AllFalse(df, hn::Or(hn::IsNaN(x0), hn::IsNaN(x1))))) {
    const hn::RebindToSigned<DU> di;
    const auto fix = [&](hn::Vec<DF> x, hn::Vec<decltype(d16)> h) {
      const VU bits = hn::BitCast(du, x);
      const VU canonical =
          hn::Or(hn::ShiftRight<16>(hn::And(bits, hn::Set(du, 0x80000000u))), hn::Set(du, 0x7E00u));
      const VU fixed =
          hn::IfThenElse(hn::RebindMask(du, hn::IsNaN(x)), canonical, hn::PromoteTo(du, h));
      return hn::DemoteTo(d16, hn::BitCast(di, fixed));
    };
    h0 = fix(x0, h0);
    h1 = fix(x1, h1);
  }
  uint16_t* dest = reinterpret_cast<uint16_t*>(out) + i;
  if (p.stream) {  // the caller aligned the output
    hn::Stream(h0, d16, dest);
    hn::Stream(h1, d16, dest + N);
  } else {
    hn::StoreU(h0, d16, dest);
    hn::StoreU(h1, d16, dest + N);
  }
}
#else
#define LOWP_HAVE_F16C 0
#endif

// Calls f(std::integral_constant<int, R>) for the rounding mode R.
template <class F>
HWY_INLINE void WithRounding(int rounding, F f) {
  switch (rounding) {
    case kNearestEven:
      return f(std::integral_constant<int, kNearestEven>());
    case kNearestAway:
      return f(std::integral_constant<int, kNearestAway>());
    case kTowardZero:
      return f(std::integral_constant<int, kTowardZero>());
    case kTowardPositive:
      return f(std::integral_constant<int, kTowardPositive>());
    case kTowardNegative:
      return f(std::integral_constant<int, kTowardNegative>());
    case kOdd:
      return f(std::integral_constant<int, kOdd>());
    default:
      return f(std::integral_constant<int, kStochastic>());
  }
}

// Nearest-even codes of float32 inputs by one of EncodeVec's fast rules
// (grid, fast or integer, whichever the plan enables first), with the plan's
// constants hoisted into registers: EncodeLoop's inner loop keeps all of
// EncodeVec live and reloads them. Each rule gives `*ok` false for a lane it
// does not cover; a pair of vectors with such a lane takes EncodeVec, so the
// codes are EncodeVec's bit for bit.
struct FastRule {
  enum Kind { kNone, kGrid, kNormal, kInteger } kind = kNone;
  explicit FastRule(const EncodePlan& p)
      : kind(p.daz || p.source != Source::kFloat32 ? kNone
             : p.grid_fast                        ? kGrid
             : p.fast                             ? kNormal
             : p.int_fast_hi != 0                 ? kInteger
                                                  : kNone),
        m(p.m),
        sign_shift(p.bits - 1),
        fast_shift(p.fast_shift),
        is_signed(p.is_signed),
        tie_always(p.fast_tie_always),
        min_field(hn::Set(DI(), p.grid_min_field)),
        c_low(hn::Set(DI(), static_cast<int32_t>(((23u - p.m) << 23) | 0x400000u))),
        rebias(hn::Set(DI(), static_cast<int32_t>((static_cast<uint32_t>(p.grid_min_field) << p.m) +
                                                  0x400000u))),
        twice_max(hn::Set(DF(), p.grid_max + p.grid_max)),
        magnitude_limit(hn::Set(DI(), static_cast<int32_t>(p.max_magnitude + 1))),
        fast_lo(hn::Set(DI(), p.fast_lo)),
        fast_hi(hn::Set(DI(), p.fast_hi)),
        fast_add(hn::Set(DU(), p.fast_add)),
        int_hi(hn::Set(DU(), static_cast<uint32_t>(p.int_fast_hi))),
        code_mask(hn::Set(DU(), p.code_mask)),
        nan_negative(hn::Set(DU(), p.nan[1])) {}
  int m, sign_shift, fast_shift;
  bool is_signed, tie_always;
  VI min_field, c_low, rebias;
  hn::Vec<DF> twice_max;
  VI magnitude_limit, fast_lo, fast_hi;
  VU fast_add, int_hi, code_mask, nan_negative;

  template <Kind K>
  HWY_INLINE VU Code(VU bits, MU* ok) const {
    const DU du;
    const DI di;
    const DF df;
    const VU a = hn::And(bits, hn::Set(du, 0x7FFFFFFFu));
    if constexpr (K == kGrid) {  // EncodeVec's grid_fast branch
      const VI field = hn::Max(hn::BitCast(di, hn::ShiftRight<23>(a)), min_field);
      const auto c = hn::BitCast(df, hn::Add(hn::ShiftLeft<23>(field), c_low));
      const auto ax = hn::BitCast(df, a);
      const VI n = hn::BitCast(di, hn::And(hn::BitCast(du, hn::Add(ax, c)), hn::Set(du, 0x7FFFFFu)));
      const VI magnitude = hn::Sub(hn::Add(hn::ShiftLeftSame(field, m), n), rebias);
      *ok = hn::And(hn::RebindMask(du, hn::Le(ax, twice_max)),
                    hn::RebindMask(du, hn::Lt(magnitude, magnitude_limit)));
      return hn::Or(hn::BitCast(du, magnitude),
                    hn::ShiftLeftSame(hn::ShiftRight<31>(bits), sign_shift));
    } else if constexpr (K == kNormal) {  // EncodeVec's fast branch
      const VI ai = hn::BitCast(di, a);
      const auto in_range = hn::AndNot(hn::Lt(ai, fast_lo), hn::Lt(ai, fast_hi));
      const VU tie = tie_always ? hn::Set(du, 1)
                                : hn::And(hn::ShiftRightSame(a, fast_shift), hn::Set(du, 1));
      const VU magnitude = hn::ShiftRightSame(hn::Add(hn::Add(a, fast_add), tie), fast_shift);
      if (is_signed) {
        *ok = hn::RebindMask(du, in_range);
        return hn::Or(magnitude, hn::ShiftLeftSame(hn::ShiftRight<31>(bits), sign_shift));
      }
      // Unsigned (e8m0): a negative number, not zero, inf or NaN, is NaN.
      const MU negative = hn::RebindMask(du, hn::Lt(hn::BitCast(di, bits), hn::Zero(di)));
      const MU negative_finite = hn::And(
          negative, hn::RebindMask(du, hn::And(hn::Gt(ai, hn::Zero(di)),
                                               hn::Lt(ai, hn::Set(di, 0x7F800000)))));
      *ok = hn::Or(hn::AndNot(negative, hn::RebindMask(du, in_range)), negative_finite);
      return hn::IfThenElse(negative, nan_negative, magnitude);
    } else {  // EncodeVec's integer branch
      const MU negative = hn::RebindMask(du, hn::Lt(hn::BitCast(di, bits), hn::Zero(di)));
      *ok = hn::Lt(is_signed ? a : bits, int_hi);
      return RoundToIntegerCode(a, negative, code_mask);
    }
  }
};

// Elements [0, returned) of a float32 input by rule K, two vectors a step.
template <FastRule::Kind K, Storage S>
size_t FastPairs(const EncodePlan& p, const FastRule& rule, const float* in, size_t count,
                 uint64_t first, uint8_t* out) {
  const DU du;
  const size_t N = hn::Lanes(du);
  const auto* bits = reinterpret_cast<const uint32_t*>(in);
  size_t i = 0;
  for (; i + 2 * N <= count; i += 2 * N) {
    const VU b0 = hn::LoadU(du, bits + i);
    const VU b1 = hn::LoadU(du, bits + i + N);
    MU ok0, ok1;
    VU c0 = rule.Code<K>(b0, &ok0);
    VU c1 = rule.Code<K>(b1, &ok1);
    if (HWY_UNLIKELY(!hn::AllTrue(du, hn::And(ok0, ok1)))) {
      c0 = EncodeVec<kNearestEven, false>(p, b0, NoLanes(du), first + i, nullptr);
      c1 = EncodeVec<kNearestEven, false>(p, b1, NoLanes(du), first + i + N, nullptr);
    }
    StoreCodes<S>(c0, c1, out, i);
  }
  return i;
}

// Byte codes of four vectors a step, [0, returned): one byte shuffle and one
// lane permutation per four vectors instead of three shuffles per vector.
// The four vectors' codes (each below 256) are or-ed into one: lane j holds
// the codes of elements j, N + j, 2N + j, 3N + j. The byte shuffle
// transposes each 128-bit block's 4 x 4 bytes, so that lane 4b + t holds
// elements tN + 4b .. tN + 4b + 3; the permutation puts lane 4b + t at
// (4b + tN) / 4, i.e. output lane k takes lane 4 (k mod N/4) + k / (N/4).
template <FastRule::Kind K>
size_t FastQuads(const EncodePlan& p, const FastRule& rule, const float* in, size_t count,
                 uint64_t first, uint8_t* out) {
#if HWY_TARGET == HWY_SCALAR
  (void)p, (void)rule, (void)in, (void)count, (void)first, (void)out;
  return 0;
#else
  const DU du;
  const DI di;
  const hn::Repartition<uint8_t, DU> d8;
  const size_t N = hn::Lanes(du);
  if (N < 4) return 0;
  const size_t blocks = N / 4;
  HWY_ALIGN int32_t lane_index[kMaxLanes];
  for (size_t k = 0; k < N; ++k) lane_index[k] = static_cast<int32_t>(k % blocks * 4 + k / blocks);
  const auto permute = hn::SetTableIndices(du, lane_index);
  HWY_ALIGN uint8_t byte_index[16];
  for (int o = 0; o < 16; ++o) byte_index[o] = static_cast<uint8_t>(o % 4 * 4 + o / 4);
  const auto transpose = hn::LoadDup128(d8, byte_index);
  const auto* bits = reinterpret_cast<const uint32_t*>(in);
  size_t i = 0;
  for (; i + 4 * N <= count; i += 4 * N) {
    VU c[4];
    MU ok[4];
    for (size_t v = 0; v < 4; ++v) c[v] = rule.Code<K>(hn::LoadU(du, bits + i + v * N), &ok[v]);
    if (HWY_UNLIKELY(!hn::AllTrue(du, hn::And(hn::And(ok[0], ok[1]), hn::And(ok[2], ok[3]))))) {
      for (size_t v = 0; v < 4; ++v) {
        c[v] = EncodeVec<kNearestEven, false>(p, hn::LoadU(du, bits + i + v * N), NoLanes(du),
                                              first + i + v * N, nullptr);
      }
    }
    const VU packed = hn::Or(hn::Or(c[0], hn::ShiftLeft<8>(c[1])),
                             hn::Or(hn::ShiftLeft<16>(c[2]), hn::ShiftLeft<24>(c[3])));
    const VU blocked = hn::BitCast(du, hn::TableLookupBytes(hn::BitCast(d8, packed), transpose));
    hn::StoreU(hn::BitCast(d8, hn::TableLookupLanes(blocked, permute)), d8, out + i);
  }
  (void)di;
  return i;
#endif
}

template <Storage S>
size_t FastLoop(const EncodePlan& p, const void* in, size_t count, uint64_t first, uint8_t* out) {
  const FastRule rule(p);
  const auto* x = static_cast<const float*>(in);
  size_t i = 0;
  switch (rule.kind) {
    case FastRule::kGrid:
      if constexpr (S == Storage::kByte) i = FastQuads<FastRule::kGrid>(p, rule, x, count, first, out);
      return i + FastPairs<FastRule::kGrid, S>(p, rule, x + i, count - i, first + i, out + i);
    case FastRule::kNormal:
      if constexpr (S == Storage::kByte)
        i = FastQuads<FastRule::kNormal>(p, rule, x, count, first, out);
      return i + FastPairs<FastRule::kNormal, S>(p, rule, x + i, count - i, first + i, out + i);
    case FastRule::kInteger:
      if constexpr (S == Storage::kByte)
        i = FastQuads<FastRule::kInteger>(p, rule, x, count, first, out);
      return i + FastPairs<FastRule::kInteger, S>(p, rule, x + i, count - i, first + i, out + i);
    case FastRule::kNone:
      break;
  }
  return 0;
}

// The plan is copied into a local: the output is uint8_t, which may alias
// anything, so a plan behind a reference would be reloaded after every store.
template <int R, Storage S>
void EncodeLoop(const EncodePlan& plan, const void* in, size_t count, uint64_t first,
                uint8_t* out) {
  const EncodePlan p = plan;
  const DU du;
  const size_t N = hn::Lanes(du);
  size_t i = 0;
#if LOWP_HAVE_F16C
  if (R == kNearestEven && S == Storage::kHalf && p.f16c) {
    for (; i + 2 * N <= count; i += 2 * N) {
      F16cPair(p, static_cast<const float*>(in), i, out);
    }
  }
#endif
#if HWY_TARGET != HWY_SCALAR
  if (R == kNearestEven && S == Storage::kHalf && p.bf16) {
    // The rounded bf16 is the high half of bits + 0x7FFF + (bit 16); NaNs
    // (rare) take the general path.
    const hn::Repartition<uint16_t, DU> d16;
    const DF df;
    const auto* x = static_cast<const float*>(in);
    for (; i + 2 * N <= count; i += 2 * N) {
      const auto f0 = hn::LoadU(df, x + i);
      const auto f1 = hn::LoadU(df, x + i + N);
      if (HWY_UNLIKELY(!hn::AllFalse(df, hn::Or(hn::IsNaN(f0), hn::IsNaN(f1))))) break;
      const VU b0 = hn::BitCast(du, f0);
      const VU b1 = hn::BitCast(du, f1);
      const VU r0 = hn::Add(hn::Add(b0, hn::Set(du, 0x7FFFu)),
                            hn::And(hn::ShiftRight<16>(b0), hn::Set(du, 1)));
      const VU r1 = hn::Add(hn::Add(b1, hn::Set(du, 0x7FFFu)),
                            hn::And(hn::ShiftRight<16>(b1), hn::Set(du, 1)));
      const auto bf16 = hn::ConcatOdd(d16, hn::BitCast(d16, r1), hn::BitCast(d16, r0));
      uint16_t* dest = reinterpret_cast<uint16_t*>(out) + i;
      if (p.stream) {
        hn::Stream(bf16, d16, dest);
      } else {
        hn::StoreU(bf16, d16, dest);
      }
    }
  }
#endif
  if (p.stream) hwy::FlushStream();
  if constexpr (R == kNearestEven && (S == Storage::kByte || S == Storage::kNibble)) {
    i = FastLoop<S>(p, in, count, first, out);
  }
  for (; i + 2 * N <= count; i += 2 * N) {
    const Loaded x0 = LoadSource(p, in, i);
    const Loaded x1 = LoadSource(p, in, i + N);
    const VU c0 = EncodeVec<R, false>(p, x0.bits, x0.subnormal, first + i, nullptr);
    const VU c1 = EncodeVec<R, false>(p, x1.bits, x1.subnormal, first + i + N, nullptr);
    StoreCodes<S>(c0, c1, out, i);
  }
  if (i == count) return;
  // The tail through buffers of 2N elements (zeros past the end).
  const size_t rest = count - i;
  const size_t unit = p.source == Source::kFloat32 ? 4 : 2;
  HWY_ALIGN uint8_t input[2 * kMaxLanes * 4] = {};
  HWY_ALIGN uint8_t output[2 * kMaxLanes * 4] = {};
  memcpy(input, static_cast<const uint8_t*>(in) + i * unit, rest * unit);
  const Loaded x0 = LoadSource(p, input, 0);
  const Loaded x1 = LoadSource(p, input, N);
  StoreCodes<S>(EncodeVec<R, false>(p, x0.bits, x0.subnormal, first + i, nullptr),
                EncodeVec<R, false>(p, x1.bits, x1.subnormal, first + i + N, nullptr), output, 0);
  size_t bytes = rest * (S == Storage::kHalf ? 2 : S == Storage::kWord ? 4 : 1);
  size_t offset = i * (S == Storage::kHalf ? 2 : S == Storage::kWord ? 4 : 1);
  if (S == Storage::kNibble) {
    bytes = (rest + 1) / 2;
    offset = i / 2;
    if (rest % 2 != 0) output[bytes - 1] &= 0x0F;
  }
  memcpy(out + offset, output, bytes);
}

template <int R>
void EncodeStorage(const EncodePlan& p, const void* in, size_t count, uint64_t first,
                   uint8_t* out) {
  switch (p.storage) {
    case Storage::kNibble:
      return EncodeLoop<R, Storage::kNibble>(p, in, count, first, out);
    case Storage::kByte:
      return EncodeLoop<R, Storage::kByte>(p, in, count, first, out);
    case Storage::kHalf:
      return EncodeLoop<R, Storage::kHalf>(p, in, count, first, out);
    case Storage::kWord:
      return EncodeLoop<R, Storage::kWord>(p, in, count, first, out);
  }
}

void Encode(const EncodePlan& p, const void* in, size_t count, uint64_t first, uint8_t* out) {
  WithRounding(p.rounding,
               [&](auto r) { EncodeStorage<decltype(r)::value>(p, in, count, first, out); });
}

// codes -> float32 bits, arithmetic formats (not the table ones).
HWY_INLINE VU DecodeVec(const DecodePlan& p, VU code) {
  const DU du;
  const DI di;
  const DF df;
  if (p.is_int) {
    VI v = hn::BitCast(di, code);
    if (p.is_signed) {
      v = hn::ShiftRightSame(hn::ShiftLeftSame(v, 32 - p.bits), 32 - p.bits);
    }
    return hn::BitCast(du, hn::ConvertTo(df, v));
  }
  if (p.shift_only) return hn::ShiftLeftSame(code, 23 - p.m);
  const VU mag = hn::And(code, hn::Set(du, p.mag_mask));
  const VU sign = hn::ShiftLeftSame(hn::And(code, hn::Set(du, p.sign_mask)), 32 - p.bits);
  const VU field = hn::ShiftRightSame(mag, p.m);
  VU bits = hn::Add(hn::ShiftLeftSame(mag, 23 - p.m), hn::Set(du, p.rebias));
  const MU subnormal = hn::Eq(field, hn::Zero(du));
  const VU sub = hn::BitCast(du, hn::Mul(hn::ConvertTo(df, hn::BitCast(di, mag)),
                                         hn::BitCast(df, hn::Set(du, p.subnormal_scale))));
  bits = hn::Or(sign, hn::IfThenElse(subnormal, sub, bits));
  switch (static_cast<SpecialEncoding>(p.specials)) {
    case SpecialEncoding::kIeee: {
      const MU special = hn::Eq(field, hn::Set(du, p.all_ones_field));
      const VU payload = hn::ShiftLeftSame(hn::And(mag, hn::Set(du, (1u << p.m) - 1)), 23 - p.m);
      return hn::IfThenElse(special, hn::Or(hn::Or(sign, hn::Set(du, 0x7F800000u)), payload), bits);
    }
    case SpecialEncoding::kFiniteOnly:
      return hn::IfThenElse(hn::Eq(mag, hn::Set(du, p.mag_mask)),
                            hn::Or(sign, hn::Set(du, 0x7FC00000u)), bits);
    case SpecialEncoding::kNegativeZeroIsNan:
      return hn::IfThenElse(hn::Eq(code, hn::Set(du, p.sign_mask)), hn::Set(du, 0xFFC00000u), bits);
    case SpecialEncoding::kNone:
      break;
  }
  return bits;
}

// out[i] = v for an `out` at any byte address (the callers' arrays need not
// be float-aligned: tests/kernels_test.cc Shapes.LengthsAndAlignments).
HWY_INLINE void StoreFloat(float* out, size_t i, float v) { memcpy(out + i, &v, sizeof(v)); }

void Decode(const DecodePlan& plan, const uint8_t* in, size_t count, float* out) {
  const DecodePlan p = plan;
  if (p.use_table) {
    if (p.storage == Storage::kNibble) {
      for (size_t j = 0; j < count / 2; ++j) {
        StoreFloat(out, 2 * j, p.table[in[j] & 15]);
        StoreFloat(out, 2 * j + 1, p.table[in[j] >> 4]);
      }
      if (count % 2 != 0) StoreFloat(out, count - 1, p.table[in[count / 2] & 15]);
    } else {
      for (size_t j = 0; j < count; ++j) StoreFloat(out, j, p.table[in[j]]);
    }
    return;
  }
  const DU du;
  const DF df;
  const size_t N = hn::Lanes(du);
  const hn::Rebind<uint16_t, DU> d16;
  const hn::Rebind<uint8_t, DU> d8;
  size_t i = 0;
#if LOWP_HAVE_F16C
  if (p.f16c) {
    // vcvtph2ps, except that it quiets signalling NaNs: a vector with a NaN
    // is decoded by the arithmetic below instead.
    const hn::Rebind<hwy::float16_t, DF> dh;
    const auto* halves = reinterpret_cast<const uint16_t*>(in);
    for (; i + N <= count; i += N) {
      const auto x = hn::PromoteTo(df, hn::BitCast(dh, hn::LoadU(d16, halves + i)));
      if (HWY_UNLIKELY(!hn::AllFalse(df, hn::IsNaN(x)))) break;
      if (p.stream) {
        hn::Stream(x, df, out + i);
      } else {
        hn::StoreU(x, df, out + i);
      }
    }
  }
#endif
  for (; i + N <= count; i += N) {
    VU code;
    if (p.storage == Storage::kByte) {
      code = hn::PromoteTo(du, hn::LoadU(d8, in + i));
    } else if (p.storage == Storage::kHalf) {
      code = hn::PromoteTo(du, hn::LoadU(d16, reinterpret_cast<const uint16_t*>(in) + i));
    } else {
      code = hn::LoadU(du, reinterpret_cast<const uint32_t*>(in) + i);
    }
    const auto value = hn::BitCast(df, DecodeVec(p, code));
    if (p.stream) {
      hn::Stream(value, df, out + i);
    } else {
      hn::StoreU(value, df, out + i);
    }
  }
  if (p.stream) hwy::FlushStream();
  for (; i < count; ++i) {  // the tail, one lane at a time
    HWY_ALIGN uint32_t code[kMaxLanes] = {};
    // Codes may start at any byte (a tensor file's data): copied, not read
    // through a uint16_t or uint32_t pointer (a misaligned load, UB).
    if (p.storage == Storage::kByte) {
      code[0] = in[i];
    } else if (p.storage == Storage::kHalf) {
      uint16_t half;
      memcpy(&half, in + 2 * i, sizeof(half));
      code[0] = half;
    } else {
      memcpy(&code[0], in + 4 * i, sizeof(uint32_t));
    }
    HWY_ALIGN float value[kMaxLanes];
    hn::Store(hn::BitCast(df, DecodeVec(p, hn::Load(du, code))), df, value);
    StoreFloat(out, i, value[0]);
  }
}

// Encodes float32 inputs N at a time with events and calls
// visit(i, lanes, inputs, code, events) for each vector (lanes past the end
// of the array hold +0).
template <int R, class Visit>
void ForEachVectorWithEvents(const EncodePlan& p, const float* in, size_t count, uint64_t first,
                             Visit visit) {
  const size_t N = hn::Lanes(DU());
  HWY_ALIGN float inputs[kMaxLanes];
  for (size_t i = 0; i < count; i += N) {
    const size_t lanes = count - i < N ? count - i : N;
    memset(inputs, 0, sizeof(inputs));
    memcpy(inputs, in + i, lanes * sizeof(float));
    const Loaded x = LoadSource(p, inputs, 0);
    VU events;
    const VU code = EncodeVec<R, true>(p, x.bits, x.subnormal, first + i, &events);
    visit(i, lanes, inputs, code, events);
  }
}

// Encodes, decodes back and accumulates the error of `count` inputs.
#if HWY_TARGET == HWY_SCALAR
void Measure(const EncodePlan& p, const DecodePlan& dp, const float* in, size_t count,
             uint64_t first, ConversionError* e) {
  const DU du;
  const DF df;
  HWY_ALIGN uint32_t codes[kMaxLanes];
  HWY_ALIGN uint32_t events[kMaxLanes];
  HWY_ALIGN float values[kMaxLanes];
  WithRounding(p.rounding, [&](auto r) {
    ForEachVectorWithEvents<decltype(r)::value>(
        p, in, count, first, [&](size_t, size_t lanes, const float* inputs, VU code, VU ev) {
          hn::Store(code, du, codes);
          hn::Store(ev, du, events);
          if (dp.use_table) {
            for (size_t k = 0; k < lanes; ++k) values[k] = dp.table[codes[k]];
          } else {
            hn::Store(hn::BitCast(df, DecodeVec(dp, code)), df, values);
          }
          Accumulate(inputs, values, events, lanes, e);
        });
  });
  e->error.count += count;
}
#else
// Per-lane counters and float64 sums, reduced once at the end: the result
// equals Accumulate's but for the order of the float64 additions.
template <int R>
void MeasureLoop(const EncodePlan& p, const DecodePlan& dp, const float* in, size_t count,
                 uint64_t first, ConversionError* e) {
  const DU du;
  const DI di;
  const DF df;
  const hn::Repartition<double, DF> dd;
  const hn::Half<DF> dh;
  const size_t N = hn::Lanes(du);
  using VD = hn::Vec<decltype(dd)>;
  VD squared_error[2] = {hn::Zero(dd), hn::Zero(dd)};
  VD squared_input[2] = {hn::Zero(dd), hn::Zero(dd)};
  VD max_error = hn::Zero(dd);
  VU counters[9];
  uint64_t totals[9] = {};
  for (VU& c : counters) c = hn::Zero(du);
  // Event bits 0..6 (formats/reference.h), then infinite inputs and measured.
  const auto flush = [&] {
    HWY_ALIGN uint32_t lanes[kMaxLanes];
    for (int k = 0; k < 9; ++k) {
      hn::Store(counters[k], du, lanes);
      for (size_t j = 0; j < N; ++j) totals[k] += lanes[j];
      counters[k] = hn::Zero(du);
    }
  };
  HWY_ALIGN float tail[kMaxLanes];
  size_t since_flush = 0;
  for (size_t i = 0; i < count; i += N) {
    const float* x_ptr = in + i;
    const size_t lanes = count - i < N ? count - i : N;
    if (lanes < N) {  // the tail: zeros past the end, not counted below
      memset(tail, 0, sizeof(tail));
      memcpy(tail, in + i, lanes * sizeof(float));
      x_ptr = tail;
    }
    const Loaded loaded = LoadSource(p, x_ptr, 0);
    VU ev;
    const VU code = EncodeVec<R, true>(p, loaded.bits, loaded.subnormal, first + i, &ev);
    const auto x = hn::BitCast(df, loaded.bits);
    const auto q = dp.use_table ? hn::GatherIndex(df, dp.table, hn::BitCast(di, code))
                                : hn::BitCast(df, DecodeVec(dp, code));
    const auto valid = hn::RebindMask(df, hn::FirstN(du, lanes));
    const auto measured = hn::And(valid, hn::And(hn::IsFinite(x), hn::IsFinite(q)));
    ev = hn::IfThenElseZero(hn::RebindMask(du, valid), ev);
    for (int k = 0; k < 7; ++k) {
      counters[k] = hn::Add(counters[k], hn::And(hn::ShiftRightSame(ev, k), hn::Set(du, 1)));
    }
    counters[7] =
        hn::Sub(counters[7], hn::VecFromMask(du, hn::RebindMask(du, hn::And(valid, hn::IsInf(x)))));
    counters[8] = hn::Sub(counters[8], hn::VecFromMask(du, hn::RebindMask(du, measured)));
    const auto xm = hn::IfThenElseZero(measured, x);
    const auto qm = hn::IfThenElseZero(measured, q);
    const VD x_half[2] = {hn::PromoteTo(dd, hn::LowerHalf(dh, xm)),
                          hn::PromoteTo(dd, hn::UpperHalf(dh, xm))};
    const VD q_half[2] = {hn::PromoteTo(dd, hn::LowerHalf(dh, qm)),
                          hn::PromoteTo(dd, hn::UpperHalf(dh, qm))};
    for (int h = 0; h < 2; ++h) {
      const VD error = hn::Sub(q_half[h], x_half[h]);
      squared_error[h] = hn::MulAdd(error, error, squared_error[h]);
      squared_input[h] = hn::MulAdd(x_half[h], x_half[h], squared_input[h]);
      max_error = hn::Max(max_error, hn::Abs(error));
    }
    if (++since_flush == (size_t{1} << 24)) {
      flush();
      since_flush = 0;
    }
  }
  flush();
  HWY_ALIGN double lanes[kMaxLanes];
  const auto sum = [&](const VD(&v)[2]) {
    hn::Store(hn::Add(v[0], v[1]), dd, lanes);
    double total = 0;
    for (size_t j = 0; j < hn::Lanes(dd); ++j) total += lanes[j];
    return total;
  };
  e->error.sum_squared_error += sum(squared_error);
  e->error.sum_squared_input += sum(squared_input);
  hn::Store(max_error, dd, lanes);
  for (size_t j = 0; j < hn::Lanes(dd); ++j) {
    if (lanes[j] > e->error.max_abs_error) e->error.max_abs_error = lanes[j];
  }
  e->inexact += totals[0];
  e->overflow += totals[1];
  e->saturated += totals[2];
  e->flushed += totals[3];
  e->underflow += totals[4];
  e->error.nan_inputs += totals[5];
  e->nan_replaced += totals[6];
  e->error.inf_inputs += totals[7];
  e->error.measured += totals[8];
  // The rest of the elements: x finite and its result inf or NaN.
  e->error.nonfinite_outputs += count - totals[5] - totals[7] - totals[8];
  e->error.count += count;
}

void Measure(const EncodePlan& p, const DecodePlan& dp, const float* in, size_t count,
             uint64_t first, ConversionError* e) {
  WithRounding(p.rounding,
               [&](auto r) { MeasureLoop<decltype(r)::value>(p, dp, in, count, first, e); });
}
#endif

// float32 -> codes and events, unpacked (tests of the lane logic).
template <int R>
HWY_INLINE hn::Vec<DF> RoundVec(const EncodePlan& p, const DecodePlan& dp, const float* x_ptr,
                                uint64_t index) {
  const DU du;
  const DI di;
  const DF df;
  const auto x = hn::LoadU(df, x_ptr);
  if (R == kNearestEven && p.storage == Storage::kHalf && (p.f16c || p.bf16) &&
      HWY_LIKELY(hn::AllFalse(df, hn::IsNaN(x)))) {
#if LOWP_HAVE_F16C
    if (p.f16c) {
      const hn::Rebind<hwy::float16_t, DF> dh;
      return hn::PromoteTo(df, hn::DemoteTo(dh, x));
    }
#endif
    if (p.bf16) {
      const VU b = hn::BitCast(du, x);
      const VU r =
          hn::Add(hn::Add(b, hn::Set(du, 0x7FFFu)), hn::And(hn::ShiftRight<16>(b), hn::Set(du, 1)));
      return hn::BitCast(df, hn::And(r, hn::Set(du, 0xFFFF0000u)));
    }
  }
  if (R == kNearestEven && p.grid_fast) {
    hn::Vec<DF> r;
    if (HWY_LIKELY(GridRound(p, x, &r))) {
      return hn::BitCast(
          df, hn::Or(hn::BitCast(du, r), hn::And(hn::BitCast(du, x), hn::Set(du, 0x80000000u))));
    }
  }
  if (R == kStochastic && p.grid_stochastic) {
    // Truncated to a multiple of the quantum, then one quantum more where
    // RandomBits is below the top 32 bits of the dropped fraction, as the
    // encoder decides. The fraction (a / quantum - whole) * 2^32 is exact
    // while at most 24 bits are dropped (a field at most one below the
    // smallest normal's, in formats of m >= 0); other vectors, and NaN, Inf
    // or a result beyond the largest finite, take the general path.
    const VU bits = hn::BitCast(du, x);
    const VU a = hn::And(bits, hn::Set(du, 0x7FFFFFFFu));
    const VI raw = hn::Max(hn::BitCast(di, hn::ShiftRight<23>(a)), hn::Set(di, 1));
    const VI field = hn::Max(raw, hn::Set(di, p.grid_min_field));
    const auto few_dropped = hn::Lt(hn::Sub(field, raw), hn::Set(di, 2 + p.m));
    const auto quantum =
        hn::BitCast(df, hn::ShiftLeft<23>(hn::BitCast(du, hn::Sub(field, hn::Set(di, p.m)))));
    const auto inverse =
        hn::BitCast(df, hn::ShiftLeft<23>(hn::BitCast(du, hn::Sub(hn::Set(di, 254 + p.m), field))));
    const auto multiple = hn::Mul(hn::BitCast(df, a), inverse);  // exact: a power of 2
    const auto whole = hn::Trunc(multiple);
    // (A NaN lane, from a NaN or Inf input, becomes 0: no float-to-int overflow.)
    auto fraction = hn::Mul(hn::Sub(multiple, whole), hn::Set(df, 4294967296.0f));
    fraction = hn::IfThenZeroElse(hn::IsNaN(fraction), fraction);
    // Unsigned comparison of 32-bit values through signed ones biased by 2^31.
    const VI fraction_biased = hn::ConvertTo(di, hn::Sub(fraction, hn::Set(df, 2147483648.0f)));
    const VI random = hn::BitCast(di, hn::Xor(RandomBits(du, p, index), hn::Set(du, 0x80000000u)));
    const auto up = hn::RebindMask(df, hn::Lt(random, fraction_biased));
    const auto r = hn::Add(hn::Mul(whole, quantum), hn::IfThenElseZero(up, quantum));
    const auto max = hn::Set(df, p.grid_max);
    const auto in_range = hn::And(hn::Le(hn::BitCast(df, a), hn::Add(max, max)), hn::Le(r, max));
    if (HWY_LIKELY(hn::AllTrue(df, hn::And(hn::RebindMask(df, few_dropped), in_range)))) {
      return hn::BitCast(df, hn::Or(hn::BitCast(du, r), hn::And(bits, hn::Set(du, 0x80000000u))));
    }
  }
  if (R == kTowardZero && p.grid_toward_zero) {
    // Truncation: the bits below the quantum cleared, 23 - m of them for a
    // normal result and more below the smallest normal; below the smallest
    // subnormal, +-0. Vectors with a NaN, Inf or a value beyond the largest
    // finite take the general path.
    const VU bits = hn::BitCast(du, x);
    const VU a = hn::And(bits, hn::Set(du, 0x7FFFFFFFu));
    // float32's subnormals have the quantum of its field 1.
    const VI field = hn::Max(hn::BitCast(di, hn::ShiftRight<23>(a)), hn::Set(di, 1));
    const VI extra = hn::Max(hn::Sub(hn::Set(di, p.grid_min_field), field), hn::Zero(di));
    const VI cleared = hn::Add(extra, hn::Set(di, 23 - p.m));  // above 23: below every step
    const VU shift = hn::BitCast(du, hn::Min(cleared, hn::Set(di, 24)));
    const VU kept = hn::IfThenElse(hn::RebindMask(du, hn::Gt(cleared, hn::Set(di, 23))),
                                   hn::And(bits, hn::Set(du, 0x80000000u)),
                                   hn::And(bits, hn::Shl(hn::Set(du, 0xFFFFFFFFu), shift)));
    if (HWY_LIKELY(hn::AllTrue(df, hn::Le(hn::BitCast(df, a), hn::Set(df, p.grid_max))))) {
      return hn::BitCast(df, kept);
    }
  }
  const Loaded loaded = LoadSource(p, x_ptr, 0);
  const VU code = EncodeVec<R, false>(p, loaded.bits, loaded.subnormal, index, nullptr);
  return dp.use_table ? hn::GatherIndex(df, dp.table, hn::BitCast(di, code))
                      : hn::BitCast(df, DecodeVec(dp, code));
}

// float32 -> the value of the format's grid, float32: EncodeVec and the
// decode in registers, no codes written. Nearest-even fp16 and bf16 take the
// CPU's conversion and the one-add rounding of the encoder, and the small
// float formats GridRound, for vectors without NaN (whose policies the
// general path applies) or overflow.
template <int R>
void RoundLoop(const EncodePlan& plan, const DecodePlan& dplan, const float* in, size_t count,
               uint64_t first, float* out) {
  const EncodePlan p = plan;
  const DecodePlan dp = dplan;
  const DF df;
  const size_t N = hn::Lanes(df);
  size_t i = 0;
  if (dp.stream) {  // the caller aligned `out`
    for (; i + N <= count; i += N) hn::Stream(RoundVec<R>(p, dp, in + i, first + i), df, out + i);
    hwy::FlushStream();
  }
  for (; i + N <= count; i += N) hn::StoreU(RoundVec<R>(p, dp, in + i, first + i), df, out + i);
  if (i == count) return;
  HWY_ALIGN float tail[kMaxLanes] = {};
  memcpy(tail, in + i, (count - i) * sizeof(float));
  hn::Store(RoundVec<R>(p, dp, tail, first + i), df, tail);
  memcpy(out + i, tail, (count - i) * sizeof(float));
}

void Round(const EncodePlan& p, const DecodePlan& dp, const float* in, size_t count, uint64_t first,
           float* out) {
  WithRounding(p.rounding,
               [&](auto r) { RoundLoop<decltype(r)::value>(p, dp, in, count, first, out); });
}

void EncodeWithEvents(const EncodePlan& p, const float* in, size_t count, uint64_t first,
                      uint32_t* codes, uint32_t* events) {
  const DU du;
  HWY_ALIGN uint32_t c[kMaxLanes];
  HWY_ALIGN uint32_t ev[kMaxLanes];
  WithRounding(p.rounding, [&](auto r) {
    ForEachVectorWithEvents<decltype(r)::value>(
        p, in, count, first, [&](size_t i, size_t lanes, const float*, VU code, VU e) {
          hn::Store(code, du, c);
          hn::Store(e, du, ev);
          memcpy(codes + i, c, lanes * 4);
          memcpy(events + i, ev, lanes * 4);
        });
  });
}

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace lowp::kernels
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace lowp::kernels {

HWY_EXPORT(Encode);
HWY_EXPORT(Decode);
HWY_EXPORT(Measure);
HWY_EXPORT(Round);
HWY_EXPORT(EncodeWithEvents);
HWY_EXPORT(TargetName);

void DispatchEncode(const EncodePlan& p, const void* in, size_t count, uint64_t first,
                    uint8_t* out) {
  HWY_DYNAMIC_DISPATCH(Encode)(p, in, count, first, out);
}
void DispatchDecode(const DecodePlan& p, const uint8_t* in, size_t count, float* out) {
  HWY_DYNAMIC_DISPATCH(Decode)(p, in, count, out);
}
void DispatchMeasure(const EncodePlan& p, const DecodePlan& dp, const float* in, size_t count,
                     uint64_t first, ConversionError* e) {
  HWY_DYNAMIC_DISPATCH(Measure)(p, dp, in, count, first, e);
}
void DispatchEncodeWithEvents(const EncodePlan& p, const float* in, size_t count, uint64_t first,
                              uint32_t* codes, uint32_t* events) {
  HWY_DYNAMIC_DISPATCH(EncodeWithEvents)(p, in, count, first, codes, events);
}

void DispatchRound(const EncodePlan& p, const DecodePlan& dp, const float* in, size_t count,
                   uint64_t first, float* out) {
  HWY_DYNAMIC_DISPATCH(Round)(p, dp, in, count, first, out);
}
const char* DispatchTargetName() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

}  // namespace lowp::kernels
#endif  // HWY_ONCE
