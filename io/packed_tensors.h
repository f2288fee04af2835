// Integer- and FP4-quantized Hugging Face checkpoints: each quantized
// Linear's parts (packed codes, scales, zero points, group indices) composed
// into one weight PREFIX.weight of shape [N, K] (nn.Linear's [out, in]) that
// reads as the values it stands for (TensorView::packed; ReadAsFloat32
// decodes). The parts leave the set. config.json's quantization_config says
// the layout; the tensors must agree with it. Words are little-endian int32
// ("I32"); "field i of a word" is bits [b*i, b*i + b).
//
//   GPTQ (AutoGPTQ, GPTQModel, optimum; quant_method "gptq", bits b in
//   {2, 3, 4, 8}, group_size G, -1 for one group of all K):
//     PREFIX.qweight  I32 [K*b/32, N]    W transposed, packed along K: along
//                     each column, element k is at bit b*k of the
//                     little-endian stream of the column's words (b = 3:
//                     values straddle words, 32 values in 3 words)
//     PREFIX.qzeros   I32 [ceil(K/G), N*b/32]  packed along N the same way
//     PREFIX.scales   F16 (BF16, F32) [ceil(K/G), N]
//     PREFIX.g_idx    I32 [K], optional: the group of each k (act-order
//                     makes it non-monotone); k / G when absent
//     W[n, k] = scales[g, n] * (q[k, n] - z[g, n]),  g = g_idx[k]
//     checkpoint_format "gptq" (v1, the default) stores z - 1, so z = field
//     + 1; "gptq_v2" stores z. A v1 writer stored z = 0 as -1 unmasked,
//     which overwrote the next fields: such a file (sym false) was corrupt
//     when written, and reads as AutoGPTQ reads it (that field 2^b - 1, z =
//     2^b, its neighbours' bits as the overflow left them).
//   AutoAWQ GEMM (quant_method "awq", version "gemm", bits 4, zero_point
//   true):
//     PREFIX.qweight  I32 [K, N/8]     packed along N, interleaved: field i
//                     of word [k, c] holds column 8c + {0,2,4,6,1,3,5,7}[i]
//     PREFIX.qzeros   I32 [ceil(K/G), N/8]  the same packing, z as stored
//     PREFIX.scales   F16 [ceil(K/G), N]
//     W[n, k] = (q[k, n] - z[k / G, n]) * scales[k / G, n]
//   compressed-tensors "pack-quantized" (llm-compressor's W4A16, W8A16...;
//   the config group's weights: num_bits b in 2..8, type "int", strategy
//   group / channel / tensor, symmetric):
//     PREFIX.weight_packed      I32 [N, ceil(K/pf)], pf = 32 / b (rounded
//                               down: values never straddle words), packed
//                               along K, field i of word [n, c] = element
//                               k = c*pf + i, stored as q + 2^(b-1)
//     PREFIX.weight_scale       BF16 (F16, F32): [N, ceil(K/G)] group,
//                               [N, 1] channel, [1] or [] tensor
//     PREFIX.weight_zero_point  I32 [ceil(N/pf), ceil(K/G) or 1], packed
//                               along N the same way (zp + 2^(b-1)); only
//                               when symmetric is false
//     PREFIX.weight_shape       I64 or I32 [2] = [N, K]
//     PREFIX.weight_g_idx       I32 [K], optional (actorder "group"); all -1
//                               means none
//     W[n, k] = (field_w - field_zp) * scale[n, g]  (field_zp = 2^(b-1) when
//     symmetric: the offsets cancel)
//   compressed-tensors "nvfp4-pack-quantized" (weights num_bits 4, type
//   "float", group_size 16):
//     PREFIX.weight_packed        U8 [N, K/2]: element 2j in the low nibble,
//                                 2j + 1 in the high one, OCP e2m1 codes
//     PREFIX.weight_scale         F8_E4M3 [N, ceil(K/16)]
//     PREFIX.weight_global_scale  F32 [1] or []
//     W[n, k] = e2m1(code) * (float(scale[n, k/16]) / global_scale)
//
// Arithmetic, float32 as the reference dequantizers compute it: integer
// layouts widen the scale exactly (F16/BF16) and multiply it by the exact
// small integer (q - z), one float32 product (exact for F16/BF16 scales:
// at most 11 + 9 significant bits; a reader computing in bf16 rounds it once
// more); NVFP4 divides the decoded FP8 scale by the global scale (one
// float32 division) and multiplies the e2m1 value by that (one float32
// product), compressed-tensors' _dequantize order.
#ifndef LOWP_IO_PACKED_TENSORS_H_
#define LOWP_IO_PACKED_TENSORS_H_

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "io/scaled_tensors.h"
#include "io/tensor.h"

namespace lowp {

enum class PackedLayout : uint8_t { kGptq, kAwqGemm, kCompressedInt, kCompressedNvfp4 };

// One stored tensor of a packed weight; `name` empty when the layout has no
// such part (no zero points when symmetric, no g_idx...).
struct PackedPart {
  std::string name;
  DType dtype = DType::kI32;
  std::vector<int64_t> shape;
  std::span<const uint8_t> bytes;
  bool present() const { return !name.empty(); }
};

struct PackedWeight {
  PackedLayout layout = PackedLayout::kGptq;
  int bits = 4;
  int64_t rows = 0;        // N, out_features
  int64_t cols = 0;        // K, in_features
  int64_t group_cols = 1;  // columns of a group (K for one group), when no g_idx
  int64_t groups = 0;      // groups along K: scale entries per row (1 per channel or tensor)
  bool zero_plus_one = false;  // GPTQ v1: the true zero is the stored field + 1
  bool per_tensor = false;     // compressed-tensors strategy "tensor": one scale
  PackedPart codes;          // qweight / weight_packed
  PackedPart scales;         // scales / weight_scale
  PackedPart zeros;          // qzeros / weight_zero_point
  PackedPart g_idx;          // g_idx / weight_g_idx, only when it is used
  PackedPart global_scale;   // NVFP4's weight_global_scale
  std::vector<PackedPart> other;  // parts read only for checks (weight_shape, an unused g_idx)
  std::string type_name;     // "gptq-int4-g128", "awq-int4-g128", "ct-int4-g128-asym", "ct-nvfp4"

  // The bytes of every part.
  uint64_t stored_bytes() const;
};

// Composes the packed weights `quantization` declares (methods "gptq",
// "awq", "compressed-tensors" with formats "pack-quantized" and
// "nvfp4-pack-quantized") from their parts in `tensors`: each becomes
// PREFIX.weight (DType::kPacked, bytes = the packed codes) and its parts
// leave `tensors`. InvalidArgument naming the file, the tensor and the
// config.json field when a part is missing, has the wrong dtype or a shape
// that does not fit the others and the config (bits, group_size, symmetric),
// when a g_idx names a group that does not exist, or when PREFIX.weight is
// already there. A method with no packed layout leaves `tensors` alone.
absl::Status AttachPacked(std::vector<TensorView>& tensors,
                          const CheckpointQuantization& quantization);

// AttachPacked, then AttachScales (io/scaled_tensors.h): what TensorSet
// does with a safetensors checkpoint and its config.json.
absl::Status AttachQuantizedParts(std::vector<TensorView>& tensors,
                                  const CheckpointQuantization& quantization);

// Elements [first, first + out.size()) of a packed weight's [N, K] row-major
// view as float32 (the arithmetic above); the range need not be aligned to
// words or groups. InvalidArgument if the range is outside the tensor.
absl::Status ReadPacked(const TensorView& tensor, int64_t first, std::span<float> out);

// The packed code bytes of elements [first, first + count), for releasing
// pages: the words that hold them for a layout stored [N, ...]
// (compressed-tensors); for one stored transposed (GPTQ, AWQ), where every
// row of the weight reads every stored row, all of them once the range
// reaches the last element and none before (releasing them earlier would
// only make the next rows read them again).
std::span<const uint8_t> PackedElementBytes(const PackedWeight& weight, int64_t first,
                                            int64_t count);

}  // namespace lowp

#endif  // LOWP_IO_PACKED_TENSORS_H_
