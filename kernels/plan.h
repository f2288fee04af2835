// The constants a conversion kernel needs, derived once per call from the
// format and options (kernels/convert.cc) so that the per-vector code is
// plain integer arithmetic on broadcast values. Internal to kernels/.
#ifndef LOWP_KERNELS_PLAN_H_
#define LOWP_KERNELS_PLAN_H_

#include <cstdint>

namespace lowp::kernels {

enum class Storage : int32_t { kNibble, kByte, kHalf, kWord };
enum class Source : int32_t { kFloat32, kFloat16, kBFloat16 };

// float32 -> codes. Index [s] of a pair is for a positive (0) or negative (1)
// input. Event bits are formats/reference.h's EncodeEvent values.
struct EncodePlan {
  int32_t rounding = 0;  // lowp::Rounding
  Storage storage = Storage::kByte;
  Source source = Source::kFloat32;
  bool is_int = false;
  bool is_signed = true;  // a sign bit (floats) / two's complement (ints)
  bool daz = false;
  bool ftz = false;
  bool keep_payload = false;  // NaN payload (IEEE targets)
  bool has_zero = true;       // false for e8m0
  // Rounding to zero gives sign | 0, no fix-up needed: integers and float
  // formats with -0 (not fnuz, not e8m0).
  bool plain_zero = false;
  int32_t bits = 0;  // code width
  int32_t m = 0;     // mantissa bits (0 for ints)
  // quantum = max(top - quantum_m, quantum_min): the exponent of the grid
  // step for an input whose leading bit has exponent `top`.
  int32_t quantum_m = 0;
  int32_t quantum_min = 0;
  int32_t field_offset = 0;  // magnitude = ((quantum + field_offset) << m) + n
  int32_t max_magnitude = 0;
  int32_t int_lowest = 0, int_highest = 0;  // integers
  uint32_t sign_mask = 0;
  uint32_t code_mask = 0;
  uint32_t nan_quiet = 0;  // IEEE targets: infinity | quiet bit, no sign
  uint32_t zero[2] = {}, largest[2] = {}, overflow[2] = {}, nan[2] = {}, inf[2] = {};
  uint32_t overflow_events[2] = {}, inf_events[2] = {}, nan_events = 0;
  // Rounding toward zero for this sign (the overflow that saturates always).
  uint32_t toward_zero[2] = {};
  // The common case without per-lane shifts: round to nearest-even a normal
  // input whose result is normal and finite, in |bits| [fast_lo, fast_hi).
  bool fast = false;
  int32_t fast_lo = 0, fast_hi = 0, fast_shift = 0;
  uint32_t fast_add = 0;         // half an ulp less one, less (127 - bias) << 23
  bool fast_tie_always = false;  // e8m0: the significand 1 is odd
  // Integers under nearest-even: |x| bits (x's bits if unsigned) below this
  // (the largest value + 1/2) round without saturation; 0 disables.
  int32_t int_fast_hi = 0;
  // RoundArray under nearest-even: |x| on the grid by one add and one
  // subtract of C = 1.5 * 2^23 * quantum (quantum = 2^(max(exponent,
  // grid_min_field) - 127 - m)), for |x| <= 2 * grid_max whose result is at
  // most grid_max (the largest finite); other vectors take the encoder.
  // The encoder's codes from that rounded r: (bits(r) >> (23 - m)) -
  // grid_rebias for r >= grid_min_normal, r * grid_subnormal_scale (an
  // integer) below.
  bool grid_fast = false;
  // RoundArray toward zero on the same grid: the bits below the quantum
  // cleared (|x| <= grid_max; the grid fields as for grid_fast).
  bool grid_toward_zero = false;
  // ... and stochastically: the truncation plus one quantum where
  // RandomBits is below the dropped fraction's top 32 bits.
  bool grid_stochastic = false;
  int32_t grid_min_field = 0;  // float32 biased exponent of the smallest normal
  float grid_max = 0;
  float grid_min_normal = 0;
  float grid_subnormal_scale = 0;  // 2^(m - min normal exponent)
  uint32_t grid_rebias = 0;        // (127 - bias) << m
  bool f16c = false;               // CPU's vcvtps2ph matches (nearest-even fp16)
  bool bf16 = false;               // nearest-even bf16 by one add (inf, subnormals kept)
  // Non-temporal stores in the fp16/bf16 loops: the output (aligned by the
  // caller to 64 bytes) is too large to stay in cache.
  bool stream = false;
  uint32_t k0 = 0, k1 = 0;  // stochastic rounding keys from the seed
};

// codes -> float32. Formats of up to 8 bits use `table` (their 256 values);
// others the arithmetic below.
struct DecodePlan {
  Storage storage = Storage::kByte;
  bool use_table = false;
  bool is_int = false;
  bool is_signed = true;
  bool shift_only = false;  // 8-bit exponent, bias 127: bits << (23 - m)
  bool f16c = false;        // fp16: the CPU's vcvtph2ps where it has one
  bool stream = false;      // non-temporal stores; the caller aligned `out`
  int32_t bits = 0;
  int32_t m = 0;
  uint32_t mag_mask = 0;
  uint32_t sign_mask = 0;
  uint32_t rebias = 0;           // (127 - bias) << 23
  uint32_t subnormal_scale = 0;  // float32 bits of 2^(min_normal_exponent - m)
  int32_t specials = 0;          // lowp::SpecialEncoding
  uint32_t all_ones_field = 0;
  const float* table = nullptr;  // 256 entries, NaN payloads kept
};

}  // namespace lowp::kernels

#endif  // LOWP_KERNELS_PLAN_H_
