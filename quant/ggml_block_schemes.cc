// The fake-quant values of three llama.cpp codec schemes (q5_1, ggml-mxfp4,
// ggml-nvfp4) through the block kernels, without the bytes: the block
// statistics and scales per block here, the element rule over the whole
// chunk in SIMD (kernels/blocks.h). Every value and count equals what
// ApplyGgmlRows gets from codecs/ggml.h's Encode then Decode (each finite
// element; a NaN or Inf encoded as 0 and passed through), which
// tests/scheme_fast_paths_test.cc checks on adversarial data.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "codecs/ggml_scales.h"
#include "formats/packing.h"
#include "kernels/blocks.h"
#include "kernels/convert.h"
#include "kernels/quantize.h"
#include "quant/scheme_families.h"

namespace lowp::internal {
namespace {

using ggml::E8m0Half;
using ggml::ToUe4m3;
using ggml::Ue4m3Half;

// GGML_FP32_TO_FP16 then GGML_FP16_TO_FP32 (nearest-even, overflow to inf)
// over an array, in one pass.
void RoundToFp16(std::span<const float> in, std::span<float> out) {
  static const Rounder* rounder = new Rounder(*Rounder::Make(*FindFormat("fp16")));
  rounder->Round(in, out, {.threads = 1});
}

// quantize_row_q5_1_ref: per block of 32, min and max over the elements (a
// NaN or Inf read as 0, the padding of a short block as zeros), d = (max -
// min) / 31, id = 1 / d (0 for d = 0), q = (uint8_t)((x - min) * id + 0.5),
// x = q * fp16(d) + fp16(min). With finite id, (x - min) * id + 0.5 lies in
// [0.5, 31.5] up to a few ulps: q needs no clamp. An id that overflows to
// inf (d below 2^-128) makes ggml's q the byte of an undefined conversion
// (0 on x86); d's fp16 is then 0 and every element comes back as fp16(min)
// whatever q is, so such a block takes id = 0 and q = 0 here, ggml's bytes.
void Q5_1(std::span<const float> in, int64_t cols, std::span<float> out, SchemeCounts& counts) {
  constexpr int64_t kBlock = 32;
  const int64_t rows = static_cast<int64_t>(in.size()) / cols;
  const int64_t per_row = BlocksPerRow(cols, kBlock);
  const size_t blocks = static_cast<size_t>(rows * per_row);
  thread_local std::vector<float> min, max, id, d, dq, mq;
  for (auto* v : {&min, &max, &id, &d, &dq, &mq}) v->resize(blocks);
  BlockMinMaxNonFiniteAsZero(in, cols, kBlock, min, max);
  if (cols % kBlock != 0) {  // the padding of each row's short block
    for (int64_t r = 0; r < rows; ++r) {
      const size_t g = static_cast<size_t>(r * per_row + per_row - 1);
      min[g] = std::min(min[g], 0.0f);
      max[g] = std::max(max[g], 0.0f);
    }
  }
  for (size_t g = 0; g < blocks; ++g) {
    d[g] = (max[g] - min[g]) / 31;
    const float inverse = d[g] != 0.0f ? 1.0f / d[g] : 0.0f;
    id[g] = std::isinf(inverse) ? 0.0f : inverse;
  }
  RoundToFp16(d, dq);
  RoundToFp16(min, mq);
  const GgmlElementRule rule{GgmlRule::kOffset, 0.5f, 31, 0};
  counts.clipped += QuantizeGgmlBlocks(rule, in, cols, kBlock, {id, dq, min, mq}, out);
}

// quantize_row_mxfp4_ref's block exponent: (uint8_t)(floorf(log2f(amax)) -
// 2 + 127), 0 for a block of zeros. The conversion wraps for amax below
// 2^-125, as ggml's does on x86. floorf(log2f(amax)) is amax's unbiased
// exponent field when its significand m is in [1 + 2^-10, 2 - 2^-11]: log2(m)
// is then at least 1e-3 from an integer, and log2f, off by at most an ulp
// (2^-16 below 128), cannot round across one. Otherwise (a power of two or
// near one, a subnormal) the C library's log2f decides, as in ggml.
uint8_t Mxfp4Exponent(float amax) {
  if (!(amax > 0.0f)) return 0;
  const uint32_t bits = std::bit_cast<uint32_t>(amax);
  const int32_t biased = static_cast<int32_t>(bits >> 23);
  const uint32_t fraction = bits & 0x7FFFFF;
  if (biased != 0 && fraction >= 0x2000 && fraction < 0x7FF000) {
    return static_cast<uint8_t>(biased - 127 - 2 + 127);
  }
  return static_cast<uint8_t>(static_cast<int32_t>(std::floor(std::log2(amax)) - 2 + 127));
}

void Mxfp4(std::span<const float> in, int64_t cols, std::span<float> out, SchemeCounts& counts) {
  constexpr int64_t kBlock = 32;
  thread_local std::vector<float> half;
  half.resize(static_cast<size_t>(in.size() / cols * BlocksPerRow(cols, kBlock)));
  BlockAbsMax(in, cols, kBlock, half);  // a NaN or Inf read as 0 leaves amax unchanged
  for (float& h : half) h = E8m0Half(Mxfp4Exponent(h));
  counts.clipped += QuantizeGgmlFp4Blocks(in, cols, kBlock, half, out);
}

// quantize_row_nvfp4_ref: four sub-blocks of 16 per 64 (a short row padded
// with zeros, which never raise a sub-block's amax), each its own scale.
void Nvfp4(std::span<const float> in, int64_t cols, std::span<float> out, SchemeCounts& counts) {
  constexpr int64_t kSubBlock = 16;
  thread_local std::vector<float> half;
  half.resize(static_cast<size_t>(in.size() / cols * BlocksPerRow(cols, kSubBlock)));
  BlockAbsMax(in, cols, kSubBlock, half);
  static const auto* table = [] {
    auto* t = new std::array<float, 128>;
    for (int code = 0; code < 128; ++code) (*t)[code] = Ue4m3Half(static_cast<uint8_t>(code));
    return t;
  }();
  for (float& h : half) h = (*table)[ToUe4m3(h / 6.0f)];  // ToUe4m3 is at most 0x7E
  counts.clipped += QuantizeGgmlFp4Blocks(in, cols, kSubBlock, half, out);
}

}  // namespace

bool ApplyGgmlBlocks(ggml::Type type, std::span<const float> in, int64_t cols,
                     std::span<float> out, SchemeCounts& counts) {
  if (cols <= 0) return true;
  switch (type) {
    case ggml::Type::kQ5_1:
      Q5_1(in, cols, out, counts);
      return true;
    case ggml::Type::kMXFP4:
      Mxfp4(in, cols, out, counts);
      return true;
    case ggml::Type::kNVFP4:
      Nvfp4(in, cols, out, counts);
      return true;
    default:
      return false;
  }
}

}  // namespace lowp::internal
