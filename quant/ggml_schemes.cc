// llama.cpp's legacy block formats q8_0, q4_0, q4_1 and q5_0, reproduced
// from ggml's reference quantizers (ggml/src/ggml-quants.c,
// quantize_row_{q8_0,q4_0,q4_1,q5_0}_ref) and dequantizers
// (dequantize_row_*), block layouts from ggml/src/ggml-common.h. Every step is
// the same float32 operation in the same order, so the codes and fp16 scales
// compare bit for bit with ggml's (checked against ggml's own
// quantize_row_*_ref / dequantize_row_* on 2M mixed-scale elements). q4_1's
// q * d + m is two roundings: lowp builds for baseline x86-64, where the
// compiler cannot contract it into a fused multiply-add.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

constexpr int64_t kGgmlBlock = 32;  // QK8_0 = QK4_0 = QK4_1 = QK5_0

enum class GgmlType { kQ8_0, kQ4_0, kQ4_1, kQ5_0 };

struct GgmlInfo {
  GgmlType type;
  const char* name;
  int block_bits;  // sizeof(block_qX_Y) * 8
  const char* rule;
};

constexpr char kCommonRule[] =
    " A short last block (cols not a multiple of 32) is quantized as if padded with zeros and"
    " stored as a whole block (ggml itself refuses such rows). NaN and +-Inf take no part in the"
    " block's statistics and come back unchanged (code of 0.0). Clipped counts elements whose"
    " computed q was clamped.";

const GgmlInfo kGgmlTypes[] = {
    {GgmlType::kQ8_0, "q8_0", 16 + 32 * 8,
     "llama.cpp q8_0 (ggml quantize_row_q8_0_ref): blocks of 32 along a row; amax = max |x|;"
     " d = amax / 127 in float32; id = d ? 1/d : 0 from the unrounded d; q = roundf(x * id)"
     " (ties away from zero), int8 -127..127; d stored as fp16 (nearest-even); dequantized"
     " q * fp16(d). 34 bytes per block: 8.5 bits per weight."},
    {GgmlType::kQ4_0, "q4_0", 16 + 32 * 4,
     "llama.cpp q4_0 (ggml quantize_row_q4_0_ref): blocks of 32 along a row; max = the signed"
     " element of largest |x| (the first on ties); d = max / -8, id = d ? 1/d : 0 (unrounded d);"
     " q = min(15, trunc(x * id + 8.5f)) in 0..15, so the element -max lands on 16 and is"
     " clamped to 15; d stored as fp16 (nearest-even); dequantized (q - 8) * fp16(d). 18 bytes"
     " per block: 4.5 bits per weight."},
    {GgmlType::kQ4_1, "q4_1", 32 + 32 * 4,
     "llama.cpp q4_1 (ggml quantize_row_q4_1_ref): blocks of 32 along a row; min, max of the"
     " block; d = (max - min) / 15, id = d ? 1/d : 0 (unrounded d); q = min(15, trunc((x - min)"
     " * id + 0.5f)) in 0..15 with the unrounded min; d and m = min stored as fp16"
     " (nearest-even); dequantized q * fp16(d) + fp16(m) (two float32 roundings). 20 bytes per"
     " block: 5 bits per weight."},
    {GgmlType::kQ5_0, "q5_0", 16 + 32 + 32 * 4,
     "llama.cpp q5_0 (ggml quantize_row_q5_0_ref): blocks of 32 along a row; max = the signed"
     " element of largest |x| (the first on ties); d = max / -16, id = d ? 1/d : 0 (unrounded"
     " d); q = min(31, trunc(x * id + 16.5f)) in 0..31 (the element -max lands on 32 and is"
     " clamped to 31); d stored as fp16 (nearest-even); dequantized (q - 16) * fp16(d). 22 bytes"
     " per block (fp16 d, 32 high bits, 16 bytes of nibbles): 5.5 bits per weight."},
};

const Format& Fp16() {
  static const Format* format = new Format(*FindFormat("fp16"));
  return *format;
}

// GGML_FP32_TO_FP16 then GGML_FP16_TO_FP32: nearest-even, overflow to inf.
float RoundToFp16(float x) { return DecodeToFloat32(Fp16(), EncodeFloat32(Fp16(), x)); }

// RoundToFp16 over an array, in one pass (RoundArray).
void RoundToFp16(std::span<const float> in, std::span<float> out) {
  static const Rounder* rounder = new Rounder(*Rounder::Make(Fp16()));
  rounder->Round(in, out, {.threads = 1});
}

// (intN)(v) of ggml for v = x * id + bias: truncation toward zero, then
// ggml's MIN(qmax, ...). Values ggml's float-to-int conversion could not hold
// (only with a subnormal d, whose 1/d is huge or infinite) are clamped to
// [0, qmax]; NaN (0 * inf) gives `nan_code`. Counts a clamp in `clipped`.
int32_t TruncClamp(float v, int32_t qmax, int32_t nan_code, uint64_t& clipped) {
  if (std::isnan(v)) return nan_code;
  if (v >= static_cast<float>(qmax + 1)) {
    ++clipped;
    return qmax;
  }
  if (v <= -1.0f) {
    ++clipped;
    return 0;
  }
  return static_cast<int32_t>(v);  // truncates toward zero: (-1, 0) gives 0, as ggml
}

// llama.cpp q8_0 / q4_0 / q4_1 / q5_0: see the rule strings above.
class GgmlScheme final : public Scheme {
 public:
  explicit GgmlScheme(const GgmlInfo& info) : Scheme(info.name), info_(info) {}

  bool UsesImportance(int64_t) const override { return info_.type != GgmlType::kQ8_0; }

  const ggml::TypeInfo* GgmlLayout(int64_t) const override { return &ggml::Info(CodecType()); }

  uint64_t StorageBits(int64_t rows, int64_t cols) const override {
    return static_cast<uint64_t>(rows) * static_cast<uint64_t>(BlocksPerRow(cols, kGgmlBlock)) *
           static_cast<uint64_t>(info_.block_bits);
  }

  absl::StatusOr<std::unique_ptr<BlockRounder>> BlockRounderFor(
      int64_t rows, int64_t cols, const TensorContext&) const override {
    return MakeGgmlRounder(CodecType(), rows, cols);
  }

  void Apply(std::span<const float> in, int64_t cols, const TensorContext& context,
             std::span<float> out, SchemeCounts& counts, StoredChunk* stored) const override {
    if (cols <= 0) return;
    if (context.importance != nullptr && info_.type != GgmlType::kQ8_0) {
      // ggml's importance-weighted search (quantize_row_q4_0_impl, ...) is
      // the codec's; q8_0 ignores importance.
      return ApplyGgmlRows(CodecType(), in, cols, context, out, counts, stored);
    }
    if (stored == nullptr) return ApplySimd(in, cols, out, counts);
    const int64_t rows = static_cast<int64_t>(in.size()) / cols;
    for (int64_t r = 0; r < rows; ++r) {
      for (int64_t start = 0; start < cols; start += kGgmlBlock) {
        const int64_t n = std::min(kGgmlBlock, cols - start);
        const size_t at = static_cast<size_t>(r * cols + start);
        Block(in.subspan(at, n), n < kGgmlBlock, out.subspan(at, n), counts, stored);
      }
    }
    // The bytes: the codec's encoder is ggml's quantizer too (the same
    // blocks), each row padded with zeros to whole blocks, non-finite
    // inputs as zeros (as the blocks above take them).
    const int64_t padded = BlocksPerRow(cols, kGgmlBlock) * kGgmlBlock;
    const ggml::TypeInfo& info = ggml::Info(CodecType());
    std::vector<float> row(static_cast<size_t>(padded));
    for (int64_t r = 0; r < rows; ++r) {
      std::fill(row.begin(), row.end(), 0.0f);
      for (int64_t c = 0; c < cols; ++c) {
        const float x = in[static_cast<size_t>(r * cols + c)];
        row[static_cast<size_t>(c)] = std::isfinite(x) ? x : 0.0f;
      }
      const size_t at = stored->bytes.size();
      stored->bytes.resize(at + static_cast<size_t>(ggml::RowBytes(info, padded)));
      (void)ggml::Encode(CodecType(), row, std::span<uint8_t>(stored->bytes).subspan(at));
    }
  }

 private:
  ggml::Type CodecType() const {
    switch (info_.type) {
      case GgmlType::kQ8_0: return ggml::Type::kQ8_0;
      case GgmlType::kQ4_0: return ggml::Type::kQ4_0;
      case GgmlType::kQ4_1: return ggml::Type::kQ4_1;
      case GgmlType::kQ5_0: return ggml::Type::kQ5_0;
    }
    return ggml::Type::kQ8_0;
  }

  // The rules of the block functions below, with the block statistics and
  // the element loop run by the SIMD kernels (kernels/quantize.h,
  // kernels/blocks.h) and the fp16 rounding of the scales by RoundArray: the
  // same bits, without the stored form.
  void ApplySimd(std::span<const float> in, int64_t cols, std::span<float> out,
                 SchemeCounts& counts) const {
    const int64_t rows = static_cast<int64_t>(in.size()) / cols;
    const int64_t per_row = BlocksPerRow(cols, kGgmlBlock);
    const size_t blocks = static_cast<size_t>(rows * per_row);
    thread_local std::vector<float> stat, stat2, id, d, dq, mq;
    stat.resize(blocks);
    id.resize(blocks);
    d.resize(blocks);
    dq.resize(blocks);
    GgmlElementRule rule;
    GgmlBlockParams params;
    switch (info_.type) {
      case GgmlType::kQ8_0:
        BlockAbsMax(in, cols, kGgmlBlock, stat);
        for (size_t g = 0; g < blocks; ++g) d[g] = stat[g] / 127.0f;
        rule = {GgmlRule::kRound, 0.0f, 127, 0};
        break;
      case GgmlType::kQ4_0:
      case GgmlType::kQ5_0: {
        const bool q4 = info_.type == GgmlType::kQ4_0;
        BlockSignedMax(in, cols, kGgmlBlock, stat);
        const float divisor = q4 ? -8.0f : -16.0f;
        for (size_t g = 0; g < blocks; ++g) d[g] = stat[g] / divisor;
        rule = q4 ? GgmlElementRule{GgmlRule::kTrunc, 8.5f, 15, 8}
                  : GgmlElementRule{GgmlRule::kTrunc, 16.5f, 31, 16};
        break;
      }
      case GgmlType::kQ4_1: {
        stat2.resize(blocks);
        mq.resize(blocks);
        BlockMinMax(in, cols, kGgmlBlock, stat, stat2);  // min, max
        if (cols % kGgmlBlock != 0) {                    // the padding of each row's short block
          for (int64_t r = 0; r < rows; ++r) {
            const size_t g = static_cast<size_t>(r * per_row + per_row - 1);
            stat[g] = std::min(stat[g], 0.0f);
            stat2[g] = std::max(stat2[g], 0.0f);
          }
        }
        for (size_t g = 0; g < blocks; ++g) d[g] = (stat2[g] - stat[g]) / 15.0f;
        RoundToFp16(stat, mq);
        rule = {GgmlRule::kOffset, 0.5f, 15, 0};
        params.min = stat;
        params.m = mq;
        break;
      }
    }
    for (size_t g = 0; g < blocks; ++g) id[g] = d[g] != 0.0f ? 1.0f / d[g] : 0.0f;
    RoundToFp16(d, dq);
    params.id = id;
    params.d = dq;
    counts.clipped += QuantizeGgmlBlocks(rule, in, cols, kGgmlBlock, params, out);
  }

  void Block(std::span<const float> x, bool padded, std::span<float> out, SchemeCounts& counts,
             StoredChunk* stored) const {
    switch (info_.type) {
      case GgmlType::kQ8_0:
        return Q8_0(x, out, counts, stored);
      case GgmlType::kQ4_0:
        return SymmetricNibble(x, -8.0f, 8.5f, 15, 8, out, counts, stored);
      case GgmlType::kQ5_0:
        return SymmetricNibble(x, -16.0f, 16.5f, 31, 16, out, counts, stored);
      case GgmlType::kQ4_1:
        return Q4_1(x, padded, out, counts, stored);
    }
  }

  // quantize_row_q8_0_ref: amax = MAX(amax, fabsf(v)), q = roundf(x * id).
  static void Q8_0(std::span<const float> x, std::span<float> out, SchemeCounts& counts,
                   StoredChunk* stored) {
    float amax = 0.0f;
    for (float v : x) {
      if (std::isfinite(v)) amax = std::max(amax, std::fabs(v));
    }
    const float d = amax / 127.0f;  // amax / ((1 << 7) - 1)
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const float dq = RoundToFp16(d);
    for (size_t j = 0; j < x.size(); ++j) {
      int32_t q = 0;
      if (std::isfinite(x[j])) {
        const float v = std::round(x[j] * id);  // roundf: half away from zero
        if (std::isnan(v)) {
          q = 0;
        } else if (v > 127.0f || v < -128.0f) {  // beyond int8: only with a subnormal d
          ++counts.clipped;
          q = v > 0 ? 127 : -128;
        } else {
          q = static_cast<int32_t>(v);
        }
        out[j] = static_cast<float>(q) * dq;
      } else {
        out[j] = x[j];
      }
      if (stored != nullptr) stored->codes.push_back(q);
    }
    if (stored != nullptr) stored->scales.push_back(dq);
  }

  // quantize_row_q4_0_ref (divisor -8, bias 8.5, MIN 15) and
  // quantize_row_q5_0_ref (divisor -16, bias 16.5, MIN 31): the signed
  // element of largest magnitude, found with `amax < fabsf(v)` (first wins).
  static void SymmetricNibble(std::span<const float> x, float divisor, float bias, int32_t qmax,
                              int32_t zero, std::span<float> out, SchemeCounts& counts,
                              StoredChunk* stored) {
    float amax = 0.0f;
    float max = 0.0f;
    for (float v : x) {
      if (std::isfinite(v) && amax < std::fabs(v)) {
        amax = std::fabs(v);
        max = v;
      }
    }
    const float d = max / divisor;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const float dq = RoundToFp16(d);
    for (size_t j = 0; j < x.size(); ++j) {
      int32_t q = zero;
      if (std::isfinite(x[j])) {
        const float v = x[j] * id;  // one float32 product, then one float32 sum
        q = TruncClamp(v + bias, qmax, zero, counts.clipped);
        out[j] = static_cast<float>(q - zero) * dq;
      } else {
        out[j] = x[j];
      }
      if (stored != nullptr) stored->codes.push_back(q);
    }
    if (stored != nullptr) stored->scales.push_back(dq);
  }

  // quantize_row_q4_1_ref: min and max start at FLT_MAX / -FLT_MAX; the
  // padding of a short block takes part as zeros; a block without finite
  // elements has min = max = 0.
  static void Q4_1(std::span<const float> x, bool padded, std::span<float> out,
                   SchemeCounts& counts, StoredChunk* stored) {
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (float v : x) {
      if (!std::isfinite(v)) continue;
      if (v < min) min = v;
      if (v > max) max = v;
    }
    if (padded) {
      min = std::min(min, 0.0f);
      max = std::max(max, 0.0f);
    }
    if (min > max) min = max = 0.0f;      // no finite element at all
    const float d = (max - min) / 15.0f;  // (max - min) / ((1 << 4) - 1)
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const float dq = RoundToFp16(d);
    const float mq = RoundToFp16(min);
    for (size_t j = 0; j < x.size(); ++j) {
      int32_t q = 0;
      if (std::isfinite(x[j])) {
        const float v = (x[j] - min) * id;
        q = TruncClamp(v + 0.5f, 15, 0, counts.clipped);
        const float product = static_cast<float>(q) * dq;
        out[j] = product + mq;
      } else {
        out[j] = x[j];
      }
      if (stored != nullptr) stored->codes.push_back(q);
    }
    if (stored != nullptr) {
      stored->scales.push_back(dq);
      stored->offsets.push_back(mq);
    }
  }

  const GgmlInfo& info_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Scheme>> MakeGgmlScheme(absl::string_view base,
                                                       const SchemeOptions& options) {
  for (const GgmlInfo& info : kGgmlTypes) {
    if (base != info.name) continue;
    if (!options.empty()) return UnknownOption(base, options.front().first, "");
    return std::make_unique<GgmlScheme>(info);
  }
  return absl::NotFoundError(absl::StrCat("not a llama.cpp scheme: ", base));
}

std::vector<SchemeFamily> GgmlFamilies() {
  std::vector<SchemeFamily> families;
  for (const GgmlInfo& info : kGgmlTypes) {
    families.push_back({absl::StrCat("llama.cpp ", info.name),
                        {info.name},
                        absl::StrCat(info.rule, kCommonRule),
                        ""});
  }
  return families;
}

}  // namespace lowp::internal
