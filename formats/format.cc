#include "formats/format.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace lowp {

int Format::max_normal_exponent() const {
  if (!is_float()) return 0;
  return static_cast<int>(max_finite_magnitude() >> mantissa_bits) - bias;
}

double Format::min_normal() const {
  return is_float() ? std::ldexp(1.0, min_normal_exponent()) : 1.0;
}

double Format::min_subnormal() const {
  if (!has_subnormals() || mantissa_bits == 0) return 0.0;
  return std::ldexp(1.0, min_normal_exponent() - mantissa_bits);
}

double Format::epsilon() const { return is_float() ? std::ldexp(1.0, -mantissa_bits) : 1.0; }

int Format::storage_bits() const {
  if (bits <= 4) return 4;
  if (bits <= 8) return 8;
  if (bits <= 16) return 16;
  return 32;
}

std::string Format::encoding_name() const {
  if (!is_float()) return "int";
  switch (specials) {
    case SpecialEncoding::kIeee:
      return "ieee";
    case SpecialEncoding::kFiniteOnly:
      return "fn";
    case SpecialEncoding::kNegativeZeroIsNan:
      return "fnuz";
    case SpecialEncoding::kNone:
      return "none";
  }
  return "";
}

absl::StatusOr<Format> MakeFloatFormat(std::string name, int exponent_bits, int mantissa_bits,
                                       int bias, SpecialEncoding specials) {
  if (exponent_bits < 1 || exponent_bits > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("format ", name, ": exponent bits must be 1..8, got ", exponent_bits));
  }
  if (mantissa_bits < 0 || mantissa_bits > 23) {
    return absl::InvalidArgumentError(
        absl::StrCat("format ", name, ": mantissa bits must be 0..23, got ", mantissa_bits));
  }
  if (specials == SpecialEncoding::kIeee && (mantissa_bits == 0 || exponent_bits < 2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("format ", name,
                     ": IEEE infinities and NaNs need at least 2 exponent bits and 1 "
                     "mantissa bit"));
  }
  Format f;
  f.name = std::move(name);
  f.kind = FormatKind::kFloat;
  f.bits = 1 + exponent_bits + mantissa_bits;
  f.is_signed = true;
  f.exponent_bits = exponent_bits;
  f.mantissa_bits = mantissa_bits;
  f.bias = bias;
  f.specials = specials;
  if (f.max_finite_magnitude() >> mantissa_bits == 0 && f.has_zero) {
    return absl::InvalidArgumentError(
        absl::StrCat("format ", f.name, ": has no normal numbers (exponent too narrow)"));
  }
  // Every value must be a float32, so that decoding to float32 is exact and
  // every float32 input has a well-defined place among the format's values.
  // In 64 bits: max_normal_exponent() and min_normal_exponent() overflow int
  // for a bias near the int limits (float(e=5,m=10,bias=-2147483648)).
  const int64_t largest_binade = int64_t{f.max_finite_magnitude() >> mantissa_bits} - bias;
  const int64_t smallest_step = int64_t{f.has_zero ? 1 : 0} - bias - mantissa_bits;
  if (largest_binade > 127 || smallest_step < -149) {
    return absl::InvalidArgumentError(
        absl::StrCat("format ", f.name, ": bias ", bias,
                     " puts values outside the float32 range (largest binade 2^", largest_binade,
                     ", smallest step 2^", smallest_step, ")"));
  }
  return f;
}

absl::StatusOr<Format> MakeIntegerFormat(std::string name, int bits, bool is_signed) {
  if (bits < 2 || bits > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("format ", name, ": integer width must be 2..16 bits, got ", bits));
  }
  Format f;
  f.name = std::move(name);
  f.kind = FormatKind::kInteger;
  f.bits = bits;
  f.is_signed = is_signed;
  f.specials = SpecialEncoding::kNone;
  return f;
}

namespace {

Format Float(std::string name, int e, int m, int bias, SpecialEncoding s,
             std::vector<std::string> aliases) {
  Format f = *MakeFloatFormat(std::move(name), e, m, bias, s);
  f.aliases = std::move(aliases);
  return f;
}

Format Integer(std::string name, int bits, bool is_signed, std::vector<std::string> aliases) {
  Format f = *MakeIntegerFormat(std::move(name), bits, is_signed);
  f.aliases = std::move(aliases);
  return f;
}

// OCP MX's shared scale: an unsigned power of two 2^(field - 127) for field
// 0..254, 0xFF is NaN; no zero, no sign, no subnormals.
Format E8M0() {
  Format f;
  f.name = "e8m0fnu";
  f.aliases = {"float8_e8m0fnu", "fp8_e8m0fnu", "f8e8m0fnu", "e8m0"};
  f.kind = FormatKind::kFloat;
  f.bits = 8;
  f.is_signed = false;
  f.exponent_bits = 8;
  f.mantissa_bits = 0;
  f.bias = 127;
  f.specials = SpecialEncoding::kFiniteOnly;
  f.has_zero = false;
  return f;
}

std::vector<Format> BuildCatalog() {
  using S = SpecialEncoding;
  std::vector<Format> c;
  c.push_back(Float("fp32", 8, 23, 127, S::kIeee, {"float32", "f32", "float", "single", "e8m23"}));
  c.push_back(Float("tf32", 8, 10, 127, S::kIeee, {"tensorfloat32", "tensorfloat-32", "e8m10"}));
  c.push_back(Float("fp16", 5, 10, 15, S::kIeee, {"float16", "f16", "half", "e5m10"}));
  c.push_back(Float("bf16", 8, 7, 127, S::kIeee, {"bfloat16", "e8m7"}));
  c.push_back(Float("fp8_e4m3fn", 4, 3, 7, S::kFiniteOnly,
                    {"float8_e4m3fn", "f8e4m3fn", "e4m3fn", "e4m3", "fp8_e4m3", "f8_e4m3"}));
  c.push_back(Float("fp8_e5m2", 5, 2, 15, S::kIeee, {"float8_e5m2", "f8e5m2", "e5m2", "f8_e5m2"}));
  c.push_back(Float("fp8_e4m3fnuz", 4, 3, 8, S::kNegativeZeroIsNan,
                    {"float8_e4m3fnuz", "f8e4m3fnuz", "e4m3fnuz"}));
  c.push_back(Float("fp8_e5m2fnuz", 5, 2, 16, S::kNegativeZeroIsNan,
                    {"float8_e5m2fnuz", "f8e5m2fnuz", "e5m2fnuz"}));
  c.push_back(Float("fp8_e4m3b11fnuz", 4, 3, 11, S::kNegativeZeroIsNan,
                    {"float8_e4m3b11fnuz", "f8e4m3b11fnuz", "e4m3b11fnuz"}));
  // OCP MX element formats: named "fn" by LLVM and ml_dtypes but holding
  // neither infinity nor NaN; every code is a finite number.
  c.push_back(
      Float("fp6_e2m3fn", 2, 3, 1, S::kNone, {"float6_e2m3fn", "f6e2m3fn", "e2m3fn", "e2m3"}));
  c.push_back(
      Float("fp6_e3m2fn", 3, 2, 3, S::kNone, {"float6_e3m2fn", "f6e3m2fn", "e3m2fn", "e3m2"}));
  c.push_back(Float("fp4_e2m1fn", 2, 1, 1, S::kNone,
                    {"float4_e2m1fn", "f4e2m1fn", "e2m1fn", "e2m1", "fp4"}));
  c.push_back(E8M0());
  c.push_back(Integer("int8", 8, true, {"i8", "s8"}));
  c.push_back(Integer("uint8", 8, false, {"u8"}));
  c.push_back(Integer("int4", 4, true, {"i4", "s4"}));
  c.push_back(Integer("uint4", 4, false, {"u4"}));
  return c;
}

bool ParseInt(absl::string_view text, int* out) {
  return !text.empty() && absl::ascii_isdigit(text[0]) && absl::SimpleAtoi(text, out);
}

// "e3m4", "e3m4fn", "e3m4fnuz".
absl::StatusOr<Format> ParseShorthand(absl::string_view name) {
  absl::string_view rest = name;
  SpecialEncoding specials = SpecialEncoding::kIeee;
  if (absl::ConsumeSuffix(&rest, "fnuz")) {
    specials = SpecialEncoding::kNegativeZeroIsNan;
  } else if (absl::ConsumeSuffix(&rest, "fn")) {
    specials = SpecialEncoding::kFiniteOnly;
  }
  absl::ConsumePrefix(&rest, "e");
  const size_t m_at = rest.find('m');
  int e = 0, m = 0;
  if (m_at == absl::string_view::npos || !ParseInt(rest.substr(0, m_at), &e) ||
      !ParseInt(rest.substr(m_at + 1), &m)) {
    return absl::NotFoundError("");
  }
  if (e < 1 || e > 8 || m > 23) {
    return MakeFloatFormat(std::string(name), e, m, 0, specials);
  }
  const int bias = (1 << (e - 1)) - (specials == SpecialEncoding::kNegativeZeroIsNan ? 0 : 1);
  return MakeFloatFormat(std::string(name), e, m, bias, specials);
}

// "float(e=5,m=10,bias=15,inf=ieee)".
absl::StatusOr<Format> ParseFloatSpec(absl::string_view name) {
  absl::string_view body = name;
  if (!absl::ConsumePrefix(&body, "float(") || !absl::ConsumeSuffix(&body, ")")) {
    return absl::NotFoundError("");
  }
  int e = -1, m = -1, bias = 0;
  bool has_bias = false;
  SpecialEncoding specials = SpecialEncoding::kIeee;
  for (absl::string_view item : absl::StrSplit(body, ',')) {
    item = absl::StripAsciiWhitespace(item);
    const std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits('=', 1));
    const absl::string_view key = absl::StripAsciiWhitespace(kv.first);
    const absl::string_view value = absl::StripAsciiWhitespace(kv.second);
    bool ok = true;
    if (key == "e") {
      ok = ParseInt(value, &e);
    } else if (key == "m") {
      ok = ParseInt(value, &m);
    } else if (key == "bias") {
      ok = absl::SimpleAtoi(value, &bias);
      has_bias = true;
    } else if (key == "inf") {
      if (value == "ieee")
        specials = SpecialEncoding::kIeee;
      else if (value == "fn")
        specials = SpecialEncoding::kFiniteOnly;
      else if (value == "fnuz")
        specials = SpecialEncoding::kNegativeZeroIsNan;
      else if (value == "none")
        specials = SpecialEncoding::kNone;
      else
        ok = false;
    } else {
      ok = false;
    }
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("format '", name, "': cannot read '", item,
                       "'; expected float(e=E,m=M[,bias=B][,inf=ieee|fn|fnuz|none])"));
    }
  }
  if (e < 0 || m < 0) {
    return absl::InvalidArgumentError(absl::StrCat("format '", name, "': e= and m= are required"));
  }
  if (!has_bias && e >= 1 && e <= 8) {
    bias = (1 << (e - 1)) - (specials == SpecialEncoding::kNegativeZeroIsNan ? 0 : 1);
  }
  return MakeFloatFormat(std::string(name), e, m, bias, specials);
}

// "int3", "uint12".
absl::StatusOr<Format> ParseInteger(absl::string_view name) {
  absl::string_view rest = name;
  const bool is_unsigned = absl::ConsumePrefix(&rest, "u");
  int bits = 0;
  if (!absl::ConsumePrefix(&rest, "int") || !ParseInt(rest, &bits)) {
    return absl::NotFoundError("");
  }
  return MakeIntegerFormat(std::string(name), bits, !is_unsigned);
}

}  // namespace

const std::vector<Format>& Catalog() {
  static const std::vector<Format>* const catalog = new std::vector<Format>(BuildCatalog());
  return *catalog;
}

absl::StatusOr<Format> FindFormat(absl::string_view name) {
  std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
  key.erase(std::remove(key.begin(), key.end(), ' '), key.end());
  for (const Format& f : Catalog()) {
    if (f.name == key) return f;
    for (const std::string& alias : f.aliases) {
      if (alias == key) return f;
    }
  }
  for (auto parse : {ParseFloatSpec, ParseShorthand, ParseInteger}) {
    absl::StatusOr<Format> f = parse(key);
    if (f.ok() || !absl::IsNotFound(f.status())) return f;
  }
  std::vector<std::string> names;
  for (const Format& f : Catalog()) names.push_back(f.name);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown format '", name, "'; valid: ", absl::StrJoin(names, ", "),
                   ", or user-defined eXmY[fn|fnuz], float(e=..,m=..,bias=..,inf=..), "
                   "intN, uintN"));
}

}  // namespace lowp
