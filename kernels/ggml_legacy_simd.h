// ggml's legacy 32-element types without importance (q4_0, q4_1, q5_0, q5_1,
// q8_0: quantize_row_*_ref) with each block's elements in vectors: the block
// statistic (signed max of |x|, or min and max) by a vector reduction, the
// scale and its inverse as the scalar code computes them, every element's
// code and the nibble / high-bit packing in SIMD. Bytes and clamp counts
// equal ggml::Encode's (codecs/ggml_legacy.cc), NaN and Inf included.
#ifndef LOWP_KERNELS_GGML_LEGACY_SIMD_H_
#define LOWP_KERNELS_GGML_LEGACY_SIMD_H_

#include <cstdint>
#include <span>

#include "codecs/ggml.h"

namespace lowp::kernels {

// The EncodeGgml table's encoder for the five types (kernels/ggml_encode.cc):
// in.size() / 32 whole blocks of one row (sizes and importance already
// checked). With importance, q4_0..q5_1 run EncodeLegacyWeightedSimd
// (kernels/ggml_kquants_simd.h); q8_0 ignores it, as ggml does.
void EncodeLegacySimd(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                      uint64_t& clipped, std::span<const float> importance);

}  // namespace lowp::kernels

#endif  // LOWP_KERNELS_GGML_LEGACY_SIMD_H_
