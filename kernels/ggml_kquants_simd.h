// ggml's k-quants (q2_K..q6_K) and its importance-weighted legacy types
// (q4_0, q4_1, q5_0, q5_1 with importance) at SIMD speed: each vector lane
// fits one group (a k-quant's 16 or 32-element sub-block, a legacy 32-element
// block) with ggml's own sequence of float operations, so every group's fit
// is the scalar search's bit for bit; codecs' Finish/Store functions then
// quantize the scales and pack the bytes. Bytes equal ggml::Encode's.
#ifndef LOWP_KERNELS_GGML_KQUANTS_SIMD_H_
#define LOWP_KERNELS_GGML_KQUANTS_SIMD_H_

#include <cstdint>
#include <span>

#include "codecs/ggml.h"

namespace lowp::kernels {

// The EncodeGgml table's encoders (kernels/ggml_encode.cc): in.size() / block
// whole blocks of one row (sizes and importance already checked: empty or
// in.size() weights); adds clamped codes to `clipped`. The legacy types
// without importance run ggml::Encode.
void EncodeKQuantSimd(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                      uint64_t& clipped, std::span<const float> importance);
void EncodeLegacyWeightedSimd(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                              uint64_t& clipped, std::span<const float> importance);

}  // namespace lowp::kernels

#endif  // LOWP_KERNELS_GGML_KQUANTS_SIMD_H_
