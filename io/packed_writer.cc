#include "io/packed_writer.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "formats/format.h"
#include "formats/reference.h"

namespace lowp {
namespace {

// The readers refuse sides beyond this (io/packed_tensors.cc), which keeps
// every product below (N * K, K * b) within int64.
constexpr int64_t kMaxSide = int64_t{1} << 31;

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

absl::string_view LayoutName(WrittenLayout layout) {
  switch (layout) {
    case WrittenLayout::kGptq:
      return "GPTQ";
    case WrittenLayout::kCompressedInt:
      return "compressed-tensors pack-quantized";
    case WrittenLayout::kCompressedNvfp4:
      return "compressed-tensors nvfp4-pack-quantized";
    case WrittenLayout::kCompressedFp8:
      return "compressed-tensors float-quantized";
  }
  return "?";
}

// What a spec comes to: its parts and the shapes of the inputs.
struct Plan {
  std::vector<PackPart> parts;
  int64_t groups = 1;      // G: scale entries per row along K
  int64_t scale_rows = 1;  // PackInput.scales is [scale_rows, scale_cols]
  int64_t scale_cols = 1;
  bool zeros = false;  // PackInput.zeros is [N, G]
  DType scale_dtype = DType::kF16;
  uint32_t code_limit = 0;  // codes are in [0, code_limit)
};

absl::StatusOr<Plan> MakePlan(const PackSpec& spec) {
  const int64_t N = spec.rows, K = spec.cols;
  const int b = spec.bits;
  const auto refuse = [&](absl::string_view why) {
    return absl::InvalidArgumentError(
        absl::StrCat("packing a [", N, ", ", K, "] ", LayoutName(spec.layout), " weight: ", why));
  };
  const bool fp8 = spec.layout == WrittenLayout::kCompressedFp8;
  const bool nvfp4 = spec.layout == WrittenLayout::kCompressedNvfp4;
  if (N < 1 || K < 1 || N > kMaxSide || K > kMaxSide) {
    return refuse("rows and cols must be from 1 to 2^31");
  }
  if (spec.block_rows != 0 && !fp8) return refuse("block_rows is for FP8's 2-D blocks");
  if (spec.per_tensor && (spec.layout == WrittenLayout::kGptq || nvfp4)) {
    return refuse("the layout has no per-tensor scale (per_tensor)");
  }
  if (spec.g_idx && (nvfp4 || fp8)) return refuse("the layout has no g_idx");
  if (!nvfp4 && spec.scale_dtype != DType::kF16 && spec.scale_dtype != DType::kBF16 &&
      spec.scale_dtype != DType::kF32) {
    return refuse(
        absl::StrCat("scale_dtype ", DTypeName(spec.scale_dtype), " is not F16, BF16 or F32"));
  }
  const bool needs_groups = !spec.per_tensor && !nvfp4;
  if (needs_groups && (spec.group_cols < 1 || spec.group_cols > kMaxSide)) {
    return refuse(absl::StrCat("group_cols ", spec.group_cols, " is not from 1 to 2^31"));
  }
  Plan plan;
  plan.scale_dtype = spec.scale_dtype;
  if (needs_groups) plan.groups = CeilDiv(K, spec.group_cols);
  const int64_t G = plan.groups;
  const std::vector<int64_t> by_group = {N, G};
  switch (spec.layout) {
    case WrittenLayout::kGptq: {
      if (b != 2 && b != 3 && b != 4 && b != 8) {
        return refuse(absl::StrCat("bits ", b, " is not 2, 3, 4 or 8"));
      }
      if (K * b % 32 != 0 || N * b % 32 != 0) {
        return refuse(absl::StrCat("K and N of ", b,
                                   "-bit fields must fill whole 32-bit words "
                                   "(K * bits and N * bits multiples of 32)"));
      }
      plan.parts = {{".qweight", DType::kI32, {K * b / 32, N}},
                    {".qzeros", DType::kI32, {G, N * b / 32}},
                    {".scales", spec.scale_dtype, {G, N}}};
      if (spec.g_idx) plan.parts.push_back({".g_idx", DType::kI32, {K}});
      plan.scale_rows = N;
      plan.scale_cols = G;
      plan.zeros = !spec.symmetric;
      plan.code_limit = 1u << b;
      break;
    }
    case WrittenLayout::kCompressedInt: {
      if (b < 2 || b > 8) return refuse(absl::StrCat("bits ", b, " is not from 2 to 8"));
      if (spec.per_tensor && !spec.symmetric) {
        return refuse("asymmetric per tensor is a layout the reader refuses");
      }
      if (spec.per_tensor && spec.g_idx) return refuse("a per-tensor scale has no groups to index");
      const int64_t pf = 32 / b;
      plan.parts = {{".weight_packed", DType::kI32, {N, CeilDiv(K, pf)}},
                    {".weight_scale", spec.scale_dtype,
                     spec.per_tensor ? std::vector<int64_t>{1} : by_group}};
      if (!spec.symmetric) {
        plan.parts.push_back({".weight_zero_point", DType::kI32, {CeilDiv(N, pf), G}});
      }
      plan.parts.push_back({".weight_shape", DType::kI64, {2}});
      if (spec.g_idx) plan.parts.push_back({".weight_g_idx", DType::kI32, {K}});
      if (!spec.per_tensor) {
        plan.scale_rows = N;
        plan.scale_cols = G;
      }
      plan.zeros = !spec.symmetric;
      plan.code_limit = 1u << b;
      break;
    }
    case WrittenLayout::kCompressedNvfp4: {
      if (K % 2 != 0) return refuse("K must be even: two e2m1 codes a byte");
      if (spec.group_cols != 0 && spec.group_cols != 16) {
        return refuse(
            absl::StrCat("group_cols ", spec.group_cols, ": NVFP4's groups are 16 columns"));
      }
      plan.groups = CeilDiv(K, 16);
      plan.parts = {{".weight_packed", DType::kU8, {N, K / 2}},
                    {".weight_scale", DType::kF8E4M3, {N, plan.groups}},
                    {".weight_global_scale", DType::kF32, {1}}};
      plan.scale_rows = N;
      plan.scale_cols = plan.groups;
      plan.scale_dtype = DType::kF8E4M3;
      plan.code_limit = 16;
      break;
    }
    case WrittenLayout::kCompressedFp8: {
      if (spec.element_dtype != DType::kF8E4M3 && spec.element_dtype != DType::kF8E5M2) {
        return refuse(absl::StrCat("element_dtype ", DTypeName(spec.element_dtype),
                                   " is not F8_E4M3 or F8_E5M2"));
      }
      if (spec.per_tensor && spec.block_rows != 0) {
        return refuse("per_tensor and block_rows both set");
      }
      if (spec.block_rows < 0 || spec.block_rows > kMaxSide) {
        return refuse(absl::StrCat("block_rows ", spec.block_rows, " is not from 0 to 2^31"));
      }
      if (spec.block_rows > 0) {
        plan.scale_rows = CeilDiv(N, spec.block_rows);
        plan.scale_cols = G;
      } else if (!spec.per_tensor) {
        plan.scale_rows = N;
        plan.scale_cols = G;
      }
      plan.parts = {{".weight", spec.element_dtype, {N, K}},
                    {".weight_scale", spec.scale_dtype,
                     spec.per_tensor ? std::vector<int64_t>{1}
                                     : std::vector<int64_t>{plan.scale_rows, plan.scale_cols}}};
      plan.code_limit = 256;
      break;
    }
  }
  return plan;
}

// Where element i of a [rows, cols] row-major input is, for messages:
// "row 2, group 5", or "column 7" for a vector (no `across`).
std::string Where(size_t i, int64_t cols, absl::string_view down, absl::string_view across) {
  if (across.empty()) return absl::StrCat(down, " ", i);
  return absl::StrCat(down, " ", i / static_cast<uint64_t>(cols), ", ", across, " ",
                      i % static_cast<uint64_t>(cols));
}

// Every value of PackInput.`name` ([rows, cols] row-major) in [low, high].
absl::Status InRange(absl::string_view name, std::span<const int32_t> values, int64_t cols,
                     absl::string_view down, absl::string_view across, int64_t low, int64_t high,
                     absl::string_view why = "") {
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] >= low && values[i] <= high) continue;
    return absl::InvalidArgumentError(absl::StrCat("PackInput.", name, " at ",
                                                   Where(i, cols, down, across), " is ", values[i],
                                                   ", outside [", low, ", ", high, "]", why));
  }
  return absl::OkStatus();
}

const Format& ScaleFormat(DType dtype) {
  static const Format fp16 = *FindFormat("fp16");
  static const Format bf16 = *FindFormat("bf16");
  static const Format e4m3 = *FindFormat("fp8_e4m3fn");
  return dtype == DType::kF16 ? fp16 : dtype == DType::kBF16 ? bf16 : e4m3;
}

// The codes of `dtype` (F32 bits, F16, BF16, F8_E4M3) of the scales, which
// must be finite and come back from the code bit for bit.
absl::StatusOr<std::vector<uint32_t>> ScaleCodes(std::span<const float> scales, DType dtype,
                                                 int64_t grid_cols) {
  std::vector<uint32_t> codes(scales.size());
  for (size_t i = 0; i < scales.size(); ++i) {
    const float v = scales[i];
    const auto refuse = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(
          "PackInput.scales at ", Where(i, grid_cols, "row", "column"), " is ", v, ", ", why));
    };
    if (!std::isfinite(v)) return refuse("not finite");
    if (dtype == DType::kF32) {
      codes[i] = std::bit_cast<uint32_t>(v);
      continue;
    }
    const Format& format = ScaleFormat(dtype);
    codes[i] = EncodeFloat32(format, v);
    const float back = DecodeToFloat32(format, codes[i]);
    if (std::bit_cast<uint32_t>(back) != std::bit_cast<uint32_t>(v)) {
      return refuse(absl::StrCat("not exactly representable in ", DTypeName(dtype),
                                 " (nearest: ", back, ")"));
    }
  }
  return codes;
}

// `values` (a vector or span of integers), each in its low `width` bytes,
// little-endian.
template <typename Values>
std::vector<uint8_t> LittleEndian(const Values& values, size_t width) {
  std::vector<uint8_t> out(values.size() * width);
  for (size_t i = 0; i < values.size(); ++i) {
    const uint64_t v = static_cast<uint64_t>(values[i]);
    for (size_t j = 0; j < width; ++j) out[i * width + j] = static_cast<uint8_t>(v >> (8 * j));
  }
  return out;
}

// ORs `value` into field `index` of `bits` bits of the stream of words
// word(0), word(1), ...: stream bits [bits * index, bits * index + bits),
// straddling two words when 32 is not a multiple of bits (the reader's
// StreamField).
template <typename WordOf>
void OrStreamField(int bits, int64_t index, uint32_t value, const WordOf& word) {
  const int64_t bit = int64_t{bits} * index;
  const int shift = static_cast<int>(bit & 31);
  word(bit >> 5) |= value << shift;
  if (shift + bits > 32) word((bit >> 5) + 1) |= value >> (32 - shift);
}

absl::Status SpanSize(absl::string_view name, size_t size, int64_t want, absl::string_view what) {
  if (size == static_cast<uint64_t>(want)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("PackInput.", name, " holds ", size, " values; ", what, " needs ", want));
}

}  // namespace

absl::StatusOr<std::vector<PackPart>> PackParts(const PackSpec& spec) {
  absl::StatusOr<Plan> plan = MakePlan(spec);
  if (!plan.ok()) return plan.status();
  return std::move(plan->parts);
}

absl::StatusOr<std::vector<std::vector<uint8_t>>> Pack(const PackSpec& spec,
                                                       const PackInput& input) {
  absl::StatusOr<Plan> plan = MakePlan(spec);
  if (!plan.ok()) return plan.status();
  const int64_t N = spec.rows, K = spec.cols, G = plan->groups;
  const int b = spec.bits;
  const std::string weight = absl::StrCat("a [", N, ", ", K, "] weight");
  const std::string grid = absl::StrCat("[", plan->scale_rows, ", ", plan->scale_cols, "] scales");
  const std::string zero_grid = absl::StrCat("[", N, ", ", G, "] zero points");
  for (const absl::Status& s :
       {SpanSize("codes", input.codes.size(), N * K, weight),
        SpanSize("scales", input.scales.size(), plan->scale_rows * plan->scale_cols, grid),
        SpanSize("zeros", input.zeros.size(), plan->zeros ? N * G : 0,
                 plan->zeros ? zero_grid : "a symmetric layout"),
        SpanSize("g_idx", input.g_idx.size(), spec.g_idx && !input.g_idx.empty() ? K : 0,
                 spec.g_idx ? "one group per column" : "a spec without g_idx")}) {
    if (!s.ok()) return s;
  }
  if (absl::Status s = InRange("codes", input.codes, K, "row", "column", 0, plan->code_limit - 1);
      !s.ok()) {
    return s;
  }
  if (plan->zeros) {
    const bool v1 = spec.layout == WrittenLayout::kGptq && !spec.gptq_v2;
    const int64_t low = v1 ? 1 : 0;
    if (absl::Status s =
            InRange("zeros", input.zeros, G, "row", "group", low, (int64_t{1} << b) - 1 + low,
                    v1 ? " (GPTQ v1 stores z - 1: z = 0 would overflow its field)" : "");
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = InRange("g_idx", input.g_idx, 0, "column", "", 0, G - 1); !s.ok()) return s;
  absl::StatusOr<std::vector<uint32_t>> scales =
      ScaleCodes(input.scales, plan->scale_dtype, plan->scale_cols);
  if (!scales.ok()) return scales.status();
  const size_t scale_width = DTypeBytes(plan->scale_dtype);
  std::vector<int32_t> g_idx(input.g_idx.begin(), input.g_idx.end());
  if (spec.g_idx && g_idx.empty()) {
    for (int64_t k = 0; k < K; ++k) g_idx.push_back(static_cast<int32_t>(k / spec.group_cols));
  }
  const auto code = [&](int64_t n, int64_t k) {
    return static_cast<uint32_t>(input.codes[static_cast<size_t>(n * K + k)]);
  };
  const auto zero = [&](int64_t n, int64_t g) {
    return plan->zeros ? static_cast<uint32_t>(input.zeros[static_cast<size_t>(n * G + g)])
                       : 1u << (b - 1);
  };
  std::vector<std::vector<uint8_t>> out;
  switch (spec.layout) {
    case WrittenLayout::kGptq: {
      // qweight [K*b/32, N]: column n is the stream of codes (n, 0..K-1).
      std::vector<uint32_t> qweight(static_cast<size_t>(K * b / 32 * N), 0);
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t k = 0; k < K; ++k) {
          OrStreamField(b, k, code(n, k), [&](int64_t r) -> uint32_t& {
            return qweight[static_cast<size_t>(r * N + n)];
          });
        }
      }
      // qzeros [G, N*b/32]: row g is the stream of zeros (0..N-1, g).
      const int64_t zero_words = N * b / 32;
      const uint32_t minus = spec.gptq_v2 ? 0 : 1;
      std::vector<uint32_t> qzeros(static_cast<size_t>(G * zero_words), 0);
      std::vector<uint32_t> transposed(scales->size());
      for (int64_t g = 0; g < G; ++g) {
        for (int64_t n = 0; n < N; ++n) {
          OrStreamField(b, n, zero(n, g) - minus, [&](int64_t c) -> uint32_t& {
            return qzeros[static_cast<size_t>(g * zero_words + c)];
          });
          transposed[static_cast<size_t>(g * N + n)] = (*scales)[static_cast<size_t>(n * G + g)];
        }
      }
      out = {LittleEndian(qweight, 4), LittleEndian(qzeros, 4),
             LittleEndian(transposed, scale_width)};
      if (spec.g_idx) out.push_back(LittleEndian(g_idx, 4));
      break;
    }
    case WrittenLayout::kCompressedInt: {
      // Fields of a word along K (weights) or N (zero points), never straddling.
      const int64_t pf = 32 / b, words = CeilDiv(K, pf);
      std::vector<uint32_t> packed(static_cast<size_t>(N * words), 0);
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t k = 0; k < K; ++k) {
          packed[static_cast<size_t>(n * words + k / pf)] |= code(n, k) << (b * (k % pf));
        }
      }
      out = {LittleEndian(packed, 4), LittleEndian(*scales, scale_width)};
      if (plan->zeros) {
        std::vector<uint32_t> zp(static_cast<size_t>(CeilDiv(N, pf) * G), 0);
        for (int64_t n = 0; n < N; ++n) {
          for (int64_t g = 0; g < G; ++g) {
            zp[static_cast<size_t>(n / pf * G + g)] |= zero(n, g) << (b * (n % pf));
          }
        }
        out.push_back(LittleEndian(zp, 4));
      }
      out.push_back(LittleEndian(std::vector<int64_t>{N, K}, 8));
      if (spec.g_idx) out.push_back(LittleEndian(g_idx, 4));
      break;
    }
    case WrittenLayout::kCompressedNvfp4: {
      if (!std::isfinite(input.global_scale) || input.global_scale == 0) {
        return absl::InvalidArgumentError(absl::StrCat(
            "PackInput.global_scale ", input.global_scale, " is not finite and nonzero"));
      }
      std::vector<uint8_t> packed(static_cast<size_t>(N * K / 2), 0);
      for (int64_t n = 0; n < N; ++n) {
        for (int64_t k = 0; k < K; ++k) {
          packed[static_cast<size_t>((n * K + k) / 2)] |=
              static_cast<uint8_t>(code(n, k) << (4 * (k % 2)));
        }
      }
      out = {std::move(packed), LittleEndian(*scales, 1),
             LittleEndian(std::vector<uint32_t>{std::bit_cast<uint32_t>(input.global_scale)}, 4)};
      break;
    }
    case WrittenLayout::kCompressedFp8:
      out = {LittleEndian(input.codes, 1), LittleEndian(*scales, scale_width)};
      break;
  }
  return out;
}

}  // namespace lowp
