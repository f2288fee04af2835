// llama.cpp's other types as schemes whose stored form is the real bytes:
// q5_1, the k-quants q2_K..q6_K, the i-quants iq4_nl and iq4_xs, the grid
// i-quants iq1_s..iq3_s, and ggml's own MXFP4 and NVFP4 (ggml-mxfp4,
// ggml-nvfp4: ties to the smaller magnitude, unlike lowp's OCP mxfp4 and
// TransformerEngine-style nvfp4). Each row is encoded by codecs/ggml.h and
// decoded again: the fake-quant values are decode(encode(x)), bit for bit
// what llama.cpp would compute from the file. With importance weights
// (TensorContext::importance) each row is encoded as ggml_quantize_chunk
// encodes it with that imatrix.
//
// Rows whose length is not a multiple of a type's block:
//   - 32- and 64-element types quantize the short last block as if padded
//     with zeros (like lowp's q4_0 family; ggml itself refuses such rows),
//     the padding weighing 0;
//   - 256-element super-block types do what llama.cpp's quantizer does
//     (tensor_type_fallback, llama.cpp 007dbbf): q2_K and q3_K become q4_0,
//     iq4_xs and the grid types iq4_nl, q4_K q5_0, q5_K q5_1, q6_K q8_0, and
//     f16 when even that block does not divide the row. AppliedName() says
//     what a row length gets.
// NaN and +-Inf are encoded as 0 and come back unchanged.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "codecs/ggml.h"
#include "kernels/ggml_encode.h"
#include "quant/rounder.h"
#include "quant/scheme_families.h"

namespace lowp::internal {
namespace {

struct CodecInfo {
  const char* name;     // the scheme's name
  ggml::Type type;
  ggml::Type fallback;  // for rows the super-block does not divide (== type if none)
  const char* rule;
};

const CodecInfo kCodecs[] = {
    {"q5_1", ggml::Type::kQ5_1, ggml::Type::kQ5_1,
     "llama.cpp q5_1 (ggml quantize_row_q5_1_ref): blocks of 32; d = (max - min) / 31 and"
     " m = min, both fp16; q = (uint8)((x - min) / d + 0.5) in 0..31; x = q * d + m. 24 bytes"
     " per block: 6 bits per weight."},
    {"q2_K", ggml::Type::kQ2_K, ggml::Type::kQ4_0,
     "llama.cpp q2_K (quantize_row_q2_K_ref): super-blocks of 256 in 16 groups of 16; each"
     " group's scale and minimum by ggml's weighted search (make_qkx2_quants, |x| weights, 16"
     " trial scales, absolute error), quantized to 4 bits against fp16 d and dmin; codes 0..3;"
     " x = d * sc * q - dmin * m. 84 bytes per 256: 2.625 bits per weight."},
    {"q3_K", ggml::Type::kQ3_K, ggml::Type::kQ4_0,
     "llama.cpp q3_K (quantize_row_q3_K_ref): super-blocks of 256 in 16 groups of 16;"
     " symmetric codes -4..3 refined by make_q3_quants (x^2 weights, up to 5 passes); 6-bit"
     " group scales against an fp16 d; x = d * (sc - 32) * (q - 4). 110 bytes per 256: 3.4375"
     " bits per weight."},
    {"q4_K", ggml::Type::kQ4_K, ggml::Type::kQ5_0,
     "llama.cpp q4_K (quantize_row_q4_K_ref): super-blocks of 256 in 8 groups of 32; each"
     " group's scale and minimum by make_qkx2_quants (weights sqrt(mean x^2) + |x|, 21 trial"
     " scales, squared error), 6-bit against fp16 d and dmin; codes 0..15; x = d * sc * q -"
     " dmin * m. 144 bytes per 256: 4.5 bits per weight."},
    {"q5_K", ggml::Type::kQ5_K, ggml::Type::kQ5_1,
     "llama.cpp q5_K (quantize_row_q5_K_ref): q4_K's layout with 5-bit codes 0..31 (16 trial"
     " scales). 176 bytes per 256: 5.5 bits per weight."},
    {"q6_K", ggml::Type::kQ6_K, ggml::Type::kQ8_0,
     "llama.cpp q6_K (quantize_row_q6_K_ref): super-blocks of 256 in 16 groups of 16;"
     " symmetric codes -32..31 by make_qx_quants (x^2 weights, 19 trial scales); int8 group"
     " scales against an fp16 d; x = d * sc * (q - 32). 210 bytes per 256: 6.5625 bits per"
     " weight."},
    {"iq4_nl", ggml::Type::kIQ4_NL, ggml::Type::kIQ4_NL,
     "llama.cpp iq4_nl (quantize_iq4_nl, ntry 7): blocks of 32 on the non-uniform grid"
     " {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}; the fp16"
     " scale is the best of 15 trials by the x^2-weighted fit; x = d * grid[q]. 18 bytes per"
     " block: 4.5 bits per weight."},
    {"iq4_xs", ggml::Type::kIQ4_XS, ggml::Type::kIQ4_NL,
     "llama.cpp iq4_xs (quantize_iq4_xs, ntry 7): iq4_nl's grid and search in super-blocks of"
     " 256, the 8 group scales stored in 6 bits against an fp16 d. 136 bytes per 256: 4.25 bits"
     " per weight."},
    {"iq2_xxs", ggml::Type::kIQ2_XXS, ggml::Type::kIQ4_NL,
     "llama.cpp iq2_xxs (quantize_iq2_xxs, importance matrix required): super-blocks of 256 in"
     " 8 groups of 32, each 8 elements one point of the 256-point grid iq2xxs_grid (found among"
     " the grid neighbours of the rounded magnitudes) with a 7-bit even-parity sign pattern, a"
     " 4-bit scale per group and an fp16 d. 66 bytes per 256:"
     " 2.0625 bits per weight."},
    {"iq2_xs", ggml::Type::kIQ2_XS, ggml::Type::kIQ4_NL,
     "llama.cpp iq2_xs (quantize_iq2_xs, importance matrix required): iq2_xxs with the 512-point"
     " grid iq2xs_grid, 9-bit grid indices and two 4-bit scales per group of 32. 74 bytes per"
     " 256: 2.3125 bits per weight."},
    {"iq2_s", ggml::Type::kIQ2_S, ggml::Type::kIQ4_NL,
     "llama.cpp iq2_s (quantize_iq2_s): the 1024-point grid iq2s_grid, 10-bit indices, 8 free"
     " sign bits per 8 elements and two 4-bit scales per group of 32 (without an importance"
     " matrix, ggml weighs by x^2 + sigma2). 82 bytes per 256: 2.5625 bits per weight."},
    {"iq3_xxs", ggml::Type::kIQ3_XXS, ggml::Type::kIQ4_NL,
     "llama.cpp iq3_xxs (quantize_iq3_xxs): groups of 4 elements on the 256-point grid"
     " iq3xxs_grid, 7-bit even-parity signs per 8, a 4-bit scale per 32 and an fp16 d. 98 bytes"
     " per 256: 3.0625 bits per weight."},
    {"iq3_s", ggml::Type::kIQ3_S, ggml::Type::kIQ4_NL,
     "llama.cpp iq3_s (quantize_iq3_s): the 512-point grid iq3s_grid, 9-bit indices, free sign"
     " bits and a 4-bit scale per 32. 110 bytes per 256: 3.4375 bits per weight."},
    {"iq1_s", ggml::Type::kIQ1_S, ggml::Type::kIQ4_NL,
     "llama.cpp iq1_s (quantize_iq1_s, importance matrix required): groups of 8 elements on the"
     " 2048-point ternary grid iq1s_grid, a 3-bit scale and a shared shift of +-1/8 (IQ1S_DELTA)"
     " per 32, an fp16 d. 50 bytes per 256: 1.5625 bits per weight."},
    {"iq1_m", ggml::Type::kIQ1_M, ggml::Type::kIQ4_NL,
     "llama.cpp iq1_m (quantize_iq1_m): iq1_s's grid with a shift per 8 elements and 3-bit"
     " scales per 16, the fp16 super-block scale spread over the scales' spare bits. 56 bytes"
     " per 256: 1.75 bits per weight."},
    {"ggml-mxfp4", ggml::Type::kMXFP4, ggml::Type::kMXFP4,
     "ggml's MXFP4 (GGUF type 39, quantize_row_mxfp4_ref): OCP MX v1.0's layout (an e8m0"
     " exponent floor(log2 amax) - 2 per 32, e2m1 codes), but each code is the first of least"
     " |value - x| (ties toward the smaller magnitude, where OCP's mxfp4 rounds to even). 17"
     " bytes per block: 4.25 bits per weight."},
    {"ggml-nvfp4", ggml::Type::kNVFP4, ggml::Type::kNVFP4,
     "ggml's NVFP4 (GGUF type 40, quantize_row_nvfp4_ref): four sub-blocks of 16 per 64, each"
     " with an unsigned e4m3 scale ue4m3(amax / 6) (rounding half up on the first dropped bit),"
     " e2m1 codes by least |value - x| (ties toward the smaller magnitude); no tensor-wide"
     " scale. 36 bytes per 64: 4.5 bits per weight."},
};

class CodecScheme final : public Scheme {
 public:
  explicit CodecScheme(const CodecInfo& info) : Scheme(info.name), info_(info) {}

  std::string AppliedName(int64_t cols) const override {
    const ggml::TypeInfo* t = Applied(cols);
    if (t == nullptr) return "f16";
    if (t->type == info_.type) return name();
    return std::string(t->name);
  }

  const ggml::TypeInfo* GgmlLayout(int64_t cols) const override {
    const ggml::TypeInfo* t = Applied(cols);
    return t != nullptr ? t : &ggml::Info(ggml::Type::kF16);
  }

  bool NeedsImportance(int64_t cols) const override {
    const ggml::TypeInfo* t = Applied(cols);
    return t != nullptr && t->needs_importance;
  }

  // ggml's q8_0, MXFP4 and NVFP4 quantizers ignore the imatrix (and f16, the
  // last resort, has none).
  bool UsesImportance(int64_t cols) const override {
    const ggml::TypeInfo* t = Applied(cols);
    return t != nullptr && t->type != ggml::Type::kQ8_0 && t->type != ggml::Type::kMXFP4 &&
           t->type != ggml::Type::kNVFP4;
  }

  uint64_t StorageBits(int64_t rows, int64_t cols) const override {
    const ggml::TypeInfo* t = Applied(cols);
    if (t == nullptr) return static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols) * 16;
    return static_cast<uint64_t>(rows) * static_cast<uint64_t>(BlocksPerRow(cols, t->block)) *
           static_cast<uint64_t>(t->bytes) * 8;
  }

  absl::StatusOr<std::unique_ptr<BlockRounder>> BlockRounderFor(
      int64_t rows, int64_t cols, const TensorContext& context) const override {
    const ggml::TypeInfo* t = Applied(cols);
    if (t == nullptr || ggml::CodeCount(t->type) == 0) {
      return Scheme::BlockRounderFor(rows, cols, context);
    }
    return MakeGgmlRounder(t->type, rows, cols);
  }

  void Apply(std::span<const float> in, int64_t cols, const TensorContext& context,
             std::span<float> out, SchemeCounts& counts, StoredChunk* stored) const override {
    if (cols <= 0) return;
    const ggml::TypeInfo* t = Applied(cols);
    if (t == nullptr) {  // llama.cpp's last resort: f16 (overflowing to inf, as ggml's)
      for (size_t i = 0; i < in.size(); ++i) {
        const uint16_t h = ggml::Fp32ToFp16(std::isfinite(in[i]) ? in[i] : 0.0f);
        out[i] = std::isfinite(in[i]) ? ggml::Fp16ToFp32(h) : in[i];
        if (stored != nullptr) {
          stored->bytes.push_back(static_cast<uint8_t>(h));
          stored->bytes.push_back(static_cast<uint8_t>(h >> 8));
        }
      }
      return;
    }
    // q5_1 weighs by the importance; MXFP4 and NVFP4 ignore it.
    const bool weighted = context.importance != nullptr && t->type == ggml::Type::kQ5_1;
    if (stored == nullptr && !weighted && ApplyGgmlBlocks(t->type, in, cols, out, counts)) return;
    ApplyGgmlRows(t->type, in, cols, context, out, counts, stored);
  }

 private:
  // The ggml type a row of `cols` gets, null for f16.
  const ggml::TypeInfo* Applied(int64_t cols) const {
    const ggml::TypeInfo& own = ggml::Info(info_.type);
    if (own.block < 256 || cols % own.block == 0) return &own;
    const ggml::TypeInfo& fallback = ggml::Info(info_.fallback);
    return cols % fallback.block == 0 ? &fallback : nullptr;
  }

  const CodecInfo& info_;
};

}  // namespace

void ApplyGgmlRows(ggml::Type type, std::span<const float> in, int64_t cols,
                   const TensorContext& context, std::span<float> out, SchemeCounts& counts,
                   StoredChunk* stored) {
  const ggml::TypeInfo& t = ggml::Info(type);
  const int64_t rows = static_cast<int64_t>(in.size()) / cols;
  const int64_t padded = BlocksPerRow(cols, t.block) * t.block;
  std::vector<float> row(static_cast<size_t>(padded), 0.0f), decoded(row.size());
  std::vector<uint8_t> bytes(static_cast<size_t>(ggml::RowBytes(t, padded)));
  std::vector<float> weights;
  const int64_t first_row = context.first_element / cols;
  for (int64_t r = 0; r < rows; ++r) {
    const std::span<const float> x =
        in.subspan(static_cast<size_t>(r * cols), static_cast<size_t>(cols));
    for (int64_t c = 0; c < cols; ++c) row[c] = std::isfinite(x[c]) ? x[c] : 0.0f;
    const std::span<const float> w = context.ImportanceOfRow(first_row + r, cols);
    if (!w.empty()) {
      weights.assign(w.begin(), w.end());
      weights.resize(row.size(), 0.0f);
    } else {
      weights.clear();
    }
    // Sizes fit by construction; a type needing importance is refused
    // before Apply (NeedsImportance).
    (void)kernels::EncodeGgml(type, row, bytes, &counts.clipped, weights);
    (void)ggml::Decode(type, bytes, decoded);
    float* y = out.data() + r * cols;
    for (int64_t c = 0; c < cols; ++c) y[c] = std::isfinite(x[c]) ? decoded[c] : x[c];
    if (stored != nullptr) stored->bytes.insert(stored->bytes.end(), bytes.begin(), bytes.end());
  }
}

absl::StatusOr<std::unique_ptr<Scheme>> MakeGgmlCodecScheme(absl::string_view base,
                                                            const SchemeOptions& options) {
  for (const CodecInfo& info : kCodecs) {
    if (!absl::EqualsIgnoreCase(base, info.name)) continue;
    if (!options.empty()) return UnknownOption(base, options.front().first, "");
    return std::make_unique<CodecScheme>(info);
  }
  return absl::NotFoundError(absl::StrCat("not a llama.cpp codec scheme: ", base));
}

std::vector<SchemeFamily> GgmlCodecFamilies() {
  std::vector<SchemeFamily> families;
  for (const CodecInfo& info : kCodecs) {
    std::string rule = info.rule;
    if (info.fallback != info.type) {
      absl::StrAppend(&rule, " Rows not a multiple of 256 get llama.cpp's fallback, ",
                      ggml::Info(info.fallback).name, " (f16 if 32 does not divide them either).");
    } else {
      absl::StrAppend(&rule, " A short last block is quantized as if padded with zeros.");
    }
    absl::StrAppend(&rule, " NaN and +-Inf are encoded as 0 and come back unchanged; the stored"
                           " form is ggml's bytes, equal to ggml's own.");
    families.push_back({absl::StrCat("llama.cpp ", info.name), {info.name}, rule, ""});
  }
  return families;
}

}  // namespace lowp::internal
