// Internal to kernels/: ggml's iq2_xxs, iq2_xs and iq2_s with a SIMD trial
// search (kernels/ggml_iq2_simd.cc), the bytes of codecs' Encode.
#ifndef LOWP_KERNELS_GGML_IQ2_SIMD_H_
#define LOWP_KERNELS_GGML_IQ2_SIMD_H_

#include <cstdint>
#include <span>

#include "codecs/ggml.h"

namespace lowp::kernels {

// Encodes in.size() / 256 whole blocks of kIQ2_XXS, kIQ2_XS or kIQ2_S
// (sizes and the importance iq2_xxs / iq2_xs require checked by the
// caller); importance is empty or in.size() weights. Counts nothing in
// `clipped` (as Encode: every octet takes a whole grid point).
void EncodeIq2Fast(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                   uint64_t& clipped, std::span<const float> importance);

}  // namespace lowp::kernels

#endif  // LOWP_KERNELS_GGML_IQ2_SIMD_H_
