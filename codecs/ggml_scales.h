// The block scales of ggml's fp4 types, as ggml encodes and decodes them:
// mxfp4's E8M0 exponent and nvfp4's unsigned E4M3, each at half its value
// (ggml's e2m1 table holds the codes' values doubled). For codecs' MXFP4 and
// NVFP4 and for quant's schemes that compute the same values without bytes.
#ifndef LOWP_CODECS_GGML_SCALES_H_
#define LOWP_CODECS_GGML_SCALES_H_

#include <cstdint>

namespace lowp::ggml {

// 2^(e - 128), the denormals for e < 2.
float E8m0Half(uint8_t e);

// An unsigned e4m3 scale at half its value; 0 and 0x7F give 0.
float Ue4m3Half(uint8_t x);

// Rounds half up on the mantissa's first dropped bit, saturates at 448
// (0x7E), flushes what is below half the least subnormal (0 for x <= 0 or
// NaN).
uint8_t ToUe4m3(float x);

}  // namespace lowp::ggml

#endif  // LOWP_CODECS_GGML_SCALES_H_
