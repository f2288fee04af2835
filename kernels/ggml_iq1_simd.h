// Internal to kernels/: ggml's iq1_s and iq1_m with SIMD searches
// (kernels/ggml_iq1_simd.cc), the bytes of codecs' Encode.
#ifndef LOWP_KERNELS_GGML_IQ1_SIMD_H_
#define LOWP_KERNELS_GGML_IQ1_SIMD_H_

#include <cstdint>
#include <span>

#include "codecs/ggml.h"

namespace lowp::kernels {

// Encodes in.size() / 256 whole blocks of kIQ1_S or kIQ1_M (sizes and the
// importance iq1_s requires checked by the caller); importance is empty
// (iq1_m only) or in.size() weights. Counts nothing in `clipped` (as
// Encode: every octet takes a whole grid point).
void EncodeIq1Fast(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                   uint64_t& clipped, std::span<const float> importance);

}  // namespace lowp::kernels

#endif  // LOWP_KERNELS_GGML_IQ1_SIMD_H_
