// Writing quantized Linear weights as the checkpoints io/packed_tensors.h and
// io/scaled_tensors.h read: the bytes of each stored tensor of one weight
// PREFIX, given its integer (or FP4 / FP8) codes, scales, zero points and
// group indices. The bit layouts are the readers' (io/packed_tensors.h);
// what each layout stores:
//
//   kGptq            AutoGPTQ's .qweight (codes packed along K, b-bit fields
//                    of a stream of words, transposed), .qzeros (packed
//                    along N; v1 stores z - 1, gptq_v2 z; symmetric writes
//                    z = 2^(b-1)), .scales [G, N] and, when asked, .g_idx.
//                    K * b and N * b must be multiples of 32.
//   kCompressedInt   compressed-tensors "pack-quantized": .weight_packed
//                    (32 / b fields a word along K, the last word padded),
//                    .weight_scale (group, channel or tensor),
//                    .weight_zero_point when not symmetric (packed along N),
//                    .weight_shape and, when asked, .weight_g_idx.
//   kCompressedNvfp4 compressed-tensors "nvfp4-pack-quantized": e2m1 nibble
//                    pairs, F8_E4M3 scales of groups of 16, an F32 global
//                    scale the reader divides by. K must be even.
//   kCompressedFp8   compressed-tensors "float-quantized": .weight, the FP8
//                    codes [N, K] as they are, and .weight_scale per tensor,
//                    channel, 2-D block or group.
//
// The writer checks every value against its field and dtype (a code, zero
// point or scale that the file cannot hold is refused, never clipped or
// rounded), so what the reader gives back is exactly the formula of the
// layout applied to the inputs. config.json's quantization_config is the
// caller's to write; it must declare the same bits, groups and symmetry.
#ifndef LOWP_IO_PACKED_WRITER_H_
#define LOWP_IO_PACKED_WRITER_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "io/tensor.h"

namespace lowp {

enum class WrittenLayout : uint8_t { kGptq, kCompressedInt, kCompressedNvfp4, kCompressedFp8 };

// The fields that do not apply to a layout must keep their defaults (a
// per_tensor GPTQ weight, a block_rows or g_idx outside FP8 / the integer
// layouts are refused); bits is read only by the integer layouts and
// scale_dtype not by NVFP4.
struct PackSpec {
  WrittenLayout layout = WrittenLayout::kGptq;
  int64_t rows = 0;  // N, out_features: the weight is [N, K]
  int64_t cols = 0;  // K, in_features
  int bits = 4;      // GPTQ: 2, 3, 4 or 8; compressed-tensors int: 2 to 8
  // compressed-tensors int: no zero points written when true. GPTQ always
  // writes qzeros (2^(b-1) everywhere when true).
  bool symmetric = true;
  bool gptq_v2 = false;             // GPTQ: qzeros hold z (v2) instead of z - 1 (v1)
  int64_t group_cols = 0;           // columns of a group along K, positive (K or more: one per row)
  bool per_tensor = false;          // compressed-tensors int and FP8: one scale
  int64_t block_rows = 0;           // FP8 2-D blocks of block_rows x group_cols; 0: none
  bool g_idx = false;               // write GPTQ's g_idx / compressed-tensors' weight_g_idx
  DType scale_dtype = DType::kF16;  // kF16, kBF16 or kF32 (NVFP4: always F8_E4M3)
  DType element_dtype = DType::kF8E4M3;  // FP8: kF8E4M3 or kF8E5M2
};

// One stored tensor of a written weight: PREFIX + suffix.
struct PackPart {
  std::string suffix;  // ".qweight", ".weight_packed", ".weight", ...
  DType dtype;
  std::vector<int64_t> shape;
};

// The tensors weight PREFIX is written as, in the order Pack gives their
// bytes (G = ceil(K / group_cols), pf = 32 / b rounded down):
//   GPTQ:    .qweight I32 [K*b/32, N], .qzeros I32 [G, N*b/32],
//            .scales [G, N], .g_idx I32 [K] (AutoGPTQ always writes one)
//   CT int:  .weight_packed I32 [N, ceil(K/pf)], .weight_scale [N, G]
//            ([N, 1] when group_cols is K, [1] per tensor),
//            .weight_zero_point I32 [ceil(N/pf), G] (not symmetric),
//            .weight_shape I64 [2], .weight_g_idx I32 [K]
//   NVFP4:   .weight_packed U8 [N, K/2], .weight_scale F8_E4M3
//            [N, ceil(K/16)], .weight_global_scale F32 [1]
//   FP8:     .weight [N, K], .weight_scale [1] per tensor,
//            [ceil(N/R), ceil(K/C)] for blocks of R = block_rows by
//            C = group_cols, else [N, G] ([N, 1] per channel)
// g_idx and the zero points only where the spec asks for them. Scales are
// spec.scale_dtype except NVFP4's. InvalidArgument naming the field of the
// spec that does not fit the layout (bits, sides beyond 2^31 or that do not
// fill whole words, a group size that is not positive, ...).
absl::StatusOr<std::vector<PackPart>> PackParts(const PackSpec& spec);

struct PackInput {
  // [N, K] row-major: GPTQ and compressed-tensors int the unsigned field
  // 0..2^b-1 as the file stores it (for compressed-tensors the signed q plus
  // 2^(b-1)); NVFP4 the e2m1 code 0..15; FP8 the code byte 0..255.
  std::span<const int32_t> codes;
  // The scale values, each exactly representable in its part's dtype and
  // finite: [N, G] row-major (G = 1 per channel), one value per tensor,
  // [ceil(N/R), ceil(K/C)] for FP8 blocks.
  std::span<const float> scales;
  // [N, G]: zero points as W = s * (q - z) uses them (not minus one), GPTQ
  // v2 and compressed-tensors 0..2^b-1, GPTQ v1 1..2^b (it stores z - 1: 0
  // cannot be stored). Empty when symmetric.
  std::span<const int32_t> zeros;
  // [K]: the group of each column in [0, G) when spec.g_idx; empty writes
  // column order (k / group_cols), as AutoGPTQ does without act-order.
  std::span<const int32_t> g_idx;
  // NVFP4's weight_global_scale as stored (the reader divides by it):
  // finite and nonzero.
  float global_scale = 1;
};

// The bytes of each part of PackParts(spec), in that order, little-endian.
// InvalidArgument naming the element ("codes [n, k]", "scales [i, j]",
// "zeros [n, g]", "g_idx [k]") for a value that does not fit its field or
// dtype, and naming the span whose size is not what the spec needs.
absl::StatusOr<std::vector<std::vector<uint8_t>>> Pack(const PackSpec& spec,
                                                       const PackInput& input);

}  // namespace lowp

#endif  // LOWP_IO_PACKED_WRITER_H_
