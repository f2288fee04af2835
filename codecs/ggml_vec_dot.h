// What llama.cpp's CPU backend does to the input of a matrix product before
// it multiplies (ggml-cpu.c, ggml_compute_forward_mul_mat): each input row is
// converted by from_float to the weight type's vec_dot_type, and the dot
// products run on the converted blocks. Here the conversion, as the values
// the converted row stands for, by ggml's reference quantizers
// (ggml-quants.c, the generic build's; the AVX2 build's q8_0/q8_1 round half
// to even where these round half away, and take 127/amax for 1/d):
//   q8_0, q8_1  per 32: d = amax / 127, q = roundf(x / d) (x * (1/d)), the
//               value fp16(d) * q (q8_1's sum field is left out: the dot
//               products of q4_1 and q5_1 weights use fp16(d * sum q) where
//               these values give fp16(d) * sum q)
//   q8_K        per 256: the element of largest magnitude m (the first),
//               iscale = -127 / m, q = min(127, nearest-even(iscale * x)),
//               the value (1 / iscale) * q in float32
//   f16, bf16   each value rounded to nearest even
//   f32         unchanged
// The dot products' own sums are float32 in ggml too, in another order
// (block sums of integer products times the two scales): the emulation
// gives the same inputs, not the same last bits.
#ifndef LOWP_CODECS_GGML_VEC_DOT_H_
#define LOWP_CODECS_GGML_VEC_DOT_H_

#include <cstdint>
#include <optional>
#include <span>

#include "codecs/ggml.h"

namespace lowp::ggml {

// The vec_dot_type of weights of type `type` (type_traits_cpu): q8_0 for
// q4_0, q5_0, q8_0, iq4_nl, mxfp4 and nvfp4; q8_1 for q4_1 and q5_1; q8_K
// for the k-quants, the i-quants but iq4_nl, tq1_0 and tq2_0; the type
// itself for f32, f16 and bf16. None for a type whose product lowp does not
// emulate (q1_0, q2_0, the integer types).
std::optional<Type> VecDotType(Type type);

// Rows of `in` as the conversion to `vec_dot_type` leaves them, into `out`
// (same size; may be `in`). Rows must be whole blocks of the type (32 for
// q8_0 and q8_1, 256 for q8_K), as every row a weight of that type takes is.
void RoundForVecDot(Type vec_dot_type, std::span<const float> in, std::span<float> out);

}  // namespace lowp::ggml

#endif  // LOWP_CODECS_GGML_VEC_DOT_H_
