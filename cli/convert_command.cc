// lowp convert: a raw file of codes in one format to another.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "cli/shared.h"
#include "formats/format.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "kernels/convert.h"
#include "io/mapped_file.h"
#include "io/output_file.h"

namespace lowp::cli {

const char kConvertHelp[] =
    "usage: lowp convert --from F --to G [options] IN OUT\n"
    "\n"
    "Converts a raw little-endian file of F codes into G codes, element by\n"
    "element through the exact value, with the SIMD kernels (bit for bit the\n"
    "scalar reference's results, on any CPU and thread count). Codes are\n"
    "stored one per byte up to 8 bits (fp6 in the low six bits), two bytes up\n"
    "to 16, four up to 32; 4-bit formats pack two per byte, low nibble first\n"
    "(an odd count ends with a zero high nibble). OUT is written whole or not\n"
    "at all.\n"
    "\n"
    "options:\n"
    "  --from F, --to G   format names (see lowp formats)\n"
    "  --rounding R       nearest-even (default), nearest-away, toward-zero,\n"
    "                     toward-positive, toward-negative, odd, stochastic\n"
    "  --overflow P       default (the format's: inf for IEEE formats, NaN\n"
    "                     for fn/fnuz, saturation for fp6/fp4/int), saturate,\n"
    "                     inf, nan\n"
    "  --subnormals S     keep (default), ftz (flush results), daz (inputs are\n"
    "                     zero), ftz-daz (both, as AVX512-BF16 does)\n"
    "  --nan N            canonical (default, as ml_dtypes) or keep-payload\n"
    "                     (quiet bit set, as x86 conversion instructions)\n"
    "  --seed N           stochastic rounding seed (default 0); element i\n"
    "                     uses RandomBits(seed, i), so results are repeatable\n"
    "\n"
    "example: lowp convert --from fp32 --to fp8_e4m3fn --overflow saturate \\\n"
    "           weights.f32 weights.e4m3\n";

namespace {

// Sets *out from --name when given, through the library's parser.
template <class T>
absl::Status ReadOption(const Args& args, const char* name,
                        absl::StatusOr<T> (*parse)(absl::string_view), T* out) {
  if (std::optional<std::string> v = args.Value(name)) {
    absl::StatusOr<T> parsed = parse(*v);
    if (!parsed.ok()) return parsed.status();
    *out = *parsed;
  }
  return absl::OkStatus();
}

absl::StatusOr<ConvertOptions> ReadOptions(const Args& args) {
  ConvertOptions o;
  for (absl::Status s : {ReadOption(args, "rounding", ParseRounding, &o.rounding),
                         ReadOption(args, "overflow", ParseOverflow, &o.overflow),
                         ReadOption(args, "subnormals", ParseSubnormals, &o.subnormals),
                         ReadOption(args, "nan", ParseNanPolicy, &o.nan)}) {
    if (!s.ok()) return s;
  }
  if (auto v = args.Value("seed")) {
    if (!absl::SimpleAtoi(*v, &o.seed)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--seed: '", *v, "' is not an unsigned 64-bit integer"));
    }
  }
  return o;
}

absl::StatusOr<Format> ReadFormat(const Args& args, const char* option) {
  std::optional<std::string> name = args.Value(option);
  if (!name) {
    return absl::InvalidArgumentError(absl::StrCat("--", option, " is required"));
  }
  absl::StatusOr<Format> f = FindFormat(*name);
  if (!f.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--", option, ": ", f.status().message()));
  }
  return f;
}

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
                     const std::string& in_path, const std::string& out_path) {
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
    index += n;
  }
  return (*out)->Commit();
}

}  // namespace

int ConvertCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args =
      Args::Parse(argv, {"from", "to", "rounding", "overflow", "subnormals", "nan", "seed"}, {});
  if (!args.ok()) return Fail(args.status());
  if (args->positional().size() != 2) {
    return Fail(absl::InvalidArgumentError(
        absl::StrCat("convert needs IN and OUT files, got ", args->positional().size(),
                     " positional arguments; see lowp convert --help")));
  }
  absl::StatusOr<Format> from = ReadFormat(*args, "from");
  if (!from.ok()) return Fail(from.status());
  absl::StatusOr<Format> to = ReadFormat(*args, "to");
  if (!to.ok()) return Fail(to.status());
  absl::StatusOr<ConvertOptions> options = ReadOptions(*args);
  if (!options.ok()) return Fail(options.status());
  if (absl::Status s = ValidateOptions(*to, *options); !s.ok()) return Fail(s);
  const std::string& in = args->positional()[0];
  const std::string& out = args->positional()[1];
  if (absl::Status s = Convert(*from, *to, *options, in, out); !s.ok()) {
    return Fail(s);
  }
  return 0;
}

}  // namespace lowp::cli
