// libFuzzer target: ParseGguf over arbitrary file images. On success every
// metadata value is walked (FormatGgufValue, Elements() recursively) and every
// tensor is viewed as TensorSet::Open views it (io/tensor_set.cc's GgufViews)
// and read with ReadAsFloat32 (at most kMaxDecode elements from each end).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <set>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "io/gguf.h"
#include "io/tensor.h"
#include "model/config.h"
#include "model/gguf_index.h"
#include "tests/fuzz/fuzz_check.h"

namespace lowp::fuzz {
namespace {

constexpr int64_t kMaxDecode = 1024;

// A metadata value and its elements, down to the scalars.
void Walk(const GgufValue& v, int depth) {
  Check(depth <= kMaxGgufArrayDepth, "arrays nested deeper than the limit");
  const std::string text = FormatGgufValue(v, 4);
  Check(!text.empty(), "FormatGgufValue gave nothing");
  const std::vector<GgufValue> elements = v.Elements();
  if (v.type != GgufType::kArray) {
    Check(elements.empty(), "a scalar has elements");
    if (v.type == GgufType::kBool) Check(v.u <= 1, "bool value not 0 or 1");
    return;
  }
  Check(text.front() == '[' && text.back() == ']', "an array is not formatted as [...]");
  Check(elements.size() == v.count, "Elements() disagrees with the count");
  for (const GgufValue& e : elements) {
    Check(e.type == v.element_type, "an element of another type");
    Walk(e, depth + 1);
  }
}

bool SameBits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

void CheckDecode(const TensorView& v, int64_t elements) {
  const bool decodes = v.dtype != DType::kGgml || v.ggml->can_decode;
  const int64_t n = std::min(elements, kMaxDecode);
  std::vector<float> out(static_cast<size_t>(n) + 1);
  const std::span<float> first_n(out.data(), static_cast<size_t>(n));
  const absl::Status first = ReadAsFloat32(v, 0, first_n);
  if (!decodes) {
    if (n > 0) Check(absl::IsInvalidArgument(first), "a type lowp cannot decode was read");
    return;
  }
  Check(first.ok(), "ReadAsFloat32 of the first elements failed");
  if (n > 2) {  // an unaligned range decodes to the same values as the whole
    std::vector<float> inner(static_cast<size_t>(n) - 2);
    Check(ReadAsFloat32(v, 1, inner).ok(), "ReadAsFloat32 of an inner range failed");
    Check(SameBits(inner, first_n.subspan(1, inner.size())), "an inner range decodes differently");
  }
  Check(ReadAsFloat32(v, elements - n, first_n).ok(), "ReadAsFloat32 of the last elements failed");
  Check(!ReadAsFloat32(v, elements - n, out).ok(), "ReadAsFloat32 past the end succeeded");
}

// The file's tensors under Hugging Face names, as a checkpoint or
// --weights-file of these models reads them (model/gguf_index.h): every view
// of a part lies inside its tensor's bytes and holds whole rows of its type.
void CheckNames(const TensorView& v) {
  static const std::vector<ModelConfig>* configs = [] {
    auto* out = new std::vector<ModelConfig>;
    ModelConfig llama = LlamaShape("llama", 64, 96, 2, 4, 2, 512, 256);
    out->push_back(llama);
    ModelConfig phi3 = llama;
    phi3.model_type = "phi3";
    phi3.fused_projections = true;
    out->push_back(phi3);
    for (const char* type : {"mixtral", "qwen2_moe", "gpt_oss", "deepseek_v3"}) {
      ModelConfig moe = llama;
      moe.model_type = type;
      moe.num_experts = 4;
      moe.experts_per_token = 2;
      out->push_back(moe);
    }
    return out;
  }();
  for (const ModelConfig& c : *configs) {
    absl::StatusOr<std::vector<GgufTensorName>> names = GgufTensorNames(v, c);
    if (!names.ok()) {
      CheckError(names.status(), "fuzz.gguf");
      continue;
    }
    for (const GgufTensorName& n : *names) {
      Check(!n.name.empty(), "a tensor under an empty name");
      if (!n.row_of.empty()) Check(n.row_of.size() == static_cast<size_t>(v.rows()), "row order");
      if (!n.view.has_value()) continue;
      const TensorView& part = *n.view;
      Check(part.bytes.empty() || (part.bytes.data() >= v.bytes.data() &&
                                   part.bytes.data() + part.bytes.size() <=
                                       v.bytes.data() + v.bytes.size()),
            "a part's bytes outside its tensor");
      const absl::StatusOr<int64_t> elements = ShapeElements(part.shape, part.name);
      Check(elements.ok() && TypeBytes(part, *elements) == part.bytes.size(),
            "a part's bytes disagree with its shape");
    }
  }
}

}  // namespace

int FuzzGguf(const uint8_t* data, size_t size) {
  const std::span<const uint8_t> file(data, size);
  absl::StatusOr<ParsedGguf> parsed = ParseGguf(file, "fuzz.gguf");
  if (!parsed.ok()) {
    CheckError(parsed.status(), "fuzz.gguf");
    Check(absl::IsInvalidArgument(parsed.status()), "error is not InvalidArgument");
    return 0;
  }
  const ParsedGguf& gguf = *parsed;
  Check(gguf.version == 2 || gguf.version == 3, "version");
  Check(gguf.alignment > 0 && (gguf.alignment & (gguf.alignment - 1)) == 0,
        "alignment not a power of two");
  Check(gguf.data_offset % gguf.alignment == 0, "data section not aligned");
  std::set<std::string> keys;
  for (const GgufKeyValue& kv : gguf.metadata) {
    Check(keys.insert(kv.key).second, "a key appears twice");
    Check(gguf.Find(kv.key) == &kv.value, "Find does not find the key");
    Walk(kv.value, 0);
  }
  if (const GgufValue* a = gguf.Find("general.alignment"); a != nullptr) {
    Check(a->type == GgufType::kU32 && a->u == gguf.alignment, "general.alignment not honored");
  } else {
    Check(gguf.alignment == 32, "default alignment not 32");
  }
  std::set<std::string> names;
  std::vector<std::pair<uint64_t, uint64_t>> extents;
  const std::vector<TensorView> views = GgufViews(gguf, file, "fuzz.gguf");
  Check(views.size() == gguf.tensors.size(), "a view per tensor");
  for (size_t i = 0; i < gguf.tensors.size(); ++i) {
    const GgufTensorInfo& t = gguf.tensors[i];
    Check(names.insert(t.name).second, "a tensor name appears twice");
    Check(t.name.size() <= kMaxGgufNameBytes, "a tensor name is too long");
    Check(t.ne.size() <= kMaxGgufDims, "too many dimensions");
    Check(t.type != nullptr, "no type");
    Check(t.offset % gguf.alignment == 0, "tensor offset not aligned");
    const absl::StatusOr<int64_t> elements = ShapeElements(t.ne, t.name);
    Check(elements.ok(), "the dimensions of a parsed tensor are invalid");
    Check(*elements == t.elements, "elements disagrees with the dimensions");
    Check((t.ne.empty() ? 1 : t.ne[0]) % t.type->block == 0, "rows are not whole blocks");
    Check(t.bytes == static_cast<uint64_t>(t.elements / t.type->block) *
                         static_cast<uint64_t>(t.type->bytes),
          "bytes disagree with the type and dimensions");
    Check(gguf.data_offset <= size && t.offset <= size - gguf.data_offset &&
              t.bytes <= size - gguf.data_offset - t.offset,
          "tensor bytes outside the file");
    if (t.bytes > 0) extents.emplace_back(t.offset, t.offset + t.bytes);

    const TensorView& v = views[i];
    Check(v.elements() == t.elements, "the view's elements() disagrees");
    Check(v.bytes.size() == t.bytes && TypeBytes(v, t.elements) == t.bytes,
          "the view's bytes disagree with its type");
    if (!v.bytes.empty()) {
      Check(v.bytes.data() >= file.data() && v.bytes.data() + v.bytes.size() <= file.data() + size,
            "view bytes outside the file");
    }
    CheckDecode(v, t.elements);
    CheckNames(v);
  }
  // No two tensors with bytes share any.
  std::sort(extents.begin(), extents.end());
  for (size_t i = 1; i < extents.size(); ++i) {
    Check(extents[i - 1].second <= extents[i].first, "two tensors overlap");
  }
  return 0;
}

}  // namespace lowp::fuzz

#ifndef LOWP_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return lowp::fuzz::FuzzGguf(data, size);
}
#endif
