// Internal to kernels/: ggml's iq3_xxs and iq3_s with a SIMD trial search
// (kernels/ggml_iq3_simd.cc), the bytes of codecs' Encode.
#ifndef LOWP_KERNELS_GGML_IQ3_SIMD_H_
#define LOWP_KERNELS_GGML_IQ3_SIMD_H_

#include <cstdint>
#include <span>

#include "codecs/ggml.h"

namespace lowp::kernels {

// Encodes in.size() / 256 whole blocks of kIQ3_XXS or kIQ3_S (sizes checked
// by the caller); importance is empty or in.size() weights. Adds the
// clipped count codecs' Encode adds.
void EncodeIq3Fast(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                   uint64_t& clipped, std::span<const float> importance);

}  // namespace lowp::kernels

#endif  // LOWP_KERNELS_GGML_IQ3_SIMD_H_
