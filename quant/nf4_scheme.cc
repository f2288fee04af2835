// NF4 (QLoRA's NormalFloat4) as bitsandbytes stores it, with and without
// its double quantization of the block absmax ("compress_statistics").
// Verified against bitsandbytes-foundation/bitsandbytes:
//   csrc/kernels.cu          nf4_dequantization_lut, dQuantizeNF4 (the decision
//                            tree), kQuantizeBlockwise / kQuantizeBlockwiseSmall
//                            (x * (1 / absmax)), dQuantize<0> (the 8-bit
//                            nearest-code search), kDequantizeBlockwise
//   bitsandbytes/functional.py  get_4bit_type("nf4"), create_dynamic_map,
//                            quantize_4bit (offset = absmax.mean(), blocks of
//                            256), dequantize_4bit / dequantize_blockwise
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/blocks.h"
#include "kernels/quantize.h"
#include "quant/rounder.h"
#include "quant/scheme_families.h"

namespace lowp::internal {
namespace {

constexpr int64_t kNf4Block = 64;     // quantize_4bit's default blocksize
constexpr int64_t kScaleBlock = 256;  // compress_statistics: quantize_blockwise(blocksize=256)
constexpr int32_t kNf4Zero = 7;       // the code of 0.0

// nf4_dequantization_lut / get_4bit_type("nf4"), as float32.
constexpr float kNf4Values[16] = {
    -1.0f,
    -0.6961928009986877f,
    -0.5250730514526367f,
    -0.39491748809814453f,
    -0.28444138169288635f,
    -0.18477343022823334f,
    -0.09105003625154495f,
    0.0f,
    0.07958029955625534f,
    0.16093020141124725f,
    0.24611230194568634f,
    0.33791524171829224f,
    0.44070982933044434f,
    0.5626170039176941f,
    0.7229568362236023f,
    1.0f,
};

// dQuantizeNF4's thresholds, low to high: code k + 1 is chosen iff
// x > kNf4Thresholds[k] (strictly), so a tie goes to the lower code.
constexpr float kNf4Thresholds[15] = {
    -0.8480964004993439f,  -0.6106329262256622f,  -0.4599952697753906f,   -0.33967943489551544f,
    -0.23460740596055984f, -0.13791173323988914f, -0.045525018125772476f, 0.03979014977812767f,
    0.1202552504837513f,   0.2035212516784668f,   0.2920137718319893f,    0.3893125355243683f,
    0.5016634166240692f,   0.6427869200706482f,   0.8614784181118011f,
};

// dQuantizeNF4's decision tree, as a count: the thresholds are sorted, so the
// code is the number of them x exceeds (the tree's answer; a NaN exceeds none
// and gets code 0). Branch-free, so a block's codes vectorize.
inline int32_t QuantizeNf4(float x) {
  int32_t code = 0;
  for (float t : kNf4Thresholds) code += x > t;
  return code;
}

constexpr float kMaxFloat = std::numeric_limits<float>::max();

// create_dynamic_map(signed=True, max_exponent_bits=7, total_bits=8), sorted:
// for i in 0..6, the midpoints of torch.linspace(0.1, 1, 2^i + 1) (float32)
// times float32(10^(i - 6)), with both signs; then 0 and 1. torch's CPU
// linspace: step = (end - start) / (steps - 1) in float32, element k is
// start + step * k below steps / 2 and end - step * (steps - 1 - k) from there
// (no fused multiply-add). Read from torch's source, not checked against a
// torch run: a build that fuses these, or an older linspace, moves some of the
// 256 values by an ulp.
std::vector<float> MakeDynamicMap() {
  constexpr double kPowersOfTen[7] = {1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0};
  std::vector<float> data;
  for (int i = 0; i < 7; ++i) {
    const int64_t steps = (int64_t{1} << i) + 1;
    const float start = 0.1f;
    const float end = 1.0f;
    const float step = (end - start) / static_cast<float>(steps - 1);
    std::vector<float> boundaries(steps);
    for (int64_t k = 0; k < steps; ++k) {
      boundaries[k] = k < steps / 2 ? start + step * static_cast<float>(k)
                                    : end - step * static_cast<float>(steps - 1 - k);
    }
    const float scale = static_cast<float>(kPowersOfTen[i]);  // 10 ** (i - 6), then float32
    for (int64_t k = 0; k + 1 < steps; ++k) {
      const float mean = (boundaries[k] + boundaries[k + 1]) / 2.0f;
      data.push_back(scale * mean);
      data.push_back(-(scale * mean));
    }
  }
  data.push_back(0.0f);
  data.push_back(1.0f);
  std::sort(data.begin(), data.end());
  return data;
}

const std::vector<float>& DynamicMap() {
  static const auto* map = new std::vector<float>(MakeDynamicMap());
  return *map;
}

// dQuantize<0> (not stochastic) over the sorted 256-entry map: a 7-step
// pivot search from 127, then the nearer neighbour by midpoints
// (upper + val) * 0.5f and (lower + val) * 0.5f; exact ties stay on the pivot.
int32_t QuantizeDynamic(const std::vector<float>& code, float x) {
  int32_t pivot = 127;
  int32_t upper_pivot = 255;
  int32_t lower_pivot = 0;
  float lower = -1.0f;
  float upper = 1.0f;
  float val = code[pivot];
  for (int32_t i = 64; i > 0; i >>= 1) {
    if (x > val) {
      lower_pivot = pivot;
      lower = val;
      pivot += i;
    } else {
      upper_pivot = pivot;
      upper = val;
      pivot -= i;
    }
    val = code[pivot];
  }
  if (upper_pivot == 255) upper = code[255];
  if (lower_pivot == 0) lower = code[0];
  if (x > val) {
    const float midpoint = (upper + val) * 0.5f;
    return x > midpoint ? upper_pivot : pivot;
  }
  const float midpoint = (lower + val) * 0.5f;
  return x < midpoint ? lower_pivot : pivot;
}

// NF4: blocks of 64 along a row (a short last block as if padded with zeros,
// which changes no absmax); absmax = max |x| over the finite elements (fp32);
// code = dQuantizeNF4(x * (1 / absmax)) with bitsandbytes' thresholds (ties to
// the lower code); dequantized NF4[code] * absmax. An all-zero block stores
// absmax 0 and code 7 (0.0). Double quantization (compress_statistics):
// offset = mean of the tensor's block absmax; absmax - offset is quantized in
// groups of 256 consecutive block scales (row-major) with the signed 8-bit
// dynamic map (scale2 = max |absmax - offset| of the group, fp32, nearest code
// by dQuantize) and the elements are dequantized with code2 * scale2 + offset.
// 4.5 bits per weight; with double quantization 4 + 8/64 + 32/(64 * 256)
// plus 32 bits per tensor.
class Nf4Scheme final : public Scheme {
 public:
  explicit Nf4Scheme(bool double_quant)
      : Scheme(double_quant ? "nf4:double-quant" : "nf4"), double_quant_(double_quant) {}

  uint64_t StorageBits(int64_t rows, int64_t cols) const override {
    const uint64_t elements = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols);
    const uint64_t blocks =
        static_cast<uint64_t>(rows) * static_cast<uint64_t>(BlocksPerRow(cols, kNf4Block));
    const uint64_t code_bits = 8 * ((elements + 1) / 2);  // two codes a byte, (n + 1) / 2 bytes
    if (!double_quant_) return code_bits + 32 * blocks;
    if (blocks == 0) return code_bits;
    const uint64_t groups = (blocks + kScaleBlock - 1) / kScaleBlock;
    return code_bits + 8 * blocks + 32 * groups + 32;
  }

  // Whole groups of 256 block scales: the smallest row count whose block
  // count is a multiple of 256.
  int64_t ChunkRows(int64_t cols) const override {
    if (!double_quant_) return 1;
    const int64_t blocks = std::max<int64_t>(1, BlocksPerRow(cols, kNf4Block));
    return kScaleBlock / std::gcd(blocks, kScaleBlock);
  }

  bool NeedsTensorPass() const override { return double_quant_; }

  absl::StatusOr<std::unique_ptr<BlockRounder>> BlockRounderFor(
      int64_t rows, int64_t cols, const TensorContext& context) const override {
    (void)context;
    if (double_quant_) {
      return absl::InvalidArgumentError(
          "nf4:double-quant quantizes each block's absmax in groups of 256 blocks along the "
          "rows, which GPTQ's column loop cannot choose before it reaches them; use nf4");
    }
    return std::make_unique<Nf4Rounder>(rows, cols);
  }

  void Observe(std::span<const float> in, int64_t cols, TensorContext& context) const override {
    Scheme::Observe(in, cols, context);
    if (cols <= 0) return;
    const int64_t rows = static_cast<int64_t>(in.size()) / cols;
    std::vector<float> absmax(static_cast<size_t>(rows * BlocksPerRow(cols, kNf4Block)));
    BlockAbsMax(in, cols, kNf4Block, absmax);
    for (float a : absmax) context.block_absmax_sum += a;  // in order, as before
    context.block_count += absmax.size();
  }

  void Apply(std::span<const float> in, int64_t cols, const TensorContext& context,
             std::span<float> out, SchemeCounts& counts, StoredChunk* stored) const override {
    (void)counts;  // codes are never clamped: |x| / absmax <= 1 selects 0..15
    if (cols <= 0) return;
    const int64_t rows = static_cast<int64_t>(in.size()) / cols;
    const int64_t per_row = BlocksPerRow(cols, kNf4Block);
    std::vector<float> absmax(static_cast<size_t>(rows * per_row));
    BlockAbsMax(in, cols, kNf4Block, absmax);  // over finite elements, 0 if none
    std::vector<float> scale = absmax;
    if (double_quant_) CompressStatistics(context, scale);
    if (stored == nullptr) {  // the SIMD kernel, the rule below element for element
      std::vector<float> inverse(absmax.size());
      for (size_t g = 0; g < absmax.size(); ++g) {
        inverse[g] = absmax[g] != 0.0f ? 1.0f / absmax[g] : 0.0f;
      }
      QuantizeCodebookBlocks(in, cols, kNf4Block, inverse, scale, kNf4Thresholds, kNf4Values, out);
      return;
    }
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < per_row; ++b) {
        const int64_t start = b * kNf4Block;
        const int64_t n = std::min(kNf4Block, cols - start);
        const size_t at = static_cast<size_t>(r * cols + start);
        const float amax = absmax[r * per_row + b];
        const float used = scale[r * per_row + b];
        // kQuantizeBlockwise: one reciprocal, then a product per element. An
        // all-zero block (inverse 0) and a non-finite x get code 7 (0.0).
        const float inverse = amax != 0.0f ? 1.0f / amax : 0.0f;
        int32_t codes[kNf4Block];
        for (int64_t j = 0; j < n; ++j) {  // vectorized
          const float x = in[at + j];
          codes[j] = std::fabs(x) <= kMaxFloat ? QuantizeNf4(x * inverse) : kNf4Zero;
        }
        for (int64_t j = 0; j < n; ++j) {
          const float x = in[at + j];
          out[at + j] = std::fabs(x) <= kMaxFloat ? kNf4Values[codes[j]] * used : x;
        }
        if (stored != nullptr) stored->codes.insert(stored->codes.end(), codes, codes + n);
        if (stored != nullptr) stored->scales.push_back(used);
      }
    }
  }

 private:
  // GPTQ's hold (quant/rounder.h), without double quantization: a block's
  // absmax is taken from its values when the column loop reaches it, and
  // each column is rounded as Apply rounds an element under it (a value
  // beyond the absmax takes the largest code, 1.0).
  class Nf4Rounder final : public BlockRounder {
   public:
    Nf4Rounder(int64_t rows, int64_t cols)
        : BlockRounder(rows, cols, std::min(kNf4Block, cols)),
          absmax_(static_cast<size_t>(rows)) {}

    void Choose(int64_t first, int64_t row0, std::span<const float> values,
                std::span<const float> importance) override {
      (void)importance;
      const int64_t n = Width(first);
      BlockAbsMax(values, n, n,  // one block per row
                  std::span<float>(absmax_).subspan(row0, values.size() / static_cast<size_t>(n)));
    }

    void Round(int64_t col, int64_t row0, std::span<const float> in,
               std::span<float> out) override {
      (void)col;
      for (size_t r = 0; r < in.size(); ++r) {
        const float amax = absmax_[row0 + r];
        const float inverse = amax != 0.0f ? 1.0f / amax : 0.0f;
        out[r] = kNf4Values[QuantizeNf4(in[r] * inverse)] * amax;
      }
    }

   private:
    std::vector<float> absmax_;
  };

  // Replaces each block absmax by its double-quantized value, group by group
  // of 256 (the chunk starts on a group boundary; its last group may be short).
  static void CompressStatistics(const TensorContext& context, std::vector<float>& scale) {
    const std::vector<float>& code = DynamicMap();
    const float offset = context.block_count == 0
                             ? 0.0f
                             : static_cast<float>(context.block_absmax_sum /
                                                  static_cast<double>(context.block_count));
    for (size_t group = 0; group < scale.size(); group += kScaleBlock) {
      const size_t n = std::min<size_t>(kScaleBlock, scale.size() - group);
      float amax2 = 0.0f;
      for (size_t k = 0; k < n; ++k) {
        scale[group + k] -= offset;  // _absmax - offset, in float32
        amax2 = std::max(amax2, std::fabs(scale[group + k]));
      }
      const float inverse2 = amax2 != 0.0f ? 1.0f / amax2 : 0.0f;
      for (size_t k = 0; k < n; ++k) {
        // All equal to the offset (amax2 == 0): the code of 0.0, giving the offset back.
        const int32_t q =
            amax2 != 0.0f ? QuantizeDynamic(code, scale[group + k] * inverse2)
                          : static_cast<int32_t>(std::lower_bound(code.begin(), code.end(), 0.0f) -
                                                 code.begin());
        scale[group + k] = code[q] * amax2 + offset;  // dequantize_blockwise, then += offset
      }
    }
  }

  bool double_quant_;
};

constexpr char kNf4Rule[] =
    "bitsandbytes NF4 (quantize_4bit, quant_type nf4, blocksize 64): blocks of 64 along a row;"
    " absmax = max |x| of the block in fp32; each x is multiplied by 1/absmax (one float32"
    " reciprocal per block, as kQuantizeBlockwise) and mapped by dQuantizeNF4's thresholds"
    " (code k+1 iff x > t_k, so a tie goes to the lower code) to the 16 NF4 values"
    " (get_4bit_type): dequantized NF4[code] * absmax. A short last block acts as padded with"
    " zeros (bitsandbytes blocks the flattened tensor, so this matches it when cols is a multiple"
    " of 64). An all-zero block stores absmax 0 and code 7 (0.0), dequantized 0 (bitsandbytes'"
    " kernel computes 0 * (1/0) = NaN there, which its tree sends to code 0, dequantized -0.0)."
    " NaN and +-Inf take no part in absmax and come back unchanged (code 7). 4 bits per element"
    " (two a byte) + 32 per block: 4.5 bits per weight."
    " :double-quant (compress_statistics=True): offset = mean of the tensor's block absmax"
    " (summed in double, rounded to fp32; torch sums in fp32); v = absmax - offset is quantized"
    " in groups of 256 consecutive block scales (row-major): scale2 = max |v| of the group"
    " (fp32), code2 = dQuantize(v * (1/scale2)) over create_dynamic_map(signed=True) (the"
    " signed 8-bit dynamic map, 256 sorted values, built as torch's CPU float32 linspace and"
    " products give them without fused multiply-add: read from source, not checked against a"
    " torch run, so a value may differ by an ulp; a 7-step pivot search then the nearer"
    " neighbour by float midpoints); the elements' codes are unchanged and dequantized with"
    " NF4[code] * (map[code2] * scale2 + offset). A group with scale2 = 0 takes map code 0.0."
    " Bits: 4 per element + 8 per block + 32 per 256 blocks + 32 per tensor (about 4.127).";

}  // namespace

absl::StatusOr<std::unique_ptr<Scheme>> MakeNf4Scheme(absl::string_view base,
                                                      const SchemeOptions& options) {
  if (base != "nf4") return absl::NotFoundError(absl::StrCat("not an nf4 scheme: ", base));
  bool double_quant = false;
  for (const auto& [key, value] : options) {
    if (key != "double-quant") return UnknownOption(base, key, "double-quant");
    if (!value.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("scheme 'nf4': option 'double-quant' takes no value, got '", value, "'"));
    }
    double_quant = true;
  }
  return std::make_unique<Nf4Scheme>(double_quant);
}

std::vector<SchemeFamily> Nf4Families() {
  return {{"NF4 (bitsandbytes)",
           {"nf4", "nf4:double-quant"},
           kNf4Rule,
           "double-quant: bitsandbytes' compress_statistics (8-bit block absmax)"}};
}

}  // namespace lowp::internal
