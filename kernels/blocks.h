// Per-element kernels of the block-scaled schemes whose element rule is not
// kernels/quantize.h's integer grid: ggml's legacy q-types (one product, one
// bias, truncation) and codebooks (NF4: thresholds and a table of values).
// The caller computes each block's parameters (a scale and its inverse,
// already rounded as the format stores them); these kernels apply them to
// every element. Written with Highway, dispatched at run time; each has a
// scalar twin `...Ref` that states its rule, and the SIMD versions give the
// same bits on every target.
#ifndef LOWP_KERNELS_BLOCKS_H_
#define LOWP_KERNELS_BLOCKS_H_

#include <cstdint>
#include <span>

namespace lowp {

// Per block of `block` elements along rows of `cols` (a row's last block is
// short when block does not divide cols): the signed element of largest |x|
// over the finite elements, the first one on ties of magnitude (ggml's
// `if (amax < fabsf(v))` scan), 0 when none. max.size() is rows * ceil(cols
// / block).
void BlockSignedMax(std::span<const float> x, int64_t cols, int64_t block, std::span<float> max);
void BlockSignedMaxRef(std::span<const float> x, int64_t cols, int64_t block, std::span<float> max);

// ggml's element rules (ggml-quants.c quantize_row_*_ref, dequantize_row_*),
// per block g with id[g] the inverse of the unrounded scale, d[g] the scale as
// stored (fp16, decoded) and, for kOffset, min[g] the unrounded block minimum
// and m[g] the stored one, all in float32 without fused operations:
//   kTrunc   q4_0, q5_0: q = trunc(x * id + bias) clamped to [0, qmax],
//            out = (q - zero) * d
//   kOffset  q4_1, q5_1: q = trunc((x - min) * id + bias) clamped to
//            [0, qmax], out = q * d + m
//   kRound   q8_0: q = roundf(x * id) (half away from zero) clamped to
//            [-128, 127], out = q * d
// A NaN before the clamp gives q = zero (kRound: 0); a non-finite x is
// copied to out. Returns the finite elements whose q was clamped (for
// kTrunc and kOffset: v >= qmax + 1 or v <= -1; for kRound: beyond int8).
enum class GgmlRule { kTrunc, kOffset, kRound };
struct GgmlElementRule {
  GgmlRule rule = GgmlRule::kTrunc;
  float bias = 0;
  int32_t qmax = 0;
  int32_t zero = 0;
};
struct GgmlBlockParams {
  std::span<const float> id, d, min, m;  // min and m only for kOffset
};
uint64_t QuantizeGgmlBlocks(const GgmlElementRule& rule, std::span<const float> x, int64_t cols,
                            int64_t block, const GgmlBlockParams& params, std::span<float> out);
uint64_t QuantizeGgmlBlocksRef(const GgmlElementRule& rule, std::span<const float> x, int64_t cols,
                               int64_t block, const GgmlBlockParams& params, std::span<float> out);

// A codebook of up to 16 values with the thresholds between them (NF4):
// per block g, y = x * inverse[g] (one float32 product), code = the number of
// thresholds t with y > t (so a tie goes to the lower code, and a NaN y gets
// 0), out = values[code] * scale[g]. A non-finite x is copied to out.
// thresholds.size() is values.size() - 1.
void QuantizeCodebookBlocks(std::span<const float> x, int64_t cols, int64_t block,
                            std::span<const float> inverse, std::span<const float> scale,
                            std::span<const float> thresholds, std::span<const float> values,
                            std::span<float> out);
void QuantizeCodebookBlocksRef(std::span<const float> x, int64_t cols, int64_t block,
                               std::span<const float> inverse, std::span<const float> scale,
                               std::span<const float> thresholds, std::span<const float> values,
                               std::span<float> out);

// The two element loops of a block-scaled float format (MX) around the
// rounding of its elements:
//   ScaleBlocks:   v = ((finite x ? x : 0) * multiplier[g]) * post (two
//                  float32 products), clamped to [-limit, limit] when `clamp`;
//                  returns the finite x with |v| > limit (before the clamp).
//   UnscaleBlocks: out = finite x ? clamp(v * scale[g], +-FLT_MAX) : x, from
//                  the rounded v; returns the v with 0 < |v| < subnormal_below.
uint64_t ScaleBlocks(std::span<const float> x, int64_t cols, int64_t block,
                     std::span<const float> multiplier, float post, float limit, bool clamp,
                     std::span<float> v);
uint64_t ScaleBlocksRef(std::span<const float> x, int64_t cols, int64_t block,
                        std::span<const float> multiplier, float post, float limit, bool clamp,
                        std::span<float> v);
uint64_t UnscaleBlocks(std::span<const float> x, std::span<const float> v, int64_t cols,
                       int64_t block, std::span<const float> scale, float subnormal_below,
                       std::span<float> out);
uint64_t UnscaleBlocksRef(std::span<const float> x, std::span<const float> v, int64_t cols,
                          int64_t block, std::span<const float> scale, float subnormal_below,
                          std::span<float> out);

// The scaled-float schemes' division (FORMAT-channel, FORMAT-tensor): per
// block g, v = x / divisor[g] for a finite x (one float32 division), +-0 of
// x's sign where divisor[g] is 0, and 0 for a non-finite x; returns the
// finite x with |v| > limit (limit >= 0). UnscaleBlocks brings the rounded v
// back.
uint64_t DivideBlocks(std::span<const float> x, int64_t cols, int64_t block,
                      std::span<const float> divisor, float limit, std::span<float> v);
uint64_t DivideBlocksRef(std::span<const float> x, int64_t cols, int64_t block,
                         std::span<const float> divisor, float limit, std::span<float> v);

// Per block: the min and max of its elements with every non-finite element
// read as 0 (the ggml codec schemes encode it as 0); a zero result is +0
// whatever zeros the block holds. min.size() == max.size() is rows *
// ceil(cols / block).
void BlockMinMaxNonFiniteAsZero(std::span<const float> x, int64_t cols, int64_t block,
                                std::span<float> min, std::span<float> max);
void BlockMinMaxNonFiniteAsZeroRef(std::span<const float> x, int64_t cols, int64_t block,
                                   std::span<float> min, std::span<float> max);

// ggml's e2m1 element rule of MXFP4 and NVFP4 (ggml-quants.c
// best_index_mxfp4): per block g with e = half_scale[g] (the scale at half
// its value, finite and >= 0) and the doubled values kvalues_mxfp4 = {0, 1,
// 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}, code = the first i of
// least fabsf(kvalues[i] * e - x) (float32: ties go to the smaller
// magnitude), out = kvalues[code] * e. A non-finite x is encoded as 0 and
// copied to out. Returns the elements with |x| > 12 * e (ggml's clipped).
uint64_t QuantizeGgmlFp4Blocks(std::span<const float> x, int64_t cols, int64_t block,
                               std::span<const float> half_scale, std::span<float> out);
uint64_t QuantizeGgmlFp4BlocksRef(std::span<const float> x, int64_t cols, int64_t block,
                                  std::span<const float> half_scale, std::span<float> out);

}  // namespace lowp

#endif  // LOWP_KERNELS_BLOCKS_H_
