// lowp formats [--json]: the catalog.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "api/catalog.h"
#include "cli/commands.h"
#include "cli/shared.h"
#include "cli/table.h"
#include "formats/format.h"

namespace lowp::cli {

const char kFormatsHelp[] =
    "usage: lowp formats [--json]\n"
    "\n"
    "Lists every built-in format with its layout and derived limits: bits,\n"
    "sign, exponent and mantissa bits, bias, where infinities and NaNs live\n"
    "(ieee; fn: no inf, all-ones is NaN; fnuz: no inf, no -0, 0x80 is NaN;\n"
    "none), the largest finite value, smallest normal and subnormal, epsilon.\n"
    "--json prints every field of every descriptor.\n"
    "\n"
    "User-defined formats are accepted wherever a format is named:\n"
    "  e3m4, e3m4fn, e3m4fnuz, float(e=5,m=10,bias=15,inf=ieee|fn|fnuz|none),\n"
    "  int3 .. int16, uint2 .. uint16\n";

namespace {

std::string Number(double v) { return absl::StrFormat("%.9g", v); }

}  // namespace

int FormatsCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {}, {"json"});
  if (!args.ok()) return Fail(args.status());
  if (!args->positional().empty()) {
    return Fail(absl::InvalidArgumentError(
        "formats takes no positional arguments; see lowp formats --help"));
  }
  if (args->Has("json")) {
    EmitJson(api::ToJson(api::Formats()));
    return 0;
  }
  std::vector<Row> rows = {{"name", "bits", "sign", "exp", "man", "bias", "specials", "max",
                            "min normal", "min subnormal", "epsilon", "aliases"}};
  for (const Format& f : api::Formats().formats) {
    const bool fl = f.is_float();
    rows.push_back({f.name, std::to_string(f.bits), f.is_signed ? "yes" : "no",
                    fl ? std::to_string(f.exponent_bits) : "-",
                    fl ? std::to_string(f.mantissa_bits) : "-", fl ? std::to_string(f.bias) : "-",
                    f.encoding_name(), Number(f.max_finite()), fl ? Number(f.min_normal()) : "-",
                    f.has_subnormals() ? Number(f.min_subnormal()) : "-", Number(f.epsilon()),
                    absl::StrJoin(f.aliases, ",")});
  }
  // Names and words left-aligned, numbers right-aligned.
  PrintTable(rows, {0, 6, rows[0].size() - 1});
  return 0;
}

}  // namespace lowp::cli
