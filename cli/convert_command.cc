// lowp convert: a raw file of codes in one format to another.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "api/convert.h"
#include "cli/commands.h"
#include "cli/shared.h"
#include "formats/reference.h"

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
  api::ConvertFileOptions options;
  for (auto [name, field] : {std::pair{"from", &options.from}, {"to", &options.to}}) {
    std::optional<std::string> value = args->Value(name);
    if (!value) return Fail(absl::InvalidArgumentError(absl::StrCat("--", name, " is required")));
    *field = *value;
  }
  absl::StatusOr<ConvertOptions> conversion = ReadOptions(*args);
  if (!conversion.ok()) return Fail(conversion.status());
  options.conversion = *conversion;
  options.input = args->positional()[0];
  options.output = args->positional()[1];
  if (absl::StatusOr<api::ConvertFileResult> r = api::ConvertFile(options); !r.ok()) {
    return Fail(r.status());
  }
  return 0;
}

}  // namespace lowp::cli
