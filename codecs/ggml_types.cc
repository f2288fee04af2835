// The ggml type table (ggml.c's type_traits: block size and bytes per block)
// and the dispatch from a type to its block codec.
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codecs/ggml.h"
#include "codecs/ggml_blocks.h"
#include "codecs/ggml_ops.h"

namespace lowp::ggml {
namespace {

// x: one block's elements; qw: their importance (null without one).
using EncodeBlock = void (*)(const float* x, const float* qw, uint8_t* out, uint64_t& clipped);
using DecodeBlock = void (*)(const uint8_t*, float*);

struct Codec {
  Type type;
  EncodeBlock encode;
  DecodeBlock decode;
};

namespace in = internal;

constexpr TypeInfo kTypes[] = {
    {Type::kF32, "f32", 1, 4, false, false, false},
    {Type::kF16, "f16", 1, 2, false, false, false},
    {Type::kQ4_0, "q4_0", 32, 18, true, true, false},
    {Type::kQ4_1, "q4_1", 32, 20, true, true, false},
    {Type::kQ5_0, "q5_0", 32, 22, true, true, false},
    {Type::kQ5_1, "q5_1", 32, 24, true, true, false},
    {Type::kQ8_0, "q8_0", 32, 34, true, true, false},
    {Type::kQ8_1, "q8_1", 32, 36, false, false, false},
    {Type::kQ2_K, "q2_K", 256, 84, true, true, false},
    {Type::kQ3_K, "q3_K", 256, 110, true, true, false},
    {Type::kQ4_K, "q4_K", 256, 144, true, true, false},
    {Type::kQ5_K, "q5_K", 256, 176, true, true, false},
    {Type::kQ6_K, "q6_K", 256, 210, true, true, false},
    {Type::kQ8_K, "q8_K", 256, 292, false, false, false},
    {Type::kIQ2_XXS, "iq2_xxs", 256, 66, true, true, true},
    {Type::kIQ2_XS, "iq2_xs", 256, 74, true, true, true},
    {Type::kIQ3_XXS, "iq3_xxs", 256, 98, true, true, false},
    {Type::kIQ1_S, "iq1_s", 256, 50, true, true, true},
    {Type::kIQ4_NL, "iq4_nl", 32, 18, true, true, false},
    {Type::kIQ3_S, "iq3_s", 256, 110, true, true, false},
    {Type::kIQ2_S, "iq2_s", 256, 82, true, true, false},
    {Type::kIQ4_XS, "iq4_xs", 256, 136, true, true, false},
    {Type::kI8, "i8", 1, 1, false, false, false},
    {Type::kI16, "i16", 1, 2, false, false, false},
    {Type::kI32, "i32", 1, 4, false, false, false},
    {Type::kI64, "i64", 1, 8, false, false, false},
    {Type::kF64, "f64", 1, 8, false, false, false},
    {Type::kIQ1_M, "iq1_m", 256, 56, true, true, false},
    {Type::kBF16, "bf16", 1, 2, false, false, false},
    {Type::kTQ1_0, "tq1_0", 256, 54, true, false, false},
    {Type::kTQ2_0, "tq2_0", 256, 66, true, false, false},
    {Type::kMXFP4, "mxfp4", 32, 17, true, true, false},
    {Type::kNVFP4, "nvfp4", 64, 36, true, true, false},
    {Type::kQ1_0, "q1_0", 128, 18, true, false, false},
    {Type::kQ2_0, "q2_0", 64, 18, true, false, false},
};

constexpr Codec kCodecs[] = {
    {Type::kQ4_0, in::EncodeQ4_0, in::DecodeQ4_0},   {Type::kQ4_1, in::EncodeQ4_1, in::DecodeQ4_1},
    {Type::kQ5_0, in::EncodeQ5_0, in::DecodeQ5_0},   {Type::kQ5_1, in::EncodeQ5_1, in::DecodeQ5_1},
    {Type::kQ8_0, in::EncodeQ8_0, in::DecodeQ8_0},   {Type::kQ2_K, in::EncodeQ2_K, in::DecodeQ2_K},
    {Type::kQ3_K, in::EncodeQ3_K, in::DecodeQ3_K},   {Type::kQ4_K, in::EncodeQ4_K, in::DecodeQ4_K},
    {Type::kQ5_K, in::EncodeQ5_K, in::DecodeQ5_K},   {Type::kQ6_K, in::EncodeQ6_K, in::DecodeQ6_K},
    {Type::kIQ4_NL, in::EncodeIq4Nl, in::DecodeIq4Nl}, {Type::kIQ4_XS, in::EncodeIq4Xs, in::DecodeIq4Xs},
    {Type::kMXFP4, in::EncodeMxfp4, in::DecodeMxfp4}, {Type::kNVFP4, in::EncodeNvfp4, in::DecodeNvfp4},
    {Type::kIQ2_XXS, in::EncodeIq2Xxs, in::DecodeIq2Xxs},
    {Type::kIQ2_XS, in::EncodeIq2Xs, in::DecodeIq2Xs},
    {Type::kIQ2_S, in::EncodeIq2S, in::DecodeIq2S},
    {Type::kIQ1_S, in::EncodeIq1S, in::DecodeIq1S},
    {Type::kIQ1_M, in::EncodeIq1M, in::DecodeIq1M},
    {Type::kIQ3_XXS, in::EncodeIq3Xxs, in::DecodeIq3Xxs},
    {Type::kIQ3_S, in::EncodeIq3S, in::DecodeIq3S},
    // Decoded only.
    {Type::kTQ1_0, nullptr, in::DecodeTq1_0},        {Type::kTQ2_0, nullptr, in::DecodeTq2_0},
    {Type::kQ1_0, nullptr, in::DecodeQ1_0},          {Type::kQ2_0, nullptr, in::DecodeQ2_0},
};

const Codec* FindCodec(Type type) {
  for (const Codec& c : kCodecs) {
    if (c.type == type) return &c;
  }
  return nullptr;
}

absl::Status CheckSizes(const TypeInfo& info, size_t elements, size_t bytes) {
  if (elements % static_cast<size_t>(info.block) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("ggml type ", info.name, ": ", elements,
                                                   " elements are not whole blocks of ",
                                                   info.block));
  }
  if (bytes != elements / static_cast<size_t>(info.block) * static_cast<size_t>(info.bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("ggml type ", info.name, ": ", elements,
                                                   " elements take ",
                                                   elements / info.block * info.bytes,
                                                   " bytes, not ", bytes));
  }
  return absl::OkStatus();
}

}  // namespace

const TypeInfo* FindType(uint32_t id) {
  for (const TypeInfo& info : kTypes) {
    if (static_cast<uint32_t>(info.type) == id) return &info;
  }
  return nullptr;
}

const TypeInfo* FindType(absl::string_view name) {
  for (const TypeInfo& info : kTypes) {
    if (absl::EqualsIgnoreCase(info.name, name)) return &info;
  }
  return nullptr;
}

const TypeInfo& Info(Type type) { return *FindType(static_cast<uint32_t>(type)); }

std::span<const TypeInfo> AllTypes() { return kTypes; }

absl::Status CheckEncode(Type type, size_t elements, size_t bytes, size_t weights) {
  const TypeInfo& info = Info(type);
  const Codec* codec = FindCodec(type);
  if (codec == nullptr || codec->encode == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("ggml type ", info.name, ": lowp cannot encode it"));
  }
  if (absl::Status s = CheckSizes(info, elements, bytes); !s.ok()) return s;
  if (weights != 0 && weights != elements) {
    return absl::InvalidArgumentError(absl::StrCat("ggml type ", info.name, ": ", weights,
                                                   " importance weights for ", elements,
                                                   " elements"));
  }
  if (weights == 0 && info.needs_importance) {
    return absl::InvalidArgumentError(absl::StrCat(
        "ggml type ", info.name, " needs an importance matrix (ggml's quantizer requires one)"));
  }
  return absl::OkStatus();
}

absl::Status Encode(Type type, std::span<const float> in, std::span<uint8_t> out,
                    uint64_t* clipped, std::span<const float> importance) {
  if (absl::Status s = CheckEncode(type, in.size(), out.size(), importance.size()); !s.ok()) {
    return s;
  }
  const TypeInfo& info = Info(type);
  const Codec* codec = FindCodec(type);
  uint64_t count = 0;
  const size_t block = static_cast<size_t>(info.block), bytes = static_cast<size_t>(info.bytes);
  // With importance, q4_0..q5_1 weigh by the whole row's mean square.
  const bool by_row = !importance.empty() && in::EncodeLegacyRow(type, in.data(), importance.data(),
                                                                 in.size(), out.data(), count);
  for (size_t b = 0; !by_row && b < in.size() / block; ++b) {
    const float* qw = importance.empty() ? nullptr : importance.data() + b * block;
    codec->encode(in.data() + b * block, qw, out.data() + b * bytes, count);
  }
  if (clipped != nullptr) *clipped += count;
  return absl::OkStatus();
}

absl::Status Decode(Type type, std::span<const uint8_t> in, std::span<float> out) {
  const TypeInfo& info = Info(type);
  const Codec* codec = FindCodec(type);
  if (codec == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("ggml type ", info.name, ": lowp cannot decode it"));
  }
  if (absl::Status s = CheckSizes(info, out.size(), in.size()); !s.ok()) return s;
  const size_t block = static_cast<size_t>(info.block), bytes = static_cast<size_t>(info.bytes);
  for (size_t b = 0; b < out.size() / block; ++b) {
    codec->decode(in.data() + b * bytes, out.data() + b * block);
  }
  return absl::OkStatus();
}

uint16_t Fp32ToFp16(float x) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t abs = bits & 0x7fffffff;
  if (abs > 0x7f800000) return sign | 0x7e00;   // NaN
  if (abs >= 0x477ff000) return sign | 0x7c00;  // >= 65520 rounds to infinity
  if (abs >= 0x38800000) {                      // normal: rebias, round 13 bits away
    const uint32_t r = abs - 0x38000000;
    uint32_t q = r >> 13;
    const uint32_t rest = r & 0x1fff;
    q += rest > 0x1000 || (rest == 0x1000 && (q & 1));
    return static_cast<uint16_t>(sign | q);
  }
  // Subnormal or zero: the value in units of 2^-24, rounded to even.
  const uint32_t exp = abs >> 23;
  if (exp < 102) return sign;  // below 2^-25: rounds to zero (2^-25 itself is a tie to 0)
  const uint32_t mant = (abs & 0x7fffff) | 0x800000;
  const uint32_t shift = 126 - exp;  // 14..24
  uint32_t q = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1), half = 1u << (shift - 1);
  q += rest > half || (rest == half && (q & 1));
  return static_cast<uint16_t>(sign | q);
}

float Fp16ToFp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
  if (exp == 0) {
    const float v = static_cast<float>(mant) * 0x1p-24f;  // exact
    return sign ? -v : v;
  }
  const uint32_t bits =
      exp == 31 ? sign | 0x7f800000 | (mant << 13) : sign | ((exp + 112) << 23) | (mant << 13);
  return std::bit_cast<float>(bits);
}

}  // namespace lowp::ggml
