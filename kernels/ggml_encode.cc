// The table from a ggml type to its SIMD encoder; types without one run
// codecs' scalar Encode.
#include "kernels/ggml_encode.h"

#include <cstdint>
#include <span>

#include "codecs/ggml.h"
#include "kernels/ggml_iq1_simd.h"
#include "kernels/ggml_iq2_simd.h"
#include "kernels/ggml_iq3_simd.h"
#include "kernels/ggml_iq4_simd.h"
#include "kernels/ggml_kquants_simd.h"
#include "kernels/ggml_legacy_simd.h"

namespace lowp::kernels {
namespace {

// Encodes in.size() / block whole blocks of `type` (sizes already checked);
// importance is empty or in.size() weights. Adds clamped codes to *clipped.
using FastEncoder = void (*)(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                             uint64_t& clipped, std::span<const float> importance);

struct FastCodec {
  ggml::Type type;
  FastEncoder encode;
};

// One entry per type with a SIMD encoder.
constexpr FastCodec kFast[] = {
    // kernels/ggml_kquants_simd.h: one sub-block per lane.
    {ggml::Type::kQ2_K, EncodeKQuantSimd},
    {ggml::Type::kQ3_K, EncodeKQuantSimd},
    {ggml::Type::kQ4_K, EncodeKQuantSimd},
    {ggml::Type::kQ5_K, EncodeKQuantSimd},
    {ggml::Type::kQ6_K, EncodeKQuantSimd},
    // kernels/ggml_legacy_simd.h: without importance, a block's elements in
    // vectors; with it (not q8_0), EncodeLegacyWeightedSimd's one block per lane.
    {ggml::Type::kQ4_0, EncodeLegacySimd},
    {ggml::Type::kQ4_1, EncodeLegacySimd},
    {ggml::Type::kQ5_0, EncodeLegacySimd},
    {ggml::Type::kQ5_1, EncodeLegacySimd},
    {ggml::Type::kQ8_0, EncodeLegacySimd},
    // kernels/ggml_iq*_simd.h: the candidate scales or trials of a group in lanes.
    {ggml::Type::kIQ4_NL, EncodeIq4Fast},
    {ggml::Type::kIQ4_XS, EncodeIq4Fast},
    {ggml::Type::kIQ3_XXS, EncodeIq3Fast},
    {ggml::Type::kIQ2_XXS, EncodeIq2Fast},
    {ggml::Type::kIQ2_XS, EncodeIq2Fast},
    {ggml::Type::kIQ2_S, EncodeIq2Fast},
    {ggml::Type::kIQ3_S, EncodeIq3Fast},
    // kernels/ggml_iq1_simd.h: one group per lane.
    {ggml::Type::kIQ1_S, EncodeIq1Fast},
    {ggml::Type::kIQ1_M, EncodeIq1Fast},
};

FastEncoder FindFast(ggml::Type type) {
  for (const FastCodec& c : kFast) {
    if (c.type == type) return c.encode;
  }
  return nullptr;
}

}  // namespace

bool HasFastGgmlEncoder(ggml::Type type) { return FindFast(type) != nullptr; }

absl::Status EncodeGgml(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                        uint64_t* clipped, std::span<const float> importance) {
  const FastEncoder fast = FindFast(type);
  if (fast == nullptr) return ggml::Encode(type, in, out, clipped, importance);
  // Encode's checks, on an empty input of the same shape (no work done).
  if (absl::Status s = ggml::CheckEncode(type, in.size(), out.size(), importance.size()); !s.ok()) {
    return s;
  }
  uint64_t count = 0;
  fast(type, in, out, count, importance);
  if (clipped != nullptr) *clipped += count;
  return absl::OkStatus();
}

}  // namespace lowp::kernels
