#include "io/gguf_writer.h"

#include <bit>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "io/gguf.h"

namespace lowp {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GGUF is little-endian; the writer copies floats as they are in memory");

constexpr uint64_t kAlignment = 32;  // GGUF_DEFAULT_ALIGNMENT
constexpr uint32_t kGgmlF32 = 0;     // GGML_TYPE_F32

template <typename T>
void Put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

void PutString(std::vector<uint8_t>& out, absl::string_view s) {
  Put<uint64_t>(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

void Pad(std::vector<uint8_t>& out, uint64_t written) {
  out.insert(out.end(), (kAlignment - written % kAlignment) % kAlignment, 0);
}

// ggml_n_dims: the dimensions up to the last that is not 1, at least one.
size_t NDims(const std::vector<int64_t>& ne) {
  size_t n = ne.size();
  while (n > 1 && ne[n - 1] == 1) --n;
  return n == 0 ? 1 : n;
}

}  // namespace

void GgufWriter::AddString(absl::string_view key, absl::string_view value) {
  keys_.emplace_back(key);
  PutString(metadata_, key);
  Put<int32_t>(metadata_, static_cast<int32_t>(GgufType::kString));
  PutString(metadata_, value);
}

void GgufWriter::AddU32(absl::string_view key, uint32_t value) {
  keys_.emplace_back(key);
  PutString(metadata_, key);
  Put<int32_t>(metadata_, static_cast<int32_t>(GgufType::kU32));
  Put<uint32_t>(metadata_, value);
}

void GgufWriter::AddStringArray(absl::string_view key, const std::vector<std::string>& values) {
  keys_.emplace_back(key);
  PutString(metadata_, key);
  Put<int32_t>(metadata_, static_cast<int32_t>(GgufType::kArray));
  Put<int32_t>(metadata_, static_cast<int32_t>(GgufType::kString));
  Put<uint64_t>(metadata_, values.size());
  for (const std::string& v : values) PutString(metadata_, v);
}

void GgufWriter::AddF32Tensor(absl::string_view name, std::vector<int64_t> ne,
                              std::span<const float> values) {
  tensors_.push_back({std::string(name), std::move(ne), values});
}

absl::Status GgufWriter::Write(OutputFile& out) const {
  std::set<absl::string_view> keys;
  for (const std::string& key : keys_) {
    if (!keys.insert(key).second) {
      return absl::InvalidArgumentError(absl::StrCat("metadata key \"", key, "\" is given twice"));
    }
  }
  std::set<absl::string_view> names;
  std::vector<uint8_t> head;
  head.reserve(24 + metadata_.size() + tensors_.size() * (8 + kMaxGgufNameBytes + 4 + 8 * kMaxGgufDims + 12) +
               kAlignment);
  for (char c : {'G', 'G', 'U', 'F'}) head.push_back(static_cast<uint8_t>(c));
  Put<uint32_t>(head, 3);
  Put<int64_t>(head, static_cast<int64_t>(tensors_.size()));
  Put<int64_t>(head, static_cast<int64_t>(keys_.size()));
  head.insert(head.end(), metadata_.begin(), metadata_.end());
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    const std::string where = absl::StrCat("tensor \"", t.name, "\": ");
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(where, "the name is given twice"));
    }
    if (t.name.size() > kMaxGgufNameBytes) {
      return absl::InvalidArgumentError(absl::StrCat(where, "the name is ", t.name.size(),
                                                      " bytes, more than ggml's ",
                                                      kMaxGgufNameBytes));
    }
    if (t.ne.size() > kMaxGgufDims) {
      return absl::InvalidArgumentError(absl::StrCat(where, t.ne.size(), " dimensions, more than ",
                                                     kMaxGgufDims));
    }
    uint64_t elements = 1;
    for (int64_t d : t.ne) {
      if (d < 0) return absl::InvalidArgumentError(absl::StrCat(where, "a negative dimension"));
      if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements)) {
        return absl::InvalidArgumentError(absl::StrCat(where, "the element count overflows"));
      }
    }
    if (elements != t.values.size()) {
      return absl::InvalidArgumentError(absl::StrCat(where, t.values.size(),
                                                     " values for dimensions holding ", elements));
    }
    PutString(head, t.name);
    const size_t n_dims = NDims(t.ne);
    Put<uint32_t>(head, static_cast<uint32_t>(n_dims));
    for (size_t d = 0; d < n_dims; ++d) Put<int64_t>(head, d < t.ne.size() ? t.ne[d] : 1);
    Put<int32_t>(head, static_cast<int32_t>(kGgmlF32));
    Put<uint64_t>(head, offset);
    const uint64_t bytes = elements * sizeof(float);
    offset += (bytes + kAlignment - 1) / kAlignment * kAlignment;
  }
  Pad(head, head.size());
  if (absl::Status s = out.Write(head); !s.ok()) return s;
  std::vector<uint8_t> padding;
  for (const Tensor& t : tensors_) {
    const std::span<const uint8_t> bytes(reinterpret_cast<const uint8_t*>(t.values.data()),
                                         t.values.size_bytes());
    if (absl::Status s = out.Write(bytes); !s.ok()) return s;
    padding.clear();
    Pad(padding, bytes.size());
    if (absl::Status s = out.Write(padding); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace lowp
