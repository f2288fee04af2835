// lowp formats [--json]: the catalog.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "cli/capture.h"
#include "cli/commands.h"
#include "cli/table.h"
#include "formats/format.h"
#include "nlohmann/json.hpp"

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

nlohmann::json ToJson(const Format& f) {
  nlohmann::json j;
  j["name"] = f.name;
  j["aliases"] = f.aliases;
  j["kind"] = f.is_float() ? "float" : "integer";
  j["bits"] = f.bits;
  j["storage_bits"] = f.storage_bits();
  j["signed"] = f.is_signed;
  j["exponent_bits"] = f.exponent_bits;
  j["mantissa_bits"] = f.mantissa_bits;
  j["bias"] = f.bias;
  j["encoding"] = f.encoding_name();
  j["has_infinity"] = f.has_infinity();
  j["has_nan"] = f.has_nan();
  j["has_negative_zero"] = f.has_negative_zero();
  j["has_subnormals"] = f.has_subnormals();
  j["max_finite"] = f.max_finite();
  j["lowest_finite"] = f.lowest_finite();
  j["min_normal"] = f.min_normal();
  j["min_subnormal"] =
      f.has_subnormals() ? nlohmann::json(f.min_subnormal()) : nlohmann::json(nullptr);
  j["epsilon"] = f.epsilon();
  return j;
}

}  // namespace

int FormatsCommand(const std::vector<std::string>& argv) {
  absl::StatusOr<Args> args = Args::Parse(argv, {}, {"json"});
  if (!args.ok()) return Fail(args.status());
  if (!args->positional().empty()) {
    return Fail(absl::InvalidArgumentError(
        "formats takes no positional arguments; see lowp formats --help"));
  }
  if (args->Has("json")) {
    nlohmann::json all = nlohmann::json::array();
    for (const Format& f : Catalog()) all.push_back(ToJson(f));
    EmitJson(all);
    return 0;
  }
  std::vector<Row> rows = {{"name", "bits", "sign", "exp", "man", "bias", "specials", "max",
                            "min normal", "min subnormal", "epsilon", "aliases"}};
  for (const Format& f : Catalog()) {
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
