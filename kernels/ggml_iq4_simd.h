// Internal to kernels/: ggml's iq4_nl and iq4_xs with a SIMD scale search
// (kernels/ggml_iq4_simd.cc), the bytes of codecs' Encode.
#ifndef LOWP_KERNELS_GGML_IQ4_SIMD_H_
#define LOWP_KERNELS_GGML_IQ4_SIMD_H_

#include <cstddef>
#include <cstdint>
#include <span>

#include "codecs/ggml.h"

namespace lowp::kernels {

// Encodes in.size() / block whole blocks of kIQ4_NL or kIQ4_XS (sizes
// checked by the caller); importance is empty or in.size() weights. Adds the
// clamped codes to `clipped`.
void EncodeIq4Fast(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                   uint64_t& clipped, std::span<const float> importance);

// The grid value the search gives each of n inputs a (codecs' Iq4BestIndex,
// as a value), by the running target: lets tests check every float near a
// decision boundary.
void Iq4NearestValues(const float* a, size_t n, float* q);

}  // namespace lowp::kernels

#endif  // LOWP_KERNELS_GGML_IQ4_SIMD_H_
