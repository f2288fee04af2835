// An oracle for float32 -> format conversion that shares nothing with the
// reference but the format's fields: it decodes every code with its own
// formula, sorts the finite values, and for an input x picks between the two
// neighbours lo <= x <= hi by each rounding mode's textbook rule, comparing
// x with the exact midpoint (lo + hi) / 2. Overflow is modelled by one
// virtual value past each end of the table: the next point of the grid if
// the exponent range were unbounded.
#ifndef LOWP_TESTS_ORACLE_H_
#define LOWP_TESTS_ORACLE_H_

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <optional>
#include <vector>

#include "formats/format.h"
#include "formats/reference.h"

namespace lowp::testing {

// The textbook decoding of one code: nullopt for NaN, +-inf as doubles.
inline std::optional<double> OracleDecode(const Format& f, uint32_t code) {
  if (!f.is_float()) {
    const bool negative = f.is_signed && (code >> (f.bits - 1)) != 0;
    return negative ? static_cast<double>(code) - std::ldexp(1.0, f.bits)
                    : static_cast<double>(code);
  }
  const int e = f.exponent_bits, m = f.mantissa_bits;
  const bool negative = f.is_signed && (code >> (e + m)) != 0;
  const uint32_t field = (code >> m) & ((1u << e) - 1);
  const uint32_t mantissa = code & ((1u << m) - 1);
  const uint32_t all_ones = (1u << e) - 1;
  const double sign = negative ? -1.0 : 1.0;
  switch (f.specials) {
    case SpecialEncoding::kIeee:
      if (field == all_ones) {
        if (mantissa != 0) return std::nullopt;
        return sign * HUGE_VAL;
      }
      break;
    case SpecialEncoding::kFiniteOnly:
      if (field == all_ones && mantissa == (1u << m) - 1) return std::nullopt;
      break;
    case SpecialEncoding::kNegativeZeroIsNan:
      if (negative && field == 0 && mantissa == 0) return std::nullopt;
      break;
    case SpecialEncoding::kNone:
      break;
  }
  if (field == 0 && f.has_zero) {  // zero and subnormals: 0.mantissa
    return sign * std::ldexp(mantissa, 1 - f.bias - m);
  }
  return sign * std::ldexp((1u << m) + mantissa, static_cast<int>(field) - f.bias - m);
}

class Oracle {
 public:
  explicit Oracle(const Format& f) : f_(f) {
    std::vector<std::pair<double, uint32_t>> finite;
    for (uint64_t code = 0; code <= f.code_mask(); ++code) {
      const std::optional<double> v = OracleDecode(f, static_cast<uint32_t>(code));
      if (!v) {
        nan_codes_.push_back(static_cast<uint32_t>(code));
      } else if (std::isinf(*v)) {
        (*v > 0 ? positive_infinity_ : negative_infinity_) = static_cast<uint32_t>(code);
      } else if (*v == 0 && std::signbit(*v)) {  // kept apart: -0 == +0
        negative_zero_ = static_cast<uint32_t>(code);
      } else {
        finite.emplace_back(*v, static_cast<uint32_t>(code));
      }
    }
    std::sort(finite.begin(), finite.end());
    for (const auto& [v, code] : finite) {
      values_.push_back(v);
      codes_.push_back(code);
    }
    // The grid continued one step past each end: for m = 0 the next power of
    // two, otherwise the last spacing again.
    const size_t n = values_.size();
    above_ = f.is_float() && f.mantissa_bits == 0
                 ? 2 * values_[n - 1]
                 : values_[n - 1] + (values_[n - 1] - values_[n - 2]);
    below_ = f.is_float() && f.is_signed ? -above_ : values_[0] - (values_[1] - values_[0]);
    // Whether the lower of each adjacent pair (lo, hi) is even on the pair's
    // grid, i.e. lo / (hi - lo) is an even integer; pair k has hi = values[k].
    for (size_t k = 0; k <= n; ++k) {
      const double lo = k == 0 ? below_ : values_[k - 1];
      const double hi = k < n ? values_[k] : above_;
      lo_is_even_.push_back(std::fmod(std::fabs(lo / (hi - lo)), 2.0) == 0);
    }
    const auto zero = std::lower_bound(values_.begin(), values_.end(), 0.0);
    if (zero != values_.end() && *zero == 0)
      zero_ = codes_[static_cast<size_t>(zero - values_.begin())];
    canonical_nan_[0] = FindCanonicalNan(false);
    canonical_nan_[1] = FindCanonicalNan(true);
    min_normal_ = f.is_float() ? std::ldexp(1.0, (f.has_zero ? 1 : 0) - f.bias) : 1.0;
  }

  const std::vector<double>& values() const { return values_; }
  double above() const { return above_; }
  double below() const { return below_; }

  // Index i with values[i] <= x < values[i + 1] (-1 below the table),
  // walking from `hint` (a previous result; -1 for none) so that sweeps in
  // value order cost O(1) per input.
  ptrdiff_t Locate(double x, ptrdiff_t hint) const {
    const ptrdiff_t n = static_cast<ptrdiff_t>(values_.size());
    if (hint < 0 || hint >= n) {  // no usable hint: binary search
      return std::upper_bound(values_.begin(), values_.end(), x) - values_.begin() - 1;
    }
    while (hint + 1 < n && values_[hint + 1] <= x) ++hint;
    while (hint >= 0 && values_[hint] > x) --hint;
    return hint;
  }

  // Where an input lies among the values, independent of the options: the
  // neighbour index, and whether it is exact or below, at or above the
  // midpoint of its neighbours. Sweeps compute it once for all cases.
  struct Place {
    ptrdiff_t i = 0;
    bool special = false;  // see ExpectSpecial
    bool exact = false;    // x == values[i]
    int versus_mid = 0;    // -1, 0, 1
    bool lo_even = false;  // the lower neighbour is even on the pair's grid
  };
  Place Where(float input, ptrdiff_t i) const {
    const double x = input;
    Place p;
    p.i = i;
    p.special = !(std::isfinite(x) && x != 0 && x > below_ && x < above_) ||
                (f_.is_float() && !f_.has_zero && x < values_[0]);
    if (p.special) return p;
    const ptrdiff_t n = static_cast<ptrdiff_t>(values_.size());
    const double lo = i < 0 ? below_ : values_[i];
    const double hi = i + 1 < n ? values_[i + 1] : above_;
    const double mid = (lo + hi) / 2;  // exact: both have few significant bits
    p.exact = x == lo;
    p.versus_mid = x < mid ? -1 : (x == mid ? 0 : 1);
    p.lo_even = lo_is_even_[static_cast<size_t>(i + 1)];
    return p;
  }

  // The expected code for an input at `p` (from Where), under options `o`,
  // with `random` the element's random bits for stochastic rounding.
  uint32_t Pick(const Place& p, float input, const ConvertOptions& o, uint32_t random) const {
    if (p.special) [[unlikely]]
      return ExpectSpecial(input, o);
    const double x = input;
    const bool negative = x < 0;
    const bool daz =
        o.subnormals == Subnormals::kInputsAreZero || o.subnormals == Subnormals::kFlushBoth;
    if (daz && std::fabs(x) < 0x1p-126) return ZeroCode(negative);
    const ptrdiff_t n = static_cast<ptrdiff_t>(values_.size());
    ptrdiff_t j = p.i;  // index of the result; -1 and n are the virtual values
    if (!p.exact) {
      bool up = false;  // toward the upper neighbour
      switch (o.rounding) {
        case Rounding::kNearestEven:
          up = p.versus_mid > 0 || (p.versus_mid == 0 && !p.lo_even);
          break;
        case Rounding::kNearestAway:
          up = p.versus_mid > 0 || (p.versus_mid == 0 && !negative);
          break;
        case Rounding::kTowardZero:
          up = negative;
          break;
        case Rounding::kTowardPositive:
          up = true;
          break;
        case Rounding::kTowardNegative:
          up = false;
          break;
        case Rounding::kOdd:
          up = p.lo_even;
          break;
        case Rounding::kStochastic: {
          const double lo = p.i < 0 ? below_ : values_[p.i];
          const double hi = p.i + 1 < n ? values_[p.i + 1] : above_;
          // Exact: |x - toward_zero| < spacing, a power of two.
          const double fraction = std::fabs(x - (negative ? hi : lo)) / (hi - lo);
          const bool away = static_cast<double>(random) < std::floor(std::ldexp(fraction, 32));
          up = away != negative;
          break;
        }
      }
      j = up ? p.i + 1 : p.i;
    }
    if (j < 0 || j >= n) {  // beyond the finite values: overflow
      if (!f_.is_float() || TowardZero(o.rounding, negative)) {
        return negative ? codes_.front() : codes_.back();
      }
      return OverflowCode(negative, PolicyOf(o.overflow));
    }
    const double result = values_[static_cast<size_t>(j)];
    const bool ftz =
        o.subnormals == Subnormals::kFlushToZero || o.subnormals == Subnormals::kFlushBoth;
    if (result == 0 || (ftz && f_.is_float() && std::fabs(result) < min_normal_)) {
      return ZeroCode(negative);
    }
    return codes_[static_cast<size_t>(j)];
  }

  // Infinities, zeros, flushed inputs, inputs past the virtual values, e8m0.
  uint32_t ExpectSpecial(float input, const ConvertOptions& o) const {
    const bool negative = std::signbit(input);
    if (std::isnan(input)) return NanExpected(input);
    const Overflow policy = PolicyOf(o.overflow);
    if (std::isinf(input)) {
      if (!f_.is_float()) return negative ? codes_.front() : codes_.back();
      if (!f_.is_signed && negative) return CanonicalNan(false);
      if (f_.has_infinity() && policy != Overflow::kSaturate) return InfinityCode(negative);
      return OverflowCode(negative, policy);
    }
    const bool daz =
        o.subnormals == Subnormals::kInputsAreZero || o.subnormals == Subnormals::kFlushBoth;
    if (input == 0 || (daz && std::fabs(input) < 0x1p-126)) return ZeroCode(negative);
    if (f_.is_float() && !f_.has_zero) {  // e8m0: no zero, no negatives
      if (negative) return CanonicalNan(false);
      if (input < values_[0]) return codes_[0];
    }
    // Past the virtual values: every mode overflows except those rounding
    // toward zero, which give the largest finite value.
    if (!f_.is_float() || TowardZero(o.rounding, negative)) {
      return negative ? codes_.front() : codes_.back();
    }
    return OverflowCode(negative, policy);
  }

  uint32_t NanExpected(float input) const {
    const bool negative = std::signbit(input);
    return CanonicalNan(negative && f_.is_signed);
  }

 private:
  static bool TowardZero(Rounding r, bool negative) {
    return r == Rounding::kTowardZero || r == Rounding::kOdd ||
           (r == Rounding::kTowardPositive && negative) ||
           (r == Rounding::kTowardNegative && !negative);
  }

  Overflow PolicyOf(Overflow requested) const {
    if (!f_.has_nan()) return Overflow::kSaturate;
    if (requested != Overflow::kFormatDefault) return requested;
    return f_.has_infinity() ? Overflow::kInfinity : Overflow::kNan;
  }

  uint32_t OverflowCode(bool negative, Overflow policy) const {
    if (!f_.is_signed && negative) return CanonicalNan(false);
    switch (policy) {
      case Overflow::kInfinity:
        return InfinityCode(negative);
      case Overflow::kNan:
        return CanonicalNan(negative && f_.is_signed);
      default:
        return negative ? codes_.front() : codes_.back();
    }
  }

  uint32_t InfinityCode(bool negative) const {
    return negative ? negative_infinity_ : positive_infinity_;
  }

  uint32_t ZeroCode(bool negative) const {
    if (f_.is_float() && !f_.has_zero) return CanonicalNan(false);
    if (negative && negative_zero_) return *negative_zero_;
    return zero_;
  }

  uint32_t CanonicalNan(bool negative) const { return canonical_nan_[negative ? 1 : 0]; }

  // The quiet NaN with only the quiet bit of the payload (ml_dtypes' choice),
  // or +0 for formats without NaN.
  uint32_t FindCanonicalNan(bool negative) const {
    if (nan_codes_.empty()) return ZeroCode(false);
    const uint32_t sign = f_.is_signed ? 1u << (f_.bits - 1) : 0;
    for (uint32_t code : nan_codes_) {
      const bool code_negative = (code & sign) != 0;
      if (f_.specials == SpecialEncoding::kNegativeZeroIsNan) return code;  // the only NaN
      if (code_negative != (negative && f_.is_signed)) continue;
      const uint32_t payload = code & ((1u << f_.mantissa_bits) - 1);
      if (f_.specials != SpecialEncoding::kIeee || payload == 1u << (f_.mantissa_bits - 1)) {
        return code;
      }
    }
    return nan_codes_.front();
  }

  const Format f_;
  std::vector<double> values_;
  std::vector<uint32_t> codes_;
  std::vector<uint32_t> nan_codes_;
  std::vector<bool> lo_is_even_;
  uint32_t canonical_nan_[2] = {0, 0};
  uint32_t zero_ = 0;
  std::optional<uint32_t> negative_zero_;
  uint32_t positive_infinity_ = 0, negative_infinity_ = 0;
  double above_ = 0, below_ = 0, min_normal_ = 0;
};

}  // namespace lowp::testing

#endif  // LOWP_TESTS_ORACLE_H_
