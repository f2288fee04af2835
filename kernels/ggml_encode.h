// ggml's quantizers at SIMD speed: the bytes of codecs/ggml.h's Encode (the
// scalar specification, checked against ggml itself), produced faster where a
// type's scale search has a Highway form here, and by Encode itself where it
// has not. Every type's bytes equal Encode's for every input and importance.
#ifndef LOWP_KERNELS_GGML_ENCODE_H_
#define LOWP_KERNELS_GGML_ENCODE_H_

#include <cstdint>
#include <span>

#include "absl/status/status.h"
#include "codecs/ggml.h"

namespace lowp::kernels {

// ggml::Encode's contract (sizes, importance, errors) and bytes.
absl::Status EncodeGgml(ggml::Type type, std::span<const float> in, std::span<uint8_t> out,
                        uint64_t* clipped = nullptr, std::span<const float> importance = {});

// Whether EncodeGgml has a SIMD path for `type` (tests and benchmarks).
bool HasFastGgmlEncoder(ggml::Type type);

}  // namespace lowp::kernels

#endif  // LOWP_KERNELS_GGML_ENCODE_H_
