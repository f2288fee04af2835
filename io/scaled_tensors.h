// Quantized Hugging Face checkpoints: weights stored as FP8 codes (F8_E4M3,
// F8_E5M2) with a scale tensor beside each, read as the values they stand
// for (TensorView::scales; ReadAsFloat32 multiplies). The layouts shipped:
//
//   DeepSeek-V3, Qwen3-FP8 and the like (config.json "quantization_config":
//   {"quant_method": "fp8", "weight_block_size": [128, 128], ...}):
//     NAME        F8_E4M3 [out, in]
//     NAME_scale_inv  F32 [ceil(out / 128), ceil(in / 128)], one scale per
//                 128 x 128 block, multiplied despite its name (DeepSeek-V3's
//                 inference/kernel.py weight_dequant; vLLM's Fp8LinearMethod)
//   compressed-tensors ("quant_method": "compressed-tensors", llm-compressor's
//   FP8 / FP8_DYNAMIC / FP8_BLOCK), ModelOpt, vLLM's per-tensor fp8:
//     NAME        F8_E4M3 [out, in]
//     NAME_scale  F32 or BF16: [] or [1] per tensor, [out, 1] or [out] per
//                 channel, [ceil(out / R), ceil(in / C)] per block (the
//                 group's "block_structure"), [out, ceil(in / G)] per group
//                 ("group_size")
// A stack of matrices ([experts, out, in]) takes the same shapes after its
// leading dimensions. The scale tensors leave the set: each is part of its
// weight.
#ifndef LOWP_IO_SCALED_TENSORS_H_
#define LOWP_IO_SCALED_TENSORS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "io/tensor.h"

namespace lowp {

// One compressed-tensors config group's weights ("config_groups": {"group_0":
// {"format": ..., "weights": {...}}}), for the packed formats
// (io/packed_tensors.h).
struct CompressedTensorsGroup {
  std::string name;      // "group_0"
  std::string format;    // the group's "format", else the top-level one
  int num_bits = 0;      // 0: not given
  std::string type;      // "int" or "float"; empty: not given
  bool symmetric = true;
  std::string strategy;  // "group", "channel", "tensor", "tensor_group", ...; empty: not given
  int64_t group_size = 0;  // 0: none given (null); -1 as written
};

// What a checkpoint's config.json says of its quantization.
struct CheckpointQuantization {
  std::string method;       // quant_method ("fp8", "compressed-tensors", ...); empty: none
  int64_t block_rows = 0;   // weight_block_size / block_structure; 0: none given
  int64_t block_cols = 0;
  int64_t group = 0;        // compressed-tensors' group_size (FP8 groups); 0: none given
  std::string source;       // the config.json, for messages

  // GPTQ ("gptq") and AutoAWQ ("awq"): bits (or w_bit) and group_size (or
  // q_group_size, -1: one group spanning the input axis); 0 when not given.
  int bits = 0;
  int64_t group_size = 0;
  bool desc_act = false;          // GPTQ act-order (g_idx not k / group_size)
  bool sym = true;                // GPTQ; absent means true, as AutoGPTQ reads it
  std::string checkpoint_format;  // GPTQ: "gptq" (v1, zeros stored minus one) or "gptq_v2"
  std::string version;            // AWQ: "gemm" (the only one read)
  bool zero_point = true;         // AWQ
  // compressed-tensors: the top-level "format", the groups whose weights
  // are quantized, and "ignore" (module names or "re:" patterns).
  std::string format;
  std::vector<CompressedTensorsGroup> groups;
  std::vector<std::string> ignore;

  // A method whose weights are FP8 codes with scales: "fp8",
  // "compressed-tensors", "modelopt".
  bool scaled_fp8() const;
};

// The quantization_config of `directory`/config.json: none when the file or
// the key is absent; InvalidArgument naming the file and the field when the
// file is not JSON or a field read has the wrong type or is out of range
// (block or group sizes not positive integers up to 2^20; GPTQ bits not 2,
// 3, 4 or 8; AWQ bits not 4; an unknown GPTQ checkpoint_format or AWQ
// version).
absl::StatusOr<CheckpointQuantization> ReadCheckpointQuantization(const std::string& directory);
// The same from config.json's text; `source` names it in messages.
absl::StatusOr<CheckpointQuantization> ParseCheckpointQuantization(absl::string_view text,
                                                                   const std::string& source);

// Pairs every F8_E4M3 / F8_E5M2 tensor with its NAME_scale_inv or NAME_scale
// tensor, sets its `scales` and removes the scale tensors from `tensors`.
// InvalidArgument naming both tensors when a scale tensor's dtype (F32,
// BF16, F16) or shape does not fit its weight, when a weight has both, or
// when `quantization` declares scaled FP8 and an FP8 weight has none.
absl::Status AttachScales(std::vector<TensorView>& tensors,
                          const CheckpointQuantization& quantization);

// The attachers' last step: each composed weight in the place of the tensor
// it is indexed by, the parts it consumed (consumed[i]) left out, the rest
// in order. `composed` is in ascending index order.
void ReplaceParts(std::vector<TensorView>& tensors,
                  std::vector<std::pair<size_t, TensorView>> composed,
                  const std::vector<bool>& consumed);

// gpt-oss's MXFP4 experts (config.json "quantization_config": {"quant_method":
// "mxfp4"}, transformers' integrations/mxfp4.py):
//     NAME_blocks  U8 [..., rows, groups, 16]: 32 OCP e2m1 codes per group,
//                  element 2j in the low nibble, 2j + 1 in the high one
//     NAME_scales  U8 [..., rows, groups]: one E8M0 exponent per group,
//                  2^(code - 127), 0xFF NaN
// compose into NAME, F4 [..., rows, groups * 32] scaled by E8M0 per 32 along
// the last axis (each value exact in float32). The parts leave the set.
// InvalidArgument naming the tensors when the blocks are not U8 [..., 16] or
// their scales are missing or of another shape.
absl::Status AttachMxfp4Blocks(std::vector<TensorView>& tensors,
                               const CheckpointQuantization& quantization);

}  // namespace lowp

#endif  // LOWP_IO_SCALED_TENSORS_H_
