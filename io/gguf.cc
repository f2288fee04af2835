#include "io/gguf.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "io/byte_reader.h"
#include "absl/strings/str_format.h"

namespace lowp {
namespace {

constexpr uint32_t kTypeCount = 13;

// Bytes of one scalar of `type`; 0 for strings and arrays.
size_t ScalarBytes(GgufType type) {
  switch (type) {
    case GgufType::kU8:
    case GgufType::kI8:
    case GgufType::kBool:
      return 1;
    case GgufType::kU16:
    case GgufType::kI16:
      return 2;
    case GgufType::kU32:
    case GgufType::kI32:
    case GgufType::kF32:
      return 4;
    case GgufType::kU64:
    case GgufType::kI64:
    case GgufType::kF64:
      return 8;
    case GgufType::kString:
    case GgufType::kArray:
      return 0;
  }
  return 0;
}

// The fewest bytes an element of `type` can take: what bounds a count.
size_t MinBytes(GgufType type) {
  if (type == GgufType::kString) return 8;  // the length
  if (type == GgufType::kArray) return 12;  // element type and count
  return ScalarBytes(type);
}

// Reads the header front to back (io/byte_reader.h), with GGUF's strings,
// types, counts and values.
class Reader : public ByteReader {
 public:
  using ByteReader::ByteReader;

  absl::StatusOr<std::string> String(absl::string_view what) {
    absl::StatusOr<uint64_t> n = Read<uint64_t>(absl::StrCat("the length of ", what));
    if (!n.ok()) return n.status();
    absl::StatusOr<std::span<const uint8_t>> bytes = Bytes(*n, what);
    if (!bytes.ok()) return bytes.status();
    return std::string(reinterpret_cast<const char*>(bytes->data()), bytes->size());
  }

  absl::StatusOr<GgufType> Type(absl::string_view what) {
    absl::StatusOr<uint32_t> t = Read<uint32_t>(what);
    if (!t.ok()) return t.status();
    if (*t >= kTypeCount) return Error(absl::StrCat("unknown ", what, " ", *t));
    return static_cast<GgufType>(*t);
  }

  // A count of elements at least `min_bytes` each: refused when the rest of
  // the file could not hold that many.
  absl::StatusOr<uint64_t> Count(absl::string_view what, size_t min_bytes) {
    absl::StatusOr<uint64_t> n = Read<uint64_t>(what);
    if (!n.ok()) return n.status();
    if (min_bytes > 0 && *n > left() / min_bytes) {
      return Error(absl::StrCat(what, " ", *n, " cannot fit in the ", left(),
                                " bytes left in the file"));
    }
    return *n;
  }

  // A value of `type`; arrays nest at most kMaxGgufArrayDepth deep.
  absl::StatusOr<GgufValue> Value(GgufType type, int depth) {
    GgufValue v;
    v.type = type;
    const size_t size = ScalarBytes(type);
    if (type == GgufType::kString) {
      absl::StatusOr<std::string> s = String("the string value");
      if (!s.ok()) return s.status();
      v.s = std::move(*s);
      return v;
    }
    if (type == GgufType::kArray) {
      if (depth >= kMaxGgufArrayDepth) {
        return Error(absl::StrCat("arrays nested more than ", kMaxGgufArrayDepth, " deep"));
      }
      absl::StatusOr<GgufType> element = Type("array element type");
      if (!element.ok()) return element.status();
      v.element_type = *element;
      absl::StatusOr<uint64_t> count = Count("array length", MinBytes(*element));
      if (!count.ok()) return count.status();
      v.count = *count;
      const size_t begin = pos_;
      if (const size_t each = ScalarBytes(*element); each > 0) {
        pos_ += *count * each;  // fits: Count checked it against left()
        if (*element == GgufType::kBool) {
          for (size_t i = begin; i < pos_; ++i) {
            if (data_[i] > 1) {
              return Error(absl::StrCat("bool array element ", i - begin, " is ", data_[i],
                                        ", not 0 or 1"));
            }
          }
        }
      } else {
        for (uint64_t i = 0; i < *count; ++i) {
          absl::StatusOr<GgufValue> e = Value(*element, depth + 1);
          if (!e.ok()) return e.status();
        }
      }
      v.elements = data_.subspan(begin, pos_ - begin);
      return v;
    }
    absl::StatusOr<std::span<const uint8_t>> b = Bytes(size, "the value");
    if (!b.ok()) return b.status();
    const uint8_t* p = b->data();
    switch (type) {
      case GgufType::kU8:
        v.u = *p;
        break;
      case GgufType::kBool:
        if (*p > 1) return Error(absl::StrCat("bool value ", *p, ", not 0 or 1"));
        v.u = *p;
        break;
      case GgufType::kI8:
        v.i = static_cast<int8_t>(*p);
        break;
      case GgufType::kU16:
        v.u = LoadLE<uint16_t>(p);
        break;
      case GgufType::kI16:
        v.i = LoadLE<int16_t>(p);
        break;
      case GgufType::kU32:
        v.u = LoadLE<uint32_t>(p);
        break;
      case GgufType::kI32:
        v.i = LoadLE<int32_t>(p);
        break;
      case GgufType::kF32:
        v.f = LoadLE<float>(p);
        break;
      case GgufType::kU64:
        v.u = LoadLE<uint64_t>(p);
        break;
      case GgufType::kI64:
        v.i = LoadLE<int64_t>(p);
        break;
      case GgufType::kF64:
        v.f = LoadLE<double>(p);
        break;
      default:
        break;
    }
    return v;
  }
};

// The GGUF-defined names of ggml's removed type ids, for the message.
absl::string_view RemovedTypeName(uint32_t id) {
  switch (id) {
    case 4:
      return "Q4_2";
    case 5:
      return "Q4_3";
    case 31:
      return "Q4_0_4_4";
    case 32:
      return "Q4_0_4_8";
    case 33:
      return "Q4_0_8_8";
    case 36:
      return "IQ4_NL_4_4";
    case 37:
      return "IQ4_NL_4_8";
    case 38:
      return "IQ4_NL_8_8";
    default:
      return "";
  }
}

std::string Quote(absl::string_view s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      absl::StrAppendFormat(&out, "\\x%02x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

}  // namespace

absl::string_view GgufTypeName(GgufType type) {
  static constexpr absl::string_view kNames[] = {"u8",  "i8",   "u16",    "i16",   "u32",
                                                 "i32", "f32",  "bool",   "string", "array",
                                                 "u64", "i64",  "f64"};
  const auto i = static_cast<uint32_t>(type);
  return i < kTypeCount ? kNames[i] : "unknown";
}

std::vector<GgufValue> GgufValue::Elements() const {
  std::vector<GgufValue> out;
  if (type != GgufType::kArray) return out;
  Reader reader(elements, "");
  for (uint64_t i = 0; i < count; ++i) {
    absl::StatusOr<GgufValue> v = reader.Value(element_type, 1);
    if (!v.ok()) break;  // cannot happen: ParseGguf read these same bytes
    out.push_back(std::move(*v));
  }
  return out;
}

const GgufValue* ParsedGguf::Find(absl::string_view key) const {
  for (const GgufKeyValue& kv : metadata) {
    if (kv.key == key) return &kv.value;
  }
  return nullptr;
}

absl::StatusOr<ParsedGguf> ParseGguf(std::span<const uint8_t> file, absl::string_view file_name) {
  Reader r(file, file_name);
  ParsedGguf gguf;
  if (file.size() < 4 || std::memcmp(file.data(), "GGUF", 4) != 0) {
    return r.Error("not a GGUF file (it does not begin with \"GGUF\")");
  }
  (void)r.Bytes(4, "magic");
  absl::StatusOr<uint32_t> version = r.Read<uint32_t>("the version");
  if (!version.ok()) return version.status();
  if (*version != 2 && *version != 3) {
    if (*version == 1) {
      return r.Error("GGUF version 1 (32-bit counts) is not supported: lowp reads versions 2 and 3");
    }
    if (*version != 0 && (*version & 0xFFFF) == 0) {
      return r.Error(absl::StrCat("GGUF version reads as 0x", absl::Hex(*version),
                                  ": a big-endian file, which lowp does not read"));
    }
    return r.Error(absl::StrCat("unsupported GGUF version ", *version, " (lowp reads 2 and 3)"));
  }
  gguf.version = *version;
  absl::StatusOr<uint64_t> n_tensors = r.Read<uint64_t>("the tensor count");
  if (!n_tensors.ok()) return n_tensors.status();
  absl::StatusOr<uint64_t> n_kv = r.Read<uint64_t>("the metadata count");
  if (!n_kv.ok()) return n_kv.status();
  // The smallest metadata entry is 13 bytes (empty key, type, a u8); the
  // smallest tensor info 24 (empty name, no dimension, type, offset).
  if (*n_kv > r.left() / 13) {
    return r.Error(absl::StrCat("metadata count ", *n_kv, " cannot fit in the ", r.left(),
                                " bytes left in the file"));
  }
  if (*n_tensors > r.left() / 24) {
    return r.Error(absl::StrCat("tensor count ", *n_tensors, " cannot fit in the ", r.left(),
                                " bytes left in the file"));
  }

  std::set<std::string> keys;
  for (uint64_t k = 0; k < *n_kv; ++k) {
    r.set_where(absl::StrCat("metadata entry ", k, ": "));
    absl::StatusOr<std::string> key = r.String("the key");
    if (!key.ok()) return key.status();
    r.set_where(absl::StrCat("metadata ", Quote(*key), ": "));
    if (!keys.insert(*key).second) return r.Error("the key appears twice");
    absl::StatusOr<GgufType> type = r.Type("value type");
    if (!type.ok()) return type.status();
    absl::StatusOr<GgufValue> value = r.Value(*type, 0);
    if (!value.ok()) return value.status();
    gguf.metadata.push_back({std::move(*key), std::move(*value)});
  }

  r.set_where("metadata \"general.alignment\": ");
  if (const GgufValue* a = gguf.Find("general.alignment"); a != nullptr) {
    if (a->type != GgufType::kU32) {
      return r.Error(absl::StrCat("is ", GgufTypeName(a->type), ", not u32"));
    }
    if (a->u == 0 || !std::has_single_bit(a->u)) {
      return r.Error(absl::StrCat("alignment ", a->u, " is not a power of two"));
    }
    gguf.alignment = a->u;
  }

  std::set<std::string> names;
  for (uint64_t t = 0; t < *n_tensors; ++t) {
    r.set_where(absl::StrCat("tensor info ", t, ": "));
    absl::StatusOr<std::string> name = r.String("the tensor name");
    if (!name.ok()) return name.status();
    r.set_where(absl::StrCat("tensor ", Quote(*name), ": "));
    if (name->size() > kMaxGgufNameBytes) {
      return r.Error(absl::StrCat("the name is ", name->size(), " bytes, more than ggml's ",
                                  kMaxGgufNameBytes));
    }
    if (!names.insert(*name).second) return r.Error("the name appears twice");
    GgufTensorInfo info;
    info.name = std::move(*name);
    absl::StatusOr<uint32_t> n_dims = r.Read<uint32_t>("the dimension count");
    if (!n_dims.ok()) return n_dims.status();
    if (*n_dims > kMaxGgufDims) {
      return r.Error(absl::StrCat(*n_dims, " dimensions, more than ggml's ", kMaxGgufDims));
    }
    int64_t elements = 1;
    bool zero = false;
    for (uint32_t d = 0; d < *n_dims; ++d) {
      absl::StatusOr<int64_t> ne = r.Read<int64_t>("the dimensions");
      if (!ne.ok()) return ne.status();
      if (*ne < 0) return r.Error(absl::StrCat("dimension ", d, " is negative (", *ne, ")"));
      info.ne.push_back(*ne);
      zero = zero || *ne == 0;
    }
    for (int64_t ne : info.ne) {
      if (ne != 0 && !zero && __builtin_mul_overflow(elements, ne, &elements)) {
        return r.Error("the element count of the dimensions overflows int64");
      }
    }
    info.elements = zero ? 0 : elements;
    absl::StatusOr<uint32_t> type = r.Read<uint32_t>("the type");
    if (!type.ok()) return type.status();
    info.type = ggml::FindType(*type);
    if (info.type == nullptr) {
      const absl::string_view removed = RemovedTypeName(*type);
      return r.Error(removed.empty()
                         ? absl::StrCat("unknown ggml type id ", *type)
                         : absl::StrCat("ggml type id ", *type, " (", removed,
                                        ") was removed from ggml; convert the file again"));
    }
    const int64_t row = info.ne.empty() ? 1 : info.ne[0];
    if (row % info.type->block != 0) {
      return r.Error(absl::StrCat("rows of ", row, " elements are not whole blocks of ",
                                  info.type->name, " (", info.type->block, " elements)"));
    }
    if (__builtin_mul_overflow(static_cast<uint64_t>(info.elements / info.type->block),
                               static_cast<uint64_t>(info.type->bytes), &info.bytes)) {
      return r.Error("its size in bytes overflows");
    }
    absl::StatusOr<uint64_t> offset = r.Read<uint64_t>("the data offset");
    if (!offset.ok()) return offset.status();
    if (*offset % gguf.alignment != 0) {
      return r.Error(absl::StrCat("data offset ", *offset, " is not a multiple of the alignment ",
                                  gguf.alignment));
    }
    info.offset = *offset;
    gguf.tensors.push_back(std::move(info));
  }

  r.set_where("");
  const uint64_t header_end = r.pos();
  gguf.data_offset = (header_end + gguf.alignment - 1) / gguf.alignment * gguf.alignment;
  if (gguf.tensors.empty()) return gguf;
  if (gguf.data_offset > file.size()) {
    return r.Error(absl::StrCat("the data section would start at byte ", gguf.data_offset,
                                ", past the end of the file (", file.size(), " bytes)"));
  }
  const uint64_t data_size = file.size() - gguf.data_offset;
  std::vector<const GgufTensorInfo*> by_offset;  // the tensors holding bytes
  for (const GgufTensorInfo& t : gguf.tensors) {
    if (t.offset > data_size || t.bytes > data_size - t.offset) {
      return r.Error(absl::StrCat("tensor ", Quote(t.name), ": its ", t.bytes, " bytes at data offset ",
                                  t.offset, " run past the end of the file (the data section holds ",
                                  data_size, " bytes)"));
    }
    if (t.bytes > 0) by_offset.push_back(&t);
  }
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  // Each tensor must begin at or after the furthest end of those before it.
  const GgufTensorInfo* furthest = nullptr;
  for (const GgufTensorInfo* t : by_offset) {
    if (furthest != nullptr && furthest->offset + furthest->bytes > t->offset) {
      return r.Error(absl::StrCat("tensors ", Quote(furthest->name), " and ", Quote(t->name),
                                  " overlap in the data section"));
    }
    if (furthest == nullptr || t->offset + t->bytes > furthest->offset + furthest->bytes) furthest = t;
  }
  return gguf;
}

std::vector<TensorView> GgufViews(const ParsedGguf& gguf, std::span<const uint8_t> file,
                                  const std::string& path) {
  std::vector<TensorView> views;
  for (const GgufTensorInfo& t : gguf.tensors) {
    TensorView v;
    v.name = t.name;
    v.file = path;
    v.shape.assign(t.ne.rbegin(), t.ne.rend());
    v.bytes = file.subspan(gguf.data_offset + t.offset, t.bytes);
    switch (t.type->type) {
      case ggml::Type::kF32: v.dtype = DType::kF32; break;
      case ggml::Type::kF16: v.dtype = DType::kF16; break;
      case ggml::Type::kBF16: v.dtype = DType::kBF16; break;
      case ggml::Type::kF64: v.dtype = DType::kF64; break;
      case ggml::Type::kI8: v.dtype = DType::kI8; break;
      case ggml::Type::kI16: v.dtype = DType::kI16; break;
      case ggml::Type::kI32: v.dtype = DType::kI32; break;
      case ggml::Type::kI64: v.dtype = DType::kI64; break;
      default:
        v.dtype = DType::kGgml;
        v.ggml = t.type;
    }
    views.push_back(std::move(v));
  }
  return views;
}

std::string FormatGgufValue(const GgufValue& v, size_t max_elements) {
  switch (v.type) {
    case GgufType::kU8:
    case GgufType::kU16:
    case GgufType::kU32:
    case GgufType::kU64:
      return absl::StrCat(v.u);
    case GgufType::kBool:
      return v.u ? "true" : "false";
    case GgufType::kI8:
    case GgufType::kI16:
    case GgufType::kI32:
    case GgufType::kI64:
      return absl::StrCat(v.i);
    case GgufType::kF32:
      return absl::StrFormat("%.9g", v.f);
    case GgufType::kF64:
      return absl::StrFormat("%.17g", v.f);
    case GgufType::kString:
      return Quote(v.s);
    case GgufType::kArray: {
      std::string out = "[";
      Reader reader(v.elements, "");
      const uint64_t shown = std::min<uint64_t>(v.count, max_elements);
      for (uint64_t i = 0; i < shown; ++i) {
        absl::StatusOr<GgufValue> e = reader.Value(v.element_type, 1);
        if (!e.ok()) break;
        absl::StrAppend(&out, i ? ", " : "", FormatGgufValue(*e, max_elements));
      }
      if (v.count > shown) absl::StrAppend(&out, ", ... ", v.count - shown, " more");
      return out + "]";
    }
  }
  return "";
}

}  // namespace lowp
