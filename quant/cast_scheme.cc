// Casts: every element rounded to a floating format and read back, with no
// scale: what storing a tensor in fp16, bf16 or fp8 does to it.
#include <cmath>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "kernels/convert.h"
#include "kernels/quantize.h"
#include "quant/scheme_families.h"

namespace lowp::internal {
namespace {

// q = Decode(Encode(x)) under the format's rounding mode and policies (the
// reference's rules, run by the SIMD kernels); bits per weight = the format's
// width. Stochastic rounding draws RandomBits(seed, element index in the
// tensor), so a tensor gives the same bits however it is chunked.
class CastScheme : public Scheme {
 public:
  CastScheme(std::string name, Format format, ConvertOptions options)
      : Scheme(std::move(name)),
        format_(std::move(format)),
        options_(options),
        rounder_(*Rounder::Make(format_, options_)),  // options validated by the caller
        max_finite_(static_cast<float>(format_.max_finite())),
        min_normal_(static_cast<float>(format_.min_normal())) {}

  uint64_t StorageBits(int64_t rows, int64_t cols) const override {
    return static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols) * format_.bits;
  }

  // IEEE half, bfloat16 and single are ggml's F16, BF16 and F32, element by
  // element in the same little-endian bits.
  const ggml::TypeInfo* GgmlLayout(int64_t) const override {
    if (format_.name == "fp16") return &ggml::Info(ggml::Type::kF16);
    if (format_.name == "bf16") return &ggml::Info(ggml::Type::kBF16);
    if (format_.name == "fp32") return &ggml::Info(ggml::Type::kF32);
    return nullptr;
  }

  void Apply(std::span<const float> in, int64_t cols, const TensorContext& context,
             std::span<float> out, SchemeCounts& counts, StoredChunk* stored) const override {
    thread_local std::vector<uint8_t> codes;
    RunOptions run;
    run.first_index = static_cast<uint64_t>(context.first_element);
    run.threads = 1;
    if (stored == nullptr) {
      rounder_.Round(in, out, run);  // one pass, the same bits as the codes' decoding
    } else {
      // Options were validated when the scheme was made; sizes match by
      // construction, so neither call can fail.
      codes.resize(StorageBytes(format_, in.size()));
      (void)EncodeArray(format_, in, codes, options_, run);
      (void)DecodeArray(format_, codes, out, run);
    }
    CountCastEvents(in, out, max_finite_, min_normal_, counts.clipped, counts.subnormal);
    if (stored != nullptr) {
      std::vector<uint32_t> unpacked;
      (void)UnpackCodes(format_, codes, 0, &unpacked);
      unpacked.resize(in.size());  // a trailing odd 4-bit code's padding nibble
      stored->codes.insert(stored->codes.end(), unpacked.begin(), unpacked.end());
      if (GgmlLayout(cols) != nullptr) {
        stored->bytes.insert(stored->bytes.end(), codes.begin(), codes.end());
      }
    }
  }

 private:
  Format format_;
  ConvertOptions options_;
  Rounder rounder_;
  float max_finite_;
  float min_normal_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Scheme>> MakeCastScheme(absl::string_view base,
                                                       const SchemeOptions& options) {
  absl::StatusOr<Format> format = FindFormat(base);
  if (!format.ok()) return absl::NotFoundError(format.status().message());
  if (!format->is_float() || !format->has_zero) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", base, "' is not a floating format with zero; integer schemes are int8, ",
                     "int8-channel, int4-g128, ...; e8m0 is a scale format"));
  }
  ConvertOptions convert;
  std::string name = format->name;
  for (const auto& [key, value] : options) {
    absl::Status status;
    if (key == "rounding") {
      absl::StatusOr<Rounding> r = ParseRounding(value);
      if (r.ok()) convert.rounding = *r;
      status = r.status();
    } else if (key == "seed") {
      if (!absl::SimpleAtoi(value, &convert.seed)) {
        status = absl::InvalidArgumentError(absl::StrCat("seed '", value, "' is not a number"));
      }
    } else if (key == "overflow") {
      absl::StatusOr<Overflow> o = ParseOverflow(value);
      if (o.ok()) convert.overflow = *o;
      status = o.status();
    } else if (key == "subnormals") {
      absl::StatusOr<Subnormals> s = ParseSubnormals(value);
      if (s.ok()) convert.subnormals = *s;
      status = s.status();
    } else {
      return UnknownOption(base, key, "rounding, seed, overflow, subnormals");
    }
    if (!status.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("scheme '", base, "': ", status.message()));
    }
    absl::StrAppend(&name, ":", key, "=", value);
  }
  if (absl::Status valid = ValidateOptions(*format, convert); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("scheme '", base, "': ", valid.message()));
  }
  return std::unique_ptr<Scheme>(new CastScheme(std::move(name), *std::move(format), convert));
}

std::vector<SchemeFamily> CastFamilies() {
  return {{"cast",
           {"fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2", "fp6_e2m3fn", "fp4_e2m1fn", "tf32"},
           "Every element rounded to the format and read back, no scale: "
           "q = decode(encode(x)) by the reference's rules (nearest-even unless :rounding= "
           "says otherwise; the format's own overflow policy: fp16 and bf16 overflow to inf, "
           "fn formats to NaN, fp6/fp4 saturate). Any floating catalog or user-defined format "
           "(formats: 'lowp formats'). Bits per weight: the format's width.",
           "rounding=nearest-even|nearest-away|toward-zero|toward-positive|toward-negative|"
           "odd|stochastic, seed=N, overflow=saturate|inf|nan, subnormals=keep|ftz|daz|ftz-daz"}};
}

}  // namespace lowp::internal
