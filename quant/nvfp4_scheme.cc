// NVFP4: e2m1 elements in blocks of 16 with an e4m3 block scale and an fp32
// per-tensor scale, as NVIDIA's recipe computes them.
//
// Source of the order of operations (learnt, not copied):
// NVIDIA/TransformerEngine transformer_engine/pytorch/custom_recipes/
// quantization_nvfp4.py, NVFP4QuantizerRef._quantize_blockwise_reference
// (1x16 tiles, no Hadamard transform), checked against
// NVIDIA/TensorRT-Model-Optimizer modelopt/torch/quantization/qtensor/
// nvfp4_tensor.py NVFP4QTensor (scaling_factor_2 = amax / (6 * 448), block
// scale = block amax / (6 * scaling_factor_2) cast to e4m3, elements
// x / (e4m3 scale * scaling_factor_2) cast to e2m1 nearest-even). The two
// agree up to the last-bit rounding of the fp32 products; lowp follows
// TransformerEngine's order exactly.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "kernels/blocks.h"
#include "kernels/convert.h"
#include "kernels/quantize.h"
#include "quant/rounder.h"
#include "quant/scheme_families.h"

namespace lowp::internal {
namespace {

// A dequantized value beyond float32's range (a block maximum near FLT_MAX
// rounded up to the next element value) is returned as +-FLT_MAX.
inline float SaturateToFloat(float v) {
  return std::isinf(v) ? std::copysign(std::numeric_limits<float>::max(), v) : v;
}

constexpr int64_t kNvfp4Block = 16;
constexpr float kE2m1Max = 6.0f;
constexpr float kE4m3Max = 448.0f;
constexpr int kTensorScaleBits = 32;

// NVFP4 (NVIDIA recipe, TransformerEngine's reference order), all in fp32:
//   A = the tensor's max |x| over finite elements (TensorContext::absmax,
//       from Observe: a pass over the whole tensor first)
//   S = min(448 * 6 / A, FLT_MAX)  (global encode scale; A = 0 gives FLT_MAX)
//   g = 1 / S                      (global decode scale: the stored fp32)
// Per block of 16 along a row (a short last block padded with zeros):
//   a = max |x| over the block's finite elements
//   s = e4m3(min(a * (S * fp32(1/6)), 448))   nearest-even; stored e4m3 code
//   k = min(1 / (s * g), FLT_MAX)              (block encode scale)
//   code = e2m1(x * k)                         nearest-even, saturating at +-6
//   value = decode(code) * (s * g)
// A block whose s rounds to 0 (a = 0, or a tiny block) gets k = FLT_MAX and
// dequantizes to zeros. NaN and +-Inf take no part in A or a, are stored as
// code 0 and come back unchanged. Counts: clipped = finite x with |x * k| > 6
// (the e4m3 rounding of s can put a block's max above 6); subnormal = e2m1
// codes +-0.5. Storage: rows * cols * 4 + rows * ceil(cols / 16) * 8 + 32 bits.
class Nvfp4Scheme : public Scheme {
 public:
  Nvfp4Scheme(Format e2m1, Format e4m3)
      : Scheme("nvfp4"),
        e2m1_(std::move(e2m1)),
        e4m3_(std::move(e4m3)),
        e2m1_rounder_(SaturatingRounder(e2m1_)),
        e4m3_rounder_(SaturatingRounder(e4m3_)) {}

  uint64_t StorageBits(int64_t rows, int64_t cols) const override {
    const uint64_t r = static_cast<uint64_t>(rows);
    return r * static_cast<uint64_t>(cols) * 4 +
           r * static_cast<uint64_t>(BlocksPerRow(cols, kNvfp4Block)) * 8 + kTensorScaleBits;
  }

  bool NeedsTensorPass() const override { return true; }

  CodeLayout Codes() const override {
    CodeLayout c;
    c.kind = CodeLayout::Kind::kNvfp4;
    c.bits = 4;
    c.per_tensor = false;
    c.block_cols = kNvfp4Block;
    c.element = e2m1_.name;
    c.scale = e4m3_.name;
    return c;
  }

  absl::StatusOr<std::unique_ptr<BlockRounder>> BlockRounderFor(
      int64_t rows, int64_t cols, const TensorContext& context) const override {
    return std::make_unique<Nvfp4Rounder>(*this, rows, cols, context);
  }

  void Apply(std::span<const float> in, int64_t cols, const TensorContext& context,
             std::span<float> out, SchemeCounts& counts,
             StoredChunk* stored = nullptr) const override {
    const size_t n = in.size();
    if (n == 0 || cols <= 0) return;
    const int64_t rows = static_cast<int64_t>(n) / cols;
    const int64_t blocks = BlocksPerRow(cols, kNvfp4Block);
    const size_t nblocks = static_cast<size_t>(rows * blocks);
    constexpr float kFloatMax = std::numeric_limits<float>::max();

    float global_encode = std::min(kE4m3Max * kE2m1Max / context.absmax, kFloatMax);
    if (global_encode == 0) global_encode = 1;  // as the reference (A = +inf only)
    const float global_decode = 1.0f / global_encode;
    const float multiplier = global_encode * (1.0f / kE2m1Max);

    // Block scales: requested values, then their e4m3 rounding in one go.
    std::vector<float> requested(nblocks);
    BlockAbsMax(in, cols, kNvfp4Block, requested);  // amax over finite elements, then the scale
    for (float& v : requested) v = std::min(std::min(v * multiplier, kFloatMax), kE4m3Max);
    if (stored == nullptr) {
      return ApplySimd(in, cols, requested, global_decode, out, counts);
    }
    std::vector<uint8_t> scale_codes;
    std::vector<float> block_scale(nblocks);
    RoundTripSaturating(e4m3_, requested, block_scale, scale_codes);

    // Elements scaled by the block encode scale.
    std::vector<float> scaled(n);
    uint64_t clipped = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < blocks; ++b) {
        const size_t begin = static_cast<size_t>(r * cols + b * kNvfp4Block);
        const size_t end = static_cast<size_t>(r * cols + std::min(cols, (b + 1) * kNvfp4Block));
        const float s = block_scale[static_cast<size_t>(r * blocks + b)];
        const float k = std::min(1.0f / (s * global_decode), kFloatMax);
        for (size_t i = begin; i < end; ++i) {
          const float x = in[i];
          if (!std::isfinite(x)) {
            scaled[i] = 0;
            continue;
          }
          const float v = x * k;
          if (std::fabs(v) > kE2m1Max) ++clipped;
          scaled[i] = v;
        }
      }
    }
    std::vector<uint8_t> bytes;
    RoundTripSaturating(e2m1_, scaled, out, bytes);

    uint64_t subnormal = 0;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t b = 0; b < blocks; ++b) {
        const size_t begin = static_cast<size_t>(r * cols + b * kNvfp4Block);
        const size_t end = static_cast<size_t>(r * cols + std::min(cols, (b + 1) * kNvfp4Block));
        const float dequant = block_scale[static_cast<size_t>(r * blocks + b)] * global_decode;
        for (size_t i = begin; i < end; ++i) {
          if (!std::isfinite(in[i])) {
            out[i] = in[i];
            continue;
          }
          out[i] = SaturateToFloat(out[i] * dequant);
          if (((bytes[i / 2] >> ((i % 2) * 4)) & 0x7) == 1) ++subnormal;  // +-0.5
        }
      }
    }
    counts.clipped += clipped;
    counts.subnormal += subnormal;

    if (stored != nullptr) {  // appended: a tensor pass calls Apply chunk by chunk
      stored->tensor_scale = global_decode;
      for (size_t i = 0; i < n; ++i) stored->codes.push_back((bytes[i / 2] >> ((i % 2) * 4)) & 0xF);
      stored->scales.insert(stored->scales.end(), block_scale.begin(), block_scale.end());
    }
  }

 private:
  // GPTQ's hold (quant/rounder.h): the global scale is the tensor's (from
  // Observe, on the weights before GPTQ), a block's e4m3 scale Apply's on
  // the block's values when the column loop reaches it, and each column is
  // rounded as Apply rounds an element under them.
  class Nvfp4Rounder final : public BlockRounder {
   public:
    Nvfp4Rounder(const Nvfp4Scheme& scheme, int64_t rows, int64_t cols,
                 const TensorContext& context)
        : BlockRounder(rows, cols, std::min(kNvfp4Block, cols)),
          scheme_(scheme),
          context_(context),
          encode_(static_cast<size_t>(rows)),
          decode_(static_cast<size_t>(rows)) {
      constexpr float kFloatMax = std::numeric_limits<float>::max();
      float global_encode = std::min(kE4m3Max * kE2m1Max / context.absmax, kFloatMax);
      if (global_encode == 0) global_encode = 1;
      global_decode_ = 1.0f / global_encode;
      KeepParameters(false, global_decode_);
    }

    void Choose(int64_t first, int64_t row0, std::span<const float> values,
                std::span<const float> importance) override {
      (void)importance;
      constexpr float kFloatMax = std::numeric_limits<float>::max();
      const StoredChunk stored = scheme_.Stored(values, Width(first), context_);
      Record(first, row0, stored);
      for (size_t k = 0; k < stored.scales.size(); ++k) {  // one block per row
        const float s = stored.scales[k];
        encode_[row0 + k] = std::min(1.0f / (s * global_decode_), kFloatMax);
        decode_[row0 + k] = s * global_decode_;
      }
    }

    void Round(int64_t col, int64_t row0, std::span<const float> in,
               std::span<float> out) override {
      (void)col;
      thread_local std::vector<float> scaled;
      thread_local std::vector<uint8_t> codes;
      scaled.resize(in.size());
      const float* encode = encode_.data() + row0;
      const float* decode = decode_.data() + row0;
      for (size_t r = 0; r < in.size(); ++r) scaled[r] = in[r] * encode[r];
      RoundTripSaturating(scheme_.e2m1_, scaled, out, codes);
      for (size_t r = 0; r < in.size(); ++r) out[r] = SaturateToFloat(out[r] * decode[r]);
    }

   private:
    const Nvfp4Scheme& scheme_;
    TensorContext context_;
    float global_decode_ = 1;
    std::vector<float> encode_, decode_;  // per row
  };

  // Apply's rule without the codes, through the block kernels, from the
  // requested block scales: k as a block multiplier (x * k * 1 is x * k),
  // the e2m1 rounding in one pass, then the product by s * g. A decoded
  // element is subnormal (+-0.5) exactly when it is below e2m1's smallest
  // normal, 1.
  void ApplySimd(std::span<const float> in, int64_t cols, std::vector<float>& requested,
                 float global_decode, std::span<float> out, SchemeCounts& counts) const {
    constexpr float kFloatMax = std::numeric_limits<float>::max();
    thread_local std::vector<float> block_scale, encode, decode;
    block_scale.resize(requested.size());
    encode.resize(requested.size());
    decode.resize(requested.size());
    e4m3_rounder_.Round(requested, block_scale, {.threads = 1});
    for (size_t g = 0; g < block_scale.size(); ++g) {
      encode[g] = std::min(1.0f / (block_scale[g] * global_decode), kFloatMax);
      decode[g] = block_scale[g] * global_decode;
    }
    const uint64_t clipped =
        ScaleBlocks(in, cols, kNvfp4Block, encode, 1.0f, kE2m1Max, /*clamp=*/false, out);
    e2m1_rounder_.Round(out, out, {.threads = 1});
    const uint64_t subnormal = UnscaleBlocks(in, out, cols, kNvfp4Block, decode, 1.0f, out);
    counts.clipped += clipped;
    counts.subnormal += subnormal;
  }

  Format e2m1_;
  Format e4m3_;
  Rounder e2m1_rounder_;  // saturating
  Rounder e4m3_rounder_;  // saturating
};

}  // namespace

absl::StatusOr<std::unique_ptr<Scheme>> MakeNvfp4Scheme(absl::string_view base,
                                                        const SchemeOptions& options) {
  if (base != "nvfp4") return absl::NotFoundError(absl::StrCat("not an NVFP4 scheme: ", base));
  if (!options.empty()) return UnknownOption(base, options.front().first, "none");
  absl::StatusOr<Format> e2m1 = FindFormat("fp4_e2m1fn");
  if (!e2m1.ok()) return e2m1.status();
  absl::StatusOr<Format> e4m3 = FindFormat("fp8_e4m3fn");
  if (!e4m3.ok()) return e4m3.status();
  return std::make_unique<Nvfp4Scheme>(*std::move(e2m1), *std::move(e4m3));
}

std::vector<SchemeFamily> Nvfp4Families() {
  SchemeFamily f;
  f.family = "NVFP4";
  f.examples = {"nvfp4"};
  f.rule =
      "e2m1 elements in blocks of 16 along a row (short last block padded with zeros), an e4m3 "
      "block scale and an fp32 tensor scale (NVIDIA's recipe, TransformerEngine's order, fp32): "
      "A = tensor max |x| (finite); S = min(448 * 6 / A, FLT_MAX); g = 1 / S (stored); per "
      "block a = max |x|, s = e4m3_rne(min(a * (S * (1/6)), 448)), k = min(1 / (s * g), "
      "FLT_MAX), code = e2m1_rne(x * k) saturating at 6, value = e2m1 * (s * g). NaN/Inf pass "
      "through. Bits per weight: 4 + 8/16 + 32 per tensor (4.5 for a 4096-wide row)";
  f.options = "none";
  return {f};
}

}  // namespace lowp::internal
