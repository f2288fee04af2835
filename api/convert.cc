#include "api/convert.h"

#include <unistd.h>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "formats/option_error.h"
#include "formats/packing.h"
#include "io/input_files.h"
#include "io/mapped_file.h"
#include "io/output_file.h"
#include "kernels/convert.h"

namespace lowp::api {
namespace {

// How codes of `from` reach the kernels: float32 and fp16/bf16 directly;
// other formats decoded to float32 (exact) first, except under daz when
// their subnormals are not float32's (the reference then, element by element,
// since daz reads a subnormal of the source format as zero).
enum class Route { kFloat32, kHalf, kDecode, kReference };

Route RouteOf(const Format& from, const ConvertOptions& o) {
  const bool ieee8 = from.is_float() && from.specials == SpecialEncoding::kIeee &&
                     from.exponent_bits == 8 && from.bias == 127;
  if (ieee8 && from.mantissa_bits == 23) return Route::kFloat32;
  if (from.is_float() && from.specials == SpecialEncoding::kIeee &&
      ((from.exponent_bits == 5 && from.mantissa_bits == 10 && from.bias == 15) ||
       (ieee8 && from.mantissa_bits == 7))) {
    return Route::kHalf;
  }
  const bool daz =
      o.subnormals == Subnormals::kInputsAreZero || o.subnormals == Subnormals::kFlushBoth;
  if (daz && !ieee8 && from.has_subnormals()) return Route::kReference;
  if (daz && !from.has_zero) return Route::kReference;  // e8m0's 2^-127
  return Route::kDecode;
}

absl::Status Convert(const Format& from, const Format& to, const ConvertOptions& options,
                     const std::string& in_path, const std::string& out_path,
                     ConvertFileResult* result) {
  absl::StatusOr<RegularFile> in = OpenRegularFile(in_path, "input");
  if (!in.ok()) return in.status();
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{in->fd};
  absl::StatusOr<size_t> count = CodeCount(from, in->size);
  if (!count.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("input ", in_path, ": ", count.status().message()));
  }
  result->elements = *count;
  result->input_bytes = in->size;
  absl::StatusOr<std::unique_ptr<OutputFile>> out = OutputFile::Create(out_path);
  if (!out.ok()) return out.status();
  // Chunks of kChunk elements: a whole number of storage units of every
  // format (and an even number of codes, so 4-bit codes never split a byte
  // between chunks); every buffer is sized for kChunk elements of its kind.
  constexpr size_t kChunk = size_t{1} << 21;
  const Route route = RouteOf(from, options);
  std::vector<float> floats(kChunk);
  std::vector<uint16_t> halves(route == Route::kHalf ? kChunk : 0);
  std::vector<uint8_t> raw(route == Route::kDecode || route == Route::kReference
                               ? StorageBytes(from, kChunk)
                               : 0);
  std::vector<uint8_t> out_bytes;
  std::vector<uint32_t> codes;
  size_t index = 0;
  while (index < *count) {
    const size_t n = std::min(kChunk, *count - index);
    char* target = route == Route::kFloat32 ? reinterpret_cast<char*>(floats.data())
                   : route == Route::kHalf  ? reinterpret_cast<char*>(halves.data())
                                            : reinterpret_cast<char*>(raw.data());
    const size_t want_bytes = StorageBytes(from, n);
    absl::StatusOr<size_t> got = ReadUpTo(in->fd, target, want_bytes, "input " + in_path);
    if (!got.ok()) return got.status();
    if (*got != want_bytes) {
      return absl::DataLossError(absl::StrCat("input ", in_path, ": shrank from ", in->size,
                                              " bytes while being read"));
    }
    out_bytes.resize(StorageBytes(to, n));
    const RunOptions run{.first_index = index};
    absl::Status s;
    switch (route) {
      case Route::kFloat32:
        s = EncodeArray(to, std::span(floats).first(n), out_bytes, options, run);
        break;
      case Route::kHalf:
        s = EncodeArray16(from, std::span(halves).first(n), to, out_bytes, options, run);
        break;
      case Route::kDecode:
      case Route::kReference: {
        codes.clear();
        s = UnpackCodes(from, {raw.data(), want_bytes}, index, &codes);  // names a bad code's index
        if (!s.ok()) {
          return absl::InvalidArgumentError(absl::StrCat("input ", in_path, ": ", s.message()));
        }
        if (route == Route::kReference) {
          for (size_t i = 0; i < n; ++i)
            codes[i] = ConvertCode(from, codes[i], to, options, index + i);
          codes.resize(n);
          out_bytes.clear();
          PackCodes(to, codes, &out_bytes);
          break;
        }
        s = DecodeArray(from, {raw.data(), want_bytes}, std::span(floats).first(n));
        if (s.ok()) s = EncodeArray(to, std::span(floats).first(n), out_bytes, options, run);
        break;
      }
    }
    if (!s.ok()) return s;
    if (s = (*out)->Write(out_bytes); !s.ok()) return s;
    result->output_bytes += out_bytes.size();
    index += n;
  }
  return (*out)->Commit();
}


absl::StatusOr<Format> FindNamed(absl::string_view field, const std::string& name) {
  absl::StatusOr<Format> f = FindFormat(name);
  if (!f.ok()) return OptionError(field, f.status().message());
  return f;
}

absl::Status CheckOut(const Format& to, size_t count, bool packed, std::span<uint8_t> out) {
  const size_t want = packed ? StorageBytes(to, count) : count * CodeBytes(to);
  if (packed && to.storage_bits() != 4) {
    return absl::InvalidArgumentError(
        absl::StrCat("packed=True is for 4-bit formats, not ", to.name));
  }
  if (out.size() != want) {
    return absl::InvalidArgumentError(absl::StrCat(count, " values take ", want, " bytes of ",
                                                   to.name, " codes, not ", out.size()));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<ConvertFileResult> ConvertFile(const ConvertFileOptions& o) {
  const InputScope scope;  // the output never replaces the input
  ConvertFileResult result;
  absl::StatusOr<Format> from = FindNamed("from", o.from);
  if (!from.ok()) return from.status();
  absl::StatusOr<Format> to = FindNamed("to", o.to);
  if (!to.ok()) return to.status();
  if (absl::Status s = ValidateOptions(*to, o.conversion); !s.ok()) return s;
  result.from = *from;
  result.to = *to;
  if (absl::Status s = Convert(*from, *to, o.conversion, o.input, o.output, &result); !s.ok()) {
    return s;
  }
  return result;
}

nlohmann::json ToJson(const ConvertFileResult& r) {
  nlohmann::json j;
  j["from"] = r.from.name;
  j["to"] = r.to.name;
  j["elements"] = r.elements;
  j["input_bytes"] = r.input_bytes;
  j["output_bytes"] = r.output_bytes;
  return j;
}

absl::Status EncodeValues(const Format& to, std::span<const float> values,
                          const ConvertOptions& options, bool packed, std::span<uint8_t> out,
                          int threads) {
  if (absl::Status s = CheckOut(to, values.size(), packed, out); !s.ok()) return s;
  const size_t storage = StorageBytes(to, values.size());
  RunOptions run;
  run.threads = threads;
  if (absl::Status s = EncodeArray(to, values, out.first(storage), options, run); !s.ok()) {
    return s;
  }
  if (!packed) LoadCodes(to, out.first(storage), values.size(), out.data());  // in place
  return absl::OkStatus();
}

absl::Status EncodeHalfValues(std::span<const uint16_t> fp16, const Format& to,
                              const ConvertOptions& options, bool packed, std::span<uint8_t> out,
                              int threads) {
  if (absl::Status s = CheckOut(to, fp16.size(), packed, out); !s.ok()) return s;
  const size_t storage = StorageBytes(to, fp16.size());
  RunOptions run;
  run.threads = threads;
  if (absl::Status s =
          EncodeArray16(*FindFormat("fp16"), fp16, to, out.first(storage), options, run);
      !s.ok()) {
    return s;
  }
  if (!packed) LoadCodes(to, out.first(storage), fp16.size(), out.data());  // in place
  return absl::OkStatus();
}

absl::Status RoundValues(const Format& to, std::span<const float> values,
                         const ConvertOptions& options, std::span<float> out, int threads) {
  RunOptions run;
  run.threads = threads;
  return RoundArray(to, values, out, options, run);
}

absl::Status DecodeCodes(const Format& from, const void* codes, size_t itemsize, size_t count,
                         bool packed, std::span<float> out, int threads) {
  RunOptions run;
  run.threads = threads;
  if (out.size() != count) {
    return absl::InvalidArgumentError(absl::StrCat(count, " codes decode to ", count,
                                                   " values, not ", out.size()));
  }
  const size_t storage_bytes = StorageBytes(from, count);
  if (packed) {
    if (from.storage_bits() != 4 || itemsize != 1) {
      return absl::InvalidArgumentError(
          "packed=True is for 4-bit formats, codes as uint8 storage bytes");
    }
    return DecodeArray(from, {static_cast<const uint8_t*>(codes), storage_bytes}, out, run);
  }
  // One code per element in a width other than the storage's: checked and
  // moved into the storage layout.
  if (from.storage_bits() == 4 || itemsize * 8 != static_cast<size_t>(from.storage_bits())) {
    std::vector<uint8_t> storage(storage_bytes);
    if (absl::Status s = StoreCodes(from, codes, itemsize, count, storage); !s.ok()) return s;
    return DecodeArray(from, storage, out, run);
  }
  return DecodeArray(from, {static_cast<const uint8_t*>(codes), storage_bytes}, out, run);
}

}  // namespace lowp::api
