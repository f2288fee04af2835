#include "io/gguf_writer.h"

#include <bit>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "io/gguf.h"

namespace lowp {
namespace {

static_assert(std::endian::native == std::endian::little,
              "GGUF is little-endian; the writer copies numbers as they are in memory");

constexpr uint64_t kAlignment = 32;  // GGUF_DEFAULT_ALIGNMENT

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

uint64_t Padding(uint64_t written) { return (kAlignment - written % kAlignment) % kAlignment; }

void Pad(std::vector<uint8_t>& out, uint64_t written) { out.insert(out.end(), Padding(written), 0); }

// ggml_n_dims: the dimensions up to the last that is not 1, at least one.
size_t NDims(const std::vector<int64_t>& ne) {
  size_t n = ne.size();
  while (n > 1 && ne[n - 1] == 1) --n;
  return n == 0 ? 1 : n;
}

template <typename T>
void PutArray(std::vector<uint8_t>& out, GgufType element, std::span<const T> values) {
  Put<int32_t>(out, static_cast<int32_t>(element));
  Put<uint64_t>(out, values.size());
  const size_t at = out.size();
  out.resize(at + values.size_bytes());
  if (!values.empty()) std::memcpy(out.data() + at, values.data(), values.size_bytes());
}

}  // namespace

void GgufWriter::Key(absl::string_view key, uint32_t type) {
  keys_.emplace_back(key);
  PutString(metadata_, key);
  Put<int32_t>(metadata_, static_cast<int32_t>(type));
}

void GgufWriter::AddString(absl::string_view key, absl::string_view value) {
  Key(key, static_cast<uint32_t>(GgufType::kString));
  PutString(metadata_, value);
}

void GgufWriter::AddU32(absl::string_view key, uint32_t value) {
  Key(key, static_cast<uint32_t>(GgufType::kU32));
  Put<uint32_t>(metadata_, value);
}

void GgufWriter::AddI32(absl::string_view key, int32_t value) {
  Key(key, static_cast<uint32_t>(GgufType::kI32));
  Put<int32_t>(metadata_, value);
}

void GgufWriter::AddF32(absl::string_view key, float value) {
  Key(key, static_cast<uint32_t>(GgufType::kF32));
  Put<float>(metadata_, value);
}

void GgufWriter::AddBool(absl::string_view key, bool value) {
  Key(key, static_cast<uint32_t>(GgufType::kBool));
  Put<uint8_t>(metadata_, value ? 1 : 0);
}

void GgufWriter::AddStringArray(absl::string_view key, const std::vector<std::string>& values) {
  Key(key, static_cast<uint32_t>(GgufType::kArray));
  Put<int32_t>(metadata_, static_cast<int32_t>(GgufType::kString));
  Put<uint64_t>(metadata_, values.size());
  for (const std::string& v : values) PutString(metadata_, v);
}

void GgufWriter::AddF32Array(absl::string_view key, std::span<const float> values) {
  Key(key, static_cast<uint32_t>(GgufType::kArray));
  PutArray(metadata_, GgufType::kF32, values);
}

void GgufWriter::AddI32Array(absl::string_view key, std::span<const int32_t> values) {
  Key(key, static_cast<uint32_t>(GgufType::kArray));
  PutArray(metadata_, GgufType::kI32, values);
}

void GgufWriter::AddTensor(absl::string_view name, const ggml::TypeInfo& type,
                           std::vector<int64_t> ne, std::span<const uint8_t> bytes) {
  tensors_.push_back({std::string(name), &type, std::move(ne), bytes});
}

void GgufWriter::AddF32Tensor(absl::string_view name, std::vector<int64_t> ne,
                              std::span<const float> values) {
  AddTensor(name, ggml::Info(ggml::Type::kF32), std::move(ne),
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(values.data()),
                                     values.size_bytes()));
}

uint64_t GgufWriter::TensorBytes(size_t index) const {
  const Tensor& t = tensors_[index];
  uint64_t elements = 1;
  for (int64_t d : t.ne) elements *= static_cast<uint64_t>(d);
  return elements / static_cast<uint64_t>(t.type->block) * static_cast<uint64_t>(t.type->bytes);
}

absl::Status GgufWriter::Check(const Tensor& t, uint64_t& bytes) const {
  const std::string where = absl::StrCat("tensor \"", t.name, "\": ");
  if (t.name.size() > kMaxGgufNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(where, "the name is ", t.name.size(),
                                                   " bytes, more than ggml's ", kMaxGgufNameBytes));
  }
  if (t.ne.empty() || t.ne.size() > kMaxGgufDims) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, t.ne.size(), " dimensions, not 1 to ", kMaxGgufDims));
  }
  uint64_t elements = 1;
  for (int64_t d : t.ne) {
    if (d < 0) return absl::InvalidArgumentError(absl::StrCat(where, "a negative dimension"));
    if (__builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements)) {
      return absl::InvalidArgumentError(absl::StrCat(where, "the element count overflows"));
    }
  }
  if (t.ne[0] % t.type->block != 0) {
    return absl::InvalidArgumentError(absl::StrCat(where, "rows of ", t.ne[0], " elements are not ",
                                                   "whole blocks of ", t.type->name, " (",
                                                   t.type->block, ")"));
  }
  bytes = elements / static_cast<uint64_t>(t.type->block) * static_cast<uint64_t>(t.type->bytes);
  if (!t.bytes.empty() && t.bytes.size() != bytes) {
    return absl::InvalidArgumentError(absl::StrCat(where, t.bytes.size(), " bytes for dimensions ",
                                                   "holding ", bytes));
  }
  return absl::OkStatus();
}

absl::Status GgufWriter::WriteHeader(OutputFile& out) {
  std::set<absl::string_view> keys;
  for (const std::string& key : keys_) {
    if (!keys.insert(key).second) {
      return absl::InvalidArgumentError(absl::StrCat("metadata key \"", key, "\" is given twice"));
    }
  }
  std::set<absl::string_view> names;
  std::vector<uint8_t> head;
  head.reserve(24 + metadata_.size() +
               tensors_.size() * (8 + kMaxGgufNameBytes + 4 + 8 * kMaxGgufDims + 12) + kAlignment);
  for (char c : {'G', 'G', 'U', 'F'}) head.push_back(static_cast<uint8_t>(c));
  Put<uint32_t>(head, 3);
  Put<int64_t>(head, static_cast<int64_t>(tensors_.size()));
  Put<int64_t>(head, static_cast<int64_t>(keys_.size()));
  head.insert(head.end(), metadata_.begin(), metadata_.end());
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    if (!names.insert(t.name).second) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", t.name, "\": the name is given twice"));
    }
    uint64_t bytes = 0;
    if (absl::Status s = Check(t, bytes); !s.ok()) return s;
    PutString(head, t.name);
    const size_t n_dims = NDims(t.ne);
    Put<uint32_t>(head, static_cast<uint32_t>(n_dims));
    for (size_t d = 0; d < n_dims; ++d) Put<int64_t>(head, t.ne[d]);
    Put<int32_t>(head, static_cast<int32_t>(t.type->type));
    Put<uint64_t>(head, offset);
    offset += bytes + Padding(bytes);
  }
  Pad(head, head.size());
  if (absl::Status s = out.Write(head); !s.ok()) return s;
  header_written_ = true;
  next_ = 0;
  written_ = 0;
  return absl::OkStatus();
}

absl::Status GgufWriter::WriteTensorBytes(OutputFile& out, std::span<const uint8_t> bytes) {
  if (!header_written_) return absl::FailedPreconditionError("GGUF: tensor bytes before the header");
  while (!bytes.empty()) {
    if (next_ == tensors_.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("GGUF: ", bytes.size(), " bytes beyond the last tensor"));
    }
    const uint64_t size = TensorBytes(next_);
    const size_t take = static_cast<size_t>(std::min<uint64_t>(bytes.size(), size - written_));
    if (absl::Status s = out.Write(bytes.first(take)); !s.ok()) return s;
    bytes = bytes.subspan(take);
    written_ += take;
    if (written_ == size) {
      const uint8_t zeros[kAlignment] = {};
      if (absl::Status s = out.Write(std::span<const uint8_t>(zeros, Padding(size))); !s.ok()) {
        return s;
      }
      ++next_;
      written_ = 0;
    }
  }
  return absl::OkStatus();
}

absl::Status GgufWriter::Finish() {
  // Tensors of no bytes (a dimension of 0) take none and need no call.
  while (next_ < tensors_.size() && written_ == 0 && TensorBytes(next_) == 0) ++next_;
  if (!header_written_ || next_ != tensors_.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GGUF: tensor \"", next_ < tensors_.size() ? tensors_[next_].name : "", "\" got ",
        written_, " of its ", next_ < tensors_.size() ? TensorBytes(next_) : 0, " bytes"));
  }
  return absl::OkStatus();
}

absl::Status GgufWriter::Write(OutputFile& out) {
  for (const Tensor& t : tensors_) {
    uint64_t bytes = 0;
    if (absl::Status s = Check(t, bytes); !s.ok()) return s;
    if (t.bytes.size() != bytes) {
      return absl::InvalidArgumentError(absl::StrCat("tensor \"", t.name, "\": ", t.bytes.size(),
                                                     " bytes for dimensions holding ", bytes));
    }
  }
  if (absl::Status s = WriteHeader(out); !s.ok()) return s;
  for (const Tensor& t : tensors_) {
    if (absl::Status s = WriteTensorBytes(out, t.bytes); !s.ok()) return s;
  }
  return Finish();
}

}  // namespace lowp
