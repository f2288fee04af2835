// libFuzzer target: the input as a format name (FindFormat: catalog names,
// aliases, eXmY[fn|fnuz], float(e=..,m=..,bias=..,inf=..), intN) and as a
// scheme name (ParseScheme: "int4-g128:scale=bf16:clip=mse", "nf4:double-quant",
// "float(e=4,m=3,bias=7,inf=fn)", ...). An error must say what is wrong with
// the name; whatever is accepted must be found again under its canonical name,
// have consistent derived limits (a format) or a finite storage cost and
// quantize a small tensor (a scheme).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/string_view.h"
#include "formats/format.h"
#include "formats/reference.h"
#include "quant/measure.h"
#include "quant/scheme.h"
#include "io/tensor.h"
#include "tests/fuzz/fuzz_check.h"

namespace lowp::fuzz {
namespace {

bool SameFormat(const Format& a, const Format& b) {
  return a.name == b.name && a.kind == b.kind && a.bits == b.bits && a.is_signed == b.is_signed &&
         a.exponent_bits == b.exponent_bits && a.mantissa_bits == b.mantissa_bits &&
         a.bias == b.bias && a.specials == b.specials && a.has_zero == b.has_zero;
}

bool Contains(absl::string_view text, absl::string_view part) {
  return text.find(part) != absl::string_view::npos;
}

// One code of `f`: its value is a float32 (decoding is exact), NaN exactly
// where IsNanCode says, and every other code is what that value encodes to.
void CheckCode(const Format& f, uint32_t code) {
  const float value = DecodeToFloat32(f, code);
  const double exact = DecodeToDouble(f, code);
  Check(std::isnan(value) == IsNanCode(f, code), "IsNanCode disagrees with the decoded value");
  if (std::isnan(value)) return;
  Check(static_cast<double>(value) == exact, "a code's value is not a float32");
  Check(EncodeFloat32(f, value) == code, "a code's value does not encode back to the code");
}

// An accepted format: its fields hang together, its limits are ordered and
// within float32, and its codes round-trip through their values.
void CheckFormat(const Format& f) {
  absl::StatusOr<Format> again = FindFormat(f.name);
  Check(again.ok(), "FindFormat rejects the canonical name of a format it accepted");
  Check(SameFormat(*again, f), "FindFormat(f.name) gives another format");
  Check(!f.name.empty() && f.name == absl::AsciiStrToLower(f.name), "name not lower case");
  Check(f.storage_bits() >= f.bits && f.bits >= 2 && f.bits <= 32, "width out of 2..32 bits");
  Check(f.is_float() ? !f.encoding_name().empty() && f.encoding_name() != "int"
                     : f.encoding_name() == "int",
        "encoding name does not match the kind");
  if (f.is_float()) {
    Check(f.bits == (f.is_signed ? 1 : 0) + f.exponent_bits + f.mantissa_bits,
          "bits != sign + exponent + mantissa");
    Check(f.exponent_bits >= 1 && f.exponent_bits <= 8 && f.mantissa_bits <= 23,
          "exponent or mantissa width out of range");
    Check(f.epsilon() == std::ldexp(1.0, -f.mantissa_bits), "epsilon is not 2^-m");
  } else {
    Check(f.exponent_bits == 0 && f.mantissa_bits == 0 && f.bits <= 16 && !f.has_nan() &&
              !f.has_infinity(),
          "integer format with float fields");
    Check(f.max_finite() ==
              (f.is_signed ? std::ldexp(1.0, f.bits - 1) - 1 : std::ldexp(1.0, f.bits) - 1),
          "integer max_finite is not 2^(bits-1) - 1 (2^bits - 1 unsigned)");
  }
  Check(f.max_finite_magnitude() <= f.magnitude_mask(), "max finite magnitude beyond the mask");
  Check((f.sign_mask() | f.magnitude_mask()) == f.code_mask(), "sign and magnitude masks");
  const double max = f.max_finite();
  Check(std::isfinite(max) && max > 0 && max <= std::numeric_limits<float>::max(),
        "max_finite not in (0, FLT_MAX]");
  if (!f.is_signed) {
    Check(f.lowest_finite() == (f.is_float() ? DecodeToDouble(f, 0) : 0.0),
          "lowest_finite of an unsigned format is not its code 0");
  } else {
    Check(f.lowest_finite() == (f.is_float() ? -max : -max - 1),
          "lowest_finite is not -max_finite (-max_finite - 1 for integers)");
  }
  Check(f.min_normal() > 0 && f.min_normal() <= max, "min_normal not in (0, max_finite]");
  if (f.is_float()) {
    Check(f.min_normal() >= std::ldexp(1.0, -126 - 23), "min_normal below float32's range");
    Check(f.max_normal_exponent() >= f.min_normal_exponent(), "no normal binade");
    Check(DecodeToDouble(f, f.max_finite_magnitude()) == max,
          "max_finite is not the value of the max finite code");
  }
  const double sub = f.min_subnormal();
  if (f.has_subnormals() && f.mantissa_bits > 0) {
    Check(sub > 0 && sub < f.min_normal() && sub >= std::ldexp(1.0, -149),
          "min_subnormal not in [2^-149, min_normal)");
  } else {
    Check(sub == 0, "min_subnormal of a format without subnormals");
  }
  // Every code of a narrow format, a few of a wide one.
  const uint32_t mask = f.code_mask();
  if (f.bits <= 10) {
    for (uint32_t c = 0; c <= mask; ++c) CheckCode(f, c);
    if (f.is_float()) {  // positive codes 0..max finite: increasing values
      for (uint32_t c = 0; c < f.max_finite_magnitude(); ++c) {
        Check(DecodeToDouble(f, c) < DecodeToDouble(f, c + 1), "positive codes not increasing");
      }
    }
  } else {
    const uint32_t m = f.max_finite_magnitude();
    for (uint32_t c : {0u, 1u, 2u, m / 2, m - 1, m, m + 1}) {
      CheckCode(f, c & mask);
      CheckCode(f, (c | f.sign_mask()) & mask);
    }
  }
  if (f.has_zero) Check(EncodeFloat32(f, 0.0f) == 0 && DecodeToDouble(f, 0) == 0, "zero");
  Check(DecodeToDouble(f, EncodeFloat32(f, static_cast<float>(max))) == max,
        "max_finite does not encode to itself");
}

// A small tensor of every kind of value: zeros, negatives, a wide range of
// magnitudes, float32 subnormals, NaN and infinities.
std::vector<float> TestValues(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    const float sign = i % 3 == 1 ? -1.0f : 1.0f;
    v[i] = sign * std::ldexp(1.0f + static_cast<float>(i % 7) / 8, static_cast<int>(i % 41) - 20);
  }
  v[0] = 0;
  if (n > 5) v[5] = -0.0f;
  if (n > 9) v[9] = std::numeric_limits<float>::denorm_min();
  if (n > 17) v[17] = std::numeric_limits<float>::quiet_NaN();
  if (n > 23) v[23] = -std::numeric_limits<float>::infinity();
  if (n > 31) v[31] = 3.0e38f;
  return v;
}

// MeasureTensor of `scheme` over a [rows, cols] float32 tensor.
void CheckApply(const Scheme& scheme, int64_t rows, int64_t cols) {
  const std::vector<float> values = TestValues(static_cast<size_t>(rows * cols));
  TensorView t;
  t.name = "fuzz";
  t.dtype = DType::kF32;
  t.shape = {rows, cols};
  t.bytes = std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(values.data()),
                                     values.size() * sizeof(float));
  MeasureOptions options;
  options.threads = 1;
  options.histogram = true;
  absl::StatusOr<QuantReport> r = MeasureTensor(t, scheme, options);
  Check(r.ok(), "MeasureTensor of a float32 tensor failed");
  Check(r->elements == values.size() && r->stats.count == values.size(), "element count");
  Check(r->storage_bits == scheme.StorageBits(rows, cols), "report storage != StorageBits");
  uint64_t nan = 0, inf = 0;
  for (float x : values) {
    nan += std::isnan(x);
    inf += std::isinf(x);
  }
  Check(r->stats.nan_inputs == nan && r->stats.inf_inputs == inf, "NaN/Inf input counts");
  Check(r->stats.measured <= r->stats.count - nan - inf, "measured more than the finite inputs");
  Check(!std::isnan(r->stats.sum_squared_error) && r->stats.max_abs_error >= 0,
        "error sums are NaN");
}

// An accepted scheme: its canonical name parses to itself, its storage cost
// is finite and positive, and it quantizes a tensor.
void CheckScheme(const Scheme& s) {
  absl::StatusOr<std::unique_ptr<Scheme>> again = ParseScheme(s.name());
  Check(again.ok(), "ParseScheme rejects the canonical name of a scheme it accepted");
  Check((*again)->name() == s.name(), "the canonical name parses to another name");
  for (const auto& [rows, cols] :
       {std::pair<int64_t, int64_t>{1, 1}, {3, 7}, {5, 33}, {2, 300}, {64, 4096}, {4096, 4096}}) {
    const double bits = s.BitsPerWeight(rows, cols);
    Check(std::isfinite(bits) && bits > 0, "BitsPerWeight not finite and > 0");
    Check((*again)->StorageBits(rows, cols) == s.StorageBits(rows, cols),
          "the canonical name stores differently");
    Check(s.ChunkRows(cols) >= 1, "ChunkRows < 1");
  }
  CheckApply(s, 4, 40);
  CheckApply(s, 1, 37);
}

}  // namespace

int FuzzNames(const uint8_t* data, size_t size) {
  const absl::string_view name(reinterpret_cast<const char*>(data), size);

  absl::StatusOr<Format> format = FindFormat(name);
  if (format.ok()) {
    CheckFormat(*format);
  } else {
    // The message quotes the name as given or as looked up (lower case,
    // without spaces), or a user-defined format's name.
    std::string key = absl::AsciiStrToLower(absl::StripAsciiWhitespace(name));
    key.erase(std::remove(key.begin(), key.end(), ' '), key.end());
    Check(format.status().code() == absl::StatusCode::kInvalidArgument,
          "FindFormat error is not InvalidArgument");
    Check(Contains(format.status().message(), name) || Contains(format.status().message(), key),
          "FindFormat error does not name the format");
  }

  absl::StatusOr<std::unique_ptr<Scheme>> scheme = ParseScheme(name);
  if (scheme.ok()) {
    CheckScheme(**scheme);
  } else {
    // The message names the base (the name before its first ':'), or says
    // that it is empty.
    const absl::string_view base = name.substr(0, name.find(':'));
    Check(!scheme.status().message().empty(), "ParseScheme error without a message");
    Check(base.empty() ? Contains(scheme.status().message(), "empty")
                       : Contains(scheme.status().message(), base),
          "ParseScheme error does not name the scheme");
  }
  return 0;
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzNames(data, size);
}
#endif
