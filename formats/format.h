// The format catalog: one descriptor per number format, built from its
// exponent and mantissa widths, bias and encoding rules. Every limit (largest
// finite value, smallest normal, ...) is derived from those fields, never
// written down by hand, so a user-defined format gets the same treatment as a
// built-in one.
//
// Codes are unsigned integers holding the format's bit pattern in their low
// `bits` bits (sign bit highest), e.g. fp8_e4m3fn 1.0 is 0x38 and tf32 1.0 is
// 0x1FC00 (19 bits). Integers use two's complement.
#ifndef LOWP_FORMATS_FORMAT_H_
#define LOWP_FORMATS_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace lowp {

enum class FormatKind { kFloat, kInteger };

// Where a float format keeps its infinities and NaNs (the LLVM/ml_dtypes
// suffixes in brackets).
enum class SpecialEncoding {
  // IEEE 754: all-ones exponent is +-inf (mantissa 0) or NaN (mantissa != 0).
  kIeee,
  // [fn] Finite only: no infinity; the all-ones magnitude is NaN, so the
  // all-ones exponent still holds finite values (fp8_e4m3fn, e8m0fnu).
  kFiniteOnly,
  // [fnuz] Finite, unsigned zero: no infinity, no -0; the code of -0 (sign
  // bit alone) is the only NaN (fp8_e4m3fnuz, fp8_e5m2fnuz).
  kNegativeZeroIsNan,
  // No infinity and no NaN at all (fp6, fp4 and every integer format).
  kNone,
};

struct Format {
  std::string name;                  // canonical, e.g. "fp8_e4m3fn"
  std::vector<std::string> aliases;  // other accepted names, lower case
  FormatKind kind = FormatKind::kFloat;
  int bits = 0;           // total width of a code
  bool is_signed = true;  // has a sign bit (floats) / two's complement (ints)
  int exponent_bits = 0;  // 0 for integers
  int mantissa_bits = 0;  // stored fraction bits; 0 for integers
  int bias = 0;           // value = 2^(field - bias) * 1.mantissa
  SpecialEncoding specials = SpecialEncoding::kNone;
  // false only for e8m0fnu: exponent field 0 is then an ordinary normal
  // number (2^-127) and the format has neither zero nor subnormals.
  bool has_zero = true;

  bool is_float() const { return kind == FormatKind::kFloat; }
  bool has_infinity() const { return specials == SpecialEncoding::kIeee; }
  bool has_nan() const { return specials != SpecialEncoding::kNone; }
  bool has_negative_zero() const {
    return is_float() && is_signed && has_zero && specials != SpecialEncoding::kNegativeZeroIsNan;
  }
  bool has_subnormals() const { return is_float() && has_zero; }

  // Bit masks of a code.
  uint32_t code_mask() const {  // all `bits` bits
    return bits == 32 ? 0xFFFFFFFFu : (uint32_t{1} << bits) - 1;
  }
  uint32_t sign_mask() const {  // 0 for unsigned formats
    return is_signed ? uint32_t{1} << (bits - 1) : 0;
  }
  uint32_t magnitude_mask() const { return code_mask() & ~sign_mask(); }
  // The largest magnitude (code without sign) that encodes a finite value;
  // for floats the positive codes 0..this are ordered by value.
  uint32_t max_finite_magnitude() const {
    if (!is_float()) return magnitude_mask();
    switch (specials) {
      case SpecialEncoding::kIeee:  // the largest exponent below all-ones
        return (((uint32_t{1} << exponent_bits) - 2) << mantissa_bits) |
               ((uint32_t{1} << mantissa_bits) - 1);
      case SpecialEncoding::kFiniteOnly:  // the all-ones magnitude is NaN
        return magnitude_mask() - 1;
      case SpecialEncoding::kNegativeZeroIsNan:
      case SpecialEncoding::kNone:
        break;
    }
    return magnitude_mask();
  }
  // Exponent of the smallest normal number, 1 - bias (or -bias without zero).
  int min_normal_exponent() const { return (has_zero ? 1 : 0) - bias; }
  // Exponent of the largest binade, derived from max_finite_magnitude().
  int max_normal_exponent() const;

  // Derived limits (exact; every value of every format fits a double).
  // max_finite and lowest_finite decode a code: reference.cc defines them.
  double max_finite() const;
  double lowest_finite() const;  // most negative finite value (0 unsigned)
  double min_normal() const;     // floats: 2^min_normal_exponent; ints: 1
  double min_subnormal() const;  // 0 if the format has no subnormals
  double epsilon() const;        // distance from 1 to the next value: 2^-m

  // Bytes a code occupies in a file: 4-bit formats pack two codes per byte
  // (low nibble first), up to 8 bits take one byte, 16 two, 32 four.
  int storage_bits() const;
  std::string encoding_name() const;  // "ieee", "fn", "fnuz", "none", "int"
};

// Every built-in format, in display order.
const std::vector<Format>& Catalog();

// Finds a format by name, alias or user-defined spelling, case-insensitively:
//   fp16, half, bfloat16, float8_e4m3fn, e4m3, f8E5M2FNUZ, int4, ...
//   e3m4, e3m4fn, e3m4fnuz       user-defined float (IEEE specials unless a
//                                suffix says otherwise; fnuz bias 2^(e-1))
//   float(e=5,m=10,bias=15,inf=ieee|fn|fnuz|none)
//   int3, uint12                 integers of 2 to 16 bits
// An unknown name is InvalidArgument listing the valid ones.
absl::StatusOr<Format> FindFormat(absl::string_view name);

// Builds and checks a float format from its fields (the user-defined path).
absl::StatusOr<Format> MakeFloatFormat(std::string name, int exponent_bits, int mantissa_bits,
                                       int bias, SpecialEncoding specials);
absl::StatusOr<Format> MakeIntegerFormat(std::string name, int bits, bool is_signed);

}  // namespace lowp

#endif  // LOWP_FORMATS_FORMAT_H_
