// The device catalog, byte and bandwidth parsing.
//
// Capacities are the datasheet's, with GB taken as 10^9 bytes as the
// datasheets mean it: "80 GB" is 80,000,000,000 bytes here. (An H100's HBM
// is physically 80 GiB, of which the driver reports about 79.6 GiB; the
// datasheet figure is the conservative, documented number.) Bandwidths are
// the datasheet peaks; the bandwidth a kernel sustains is lower.
#include "sizing/devices.h"

#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace lowp {
namespace {

constexpr int64_t kGB = 1'000'000'000;

std::vector<Device> BuildCatalog() {
  std::vector<Device> devices;
  auto add = [&devices](const char* name, const char* description, int64_t memory_gb,
                        double bandwidth_bytes_per_s, const char* source) {
    devices.push_back({name, description, memory_gb * kGB, bandwidth_bytes_per_s, source});
  };
  // What was checked (against stored copies of the pages, 2026): the B200's
  // 1,440 GB over 8 GPUs in NVIDIA's DGX B200 user guide itself; the H100
  // PCIe's "greater than 2,000 GBps" in NVIDIA's product brief PB-11133-001
  // itself; every other figure only through secondary pages (spec sheets of
  // resellers and clouds, MLPerf system descriptions, reviews) that quote
  // the datasheet named, all agreeing on the numbers below.
  //
  // Hopper: H100 SXM 80 GB at 3.35 TB/s (some early pages say 3 TB/s, the
  // pre-launch figure), PCIe 80 GB HBM2e at 2 TB/s, NVL 94 GB at 3.9 TB/s.
  add("h100-sxm", "NVIDIA H100 SXM5 80 GB HBM3", 80, 3.35e12,
      "NVIDIA H100 Tensor Core GPU datasheet (H100 SXM)");
  add("h100-pcie", "NVIDIA H100 PCIe 80 GB HBM2e", 80, 2.0e12,
      "NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe); H100 PCIe product brief "
      "PB-11133-001");
  add("h100-nvl", "NVIDIA H100 NVL 94 GB HBM3", 94, 3.9e12,
      "NVIDIA H100 Tensor Core GPU datasheet (H100 NVL)");
  // 141 GB at 4.8 TB/s (MLPerf names the part "H200-SXM-141GB").
  add("h200", "NVIDIA H200 SXM 141 GB HBM3e", 141, 4.8e12, "NVIDIA H200 Tensor Core GPU datasheet");
  // Ampere, the SXM4 boards (the A100 80 GB PCIe card has less bandwidth).
  add("a100-40gb", "NVIDIA A100 SXM4 40 GB HBM2", 40, 1.555e12,
      "NVIDIA A100 Tensor Core GPU datasheet (A100 40GB SXM)");
  add("a100-80gb", "NVIDIA A100 SXM4 80 GB HBM2e", 80, 2.039e12,
      "NVIDIA A100 Tensor Core GPU datasheet (A100 80GB SXM)");
  // Blackwell. Many pages still give the announced 192 GB; the shipping HGX
  // and DGX B200 have 180 GB per GPU (DGX B200 user guide: 8 GPUs, 1,440 GB;
  // MLPerf: "B200-SXM-180GB"). Bandwidth: the DGX B200 datasheet's 64 TB/s
  // over 8 GPUs as quoted; the driver reports a 7680-bit bus, which at the
  // shipping memory clock gives about 7.7 TB/s (pytorch/ao#4002).
  add("b200", "NVIDIA B200 (HGX/DGX) 180 GB HBM3e", 180, 8.0e12,
      "NVIDIA DGX B200 user guide (1,440 GB over 8 GPUs) and datasheet (64 TB/s over 8 GPUs)");
  // CDNA 3: MI300X 192 GB HBM3 at 5.3 TB/s; MI325X 256 GB HBM3E at 6 TB/s
  // (AMD's launch material; 8 of them make its "2 TB" platform).
  add("mi300x", "AMD Instinct MI300X 192 GB HBM3", 192, 5.3e12,
      "AMD Instinct MI300X accelerator datasheet");
  add("mi325x", "AMD Instinct MI325X 256 GB HBM3E", 256, 6.0e12,
      "AMD Instinct MI325X accelerator datasheet");
  // Ada: L40S 48 GB GDDR6 (384-bit at 18 Gbps) at 864 GB/s.
  add("l40s", "NVIDIA L40S 48 GB GDDR6", 48, 864e9, "NVIDIA L40S datasheet");
  // 24 GB GDDR6X on a 384-bit bus at 21 Gbps: 384 / 8 x 21e9 = 1,008 GB/s,
  // the commonly cited figure (not seen on an NVIDIA page).
  add("rtx-4090", "NVIDIA GeForce RTX 4090 24 GB GDDR6X", 24, 1008e9,
      "NVIDIA GeForce RTX 4090 specifications (384-bit GDDR6X at 21 Gbps)");
  return devices;
}

struct Alias {
  const char* alias;
  const char* name;
};
constexpr Alias kAliases[] = {{"h100", "h100-sxm"}, {"a100", "a100-80gb"}, {"4090", "rtx-4090"}};

// A unit: bytes = number * 2^pow2 * 5^pow5 (10^k is 2^k 5^k).
struct Unit {
  const char* name;
  int pow2;
  int pow5;
};
constexpr Unit kUnits[] = {
    {"B", 0, 0},    {"kB", 3, 3},   {"KB", 3, 3},   {"MB", 6, 6},   {"GB", 9, 9},   {"TB", 12, 12},
    {"PB", 15, 15}, {"KiB", 10, 0}, {"MiB", 20, 0}, {"GiB", 30, 0}, {"TiB", 40, 0}, {"PiB", 50, 0},
};

// A decimal number split exactly: value = significand * 10^exponent, with no
// sign (negative numbers are not accepted).
struct Decimal {
  unsigned __int128 significand = 0;
  std::string digits;  // the significand's digits, leading zeros removed
  int exponent = 0;
};

// The longest significand kept exactly: 10^36 < 2^127.
constexpr size_t kMaxDigits = 36;

// Parses [digits][.digits][(e|E)[+|-]digits] at the start of `text`; the rest
// (the unit) is left in `text`. Returns an error message, or "" on success.
std::string ParseDecimal(absl::string_view& text, Decimal* out) {
  size_t i = 0;
  std::string digits;
  int exponent = 0;
  bool any_digit = false;
  while (i < text.size() && absl::ascii_isdigit(text[i])) {
    digits += text[i++];
    any_digit = true;
  }
  if (i < text.size() && text[i] == '.') {
    ++i;
    while (i < text.size() && absl::ascii_isdigit(text[i])) {
      digits += text[i++];
      --exponent;
      any_digit = true;
    }
  }
  if (!any_digit) return "want a number";
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    size_t j = i + 1;
    bool negative = false;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) negative = text[j++] == '-';
    const size_t start = j;
    while (j < text.size() && absl::ascii_isdigit(text[j])) ++j;
    if (j == start) return "bad exponent";
    int e = 0;
    if (j - start > 4 || !absl::SimpleAtoi(text.substr(start, j - start), &e)) {
      return "exponent out of range";
    }
    exponent += negative ? -e : e;
    i = j;
  }
  text.remove_prefix(i);
  // Canonical form: no leading zeros, no trailing zeros in the significand.
  const size_t first = digits.find_first_not_of('0');
  if (first == std::string::npos) {
    *out = Decimal{};
    return "";
  }
  digits.erase(0, first);
  while (digits.back() == '0') {
    digits.pop_back();
    ++exponent;
  }
  if (digits.size() > kMaxDigits) return "too many significant digits";
  out->digits = digits;
  out->significand = 0;
  for (char c : digits) out->significand = out->significand * 10 + (c - '0');
  out->exponent = exponent;
  return "";
}

// The unit named by `text` (after optional spaces), or nullptr. Prefix
// letters are case-insensitive ("gb", "GiB", "kb"); the value is in bytes.
const Unit* FindUnit(absl::string_view text) {
  text = absl::StripLeadingAsciiWhitespace(text);
  if (text.empty()) return &kUnits[0];
  for (const Unit& unit : kUnits) {
    if (absl::EqualsIgnoreCase(text, unit.name)) return &unit;
  }
  return nullptr;
}

absl::Status Invalid(absl::string_view what, absl::string_view text, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(what, " '", text, "': ", why));
}

// significand * 10^exponent * 2^pow2 * 5^pow5 as an exact int64, or an
// error message.
std::string ExactBytes(const Decimal& d, const Unit& unit, int64_t* bytes) {
  if (d.significand == 0) {
    *bytes = 0;
    return "";
  }
  unsigned __int128 value = d.significand;
  int twos = d.exponent + unit.pow2;
  int fives = d.exponent + unit.pow5;
  for (; twos < 0; ++twos) {
    if (value % 2 != 0) return "not a whole number of bytes";
    value /= 2;
  }
  for (; fives < 0; ++fives) {
    if (value % 5 != 0) return "not a whole number of bytes";
    value /= 5;
  }
  constexpr unsigned __int128 kMax = std::numeric_limits<int64_t>::max();
  if (value > kMax) return "more than 2^63 - 1 bytes";
  for (; twos > 0; --twos) {
    value *= 2;
    if (value > kMax) return "more than 2^63 - 1 bytes";
  }
  for (; fives > 0; --fives) {
    value *= 5;
    if (value > kMax) return "more than 2^63 - 1 bytes";
  }
  *bytes = static_cast<int64_t>(value);
  return "";
}

std::string CatalogNames() {
  std::vector<std::string> names;
  for (const Device& d : DeviceCatalog()) names.push_back(d.name);
  for (const Alias& a : kAliases) names.push_back(absl::StrCat(a.alias, " (", a.name, ")"));
  return absl::StrJoin(names, ", ");
}

bool ValidDeviceName(absl::string_view name) {
  if (name.empty() || name.size() > 64) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

}  // namespace

const std::vector<Device>& DeviceCatalog() {
  static const std::vector<Device>* const catalog = new std::vector<Device>(BuildCatalog());
  return *catalog;
}

absl::StatusOr<int64_t> ParseBytes(absl::string_view text, absl::string_view what) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  Decimal d;
  if (std::string error = ParseDecimal(rest, &d); !error.empty()) {
    return Invalid(what, text,
                   absl::StrCat(error, "; want bytes such as 80GB, 24GiB, 512MiB or 80e9"));
  }
  const Unit* unit = FindUnit(rest);
  if (unit == nullptr) {
    return Invalid(what, text,
                   "unknown unit; want B, kB, MB, GB, TB, PB (powers of 10) or KiB, MiB, GiB, "
                   "TiB, PiB (powers of 2)");
  }
  int64_t bytes = 0;
  if (std::string error = ExactBytes(d, *unit, &bytes); !error.empty()) {
    return Invalid(what, text, error);
  }
  return bytes;
}

absl::StatusOr<double> ParseBandwidth(absl::string_view text, absl::string_view what) {
  absl::string_view rest = absl::StripAsciiWhitespace(text);
  Decimal d;
  if (std::string error = ParseDecimal(rest, &d); !error.empty()) {
    return Invalid(what, text, absl::StrCat(error, "; want a rate such as 3.35TB/s or 864GB/s"));
  }
  rest = absl::StripLeadingAsciiWhitespace(rest);
  const bool per_second = absl::ConsumeSuffix(&rest, "/s") || absl::ConsumeSuffix(&rest, "/S");
  const Unit* unit = FindUnit(rest);
  if (unit == nullptr || (!per_second && !rest.empty())) {
    return Invalid(what, text,
                   "want bytes per second with a unit such as TB/s, GB/s or TiB/s (a plain "
                   "number is bytes per second)");
  }
  if (d.significand == 0) return Invalid(what, text, "must be positive");
  // Correctly rounded: strtod of the exact decimal, then an exact scaling by
  // the power of two.
  const int decimal_exponent = d.exponent + unit->pow5;
  double value = std::strtod(absl::StrCat(d.digits, "e", decimal_exponent).c_str(), nullptr);
  value = std::ldexp(value, unit->pow2 - unit->pow5);
  if (!std::isfinite(value) || value < 1) return Invalid(what, text, "out of range");
  return value;
}

absl::StatusOr<Device> FindDevice(absl::string_view spec) {
  const std::vector<absl::string_view> parts =
      absl::StrSplit(absl::StripAsciiWhitespace(spec), ':');
  // No piece at all: a null string_view (absl::StrSplit gives one empty
  // piece for any other empty text).
  if (parts.empty()) return absl::InvalidArgumentError("empty device name");
  if (parts.size() == 1) {
    std::string name = absl::AsciiStrToLower(parts[0]);
    for (const Alias& a : kAliases) {
      if (name == a.alias) name = a.name;
    }
    for (const Device& d : DeviceCatalog()) {
      if (d.name == name) return d;
    }
    return absl::InvalidArgumentError(
        absl::StrCat("unknown device '", spec, "'; known: ", CatalogNames(),
                     "; or define one as NAME:MEMORY[:BANDWIDTH], e.g. mygpu:96GB:4TB/s"));
  }
  // A user-defined device keeps its name as written.
  if (parts.size() > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", spec, "': want NAME:MEMORY[:BANDWIDTH], e.g. mygpu:96GB:4TB/s"));
  }
  if (!ValidDeviceName(parts[0])) {
    return absl::InvalidArgumentError(absl::StrCat(
        "device '", spec, "': the name must be 1 to 64 letters, digits, '-', '_' or '.'"));
  }
  Device device;
  device.name = std::string(parts[0]);
  absl::StatusOr<int64_t> memory = ParseBytes(parts[1], absl::StrCat("device '", spec, "' memory"));
  if (!memory.ok()) return memory.status();
  if (*memory <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("device '", spec, "' memory '", parts[1], "': must be positive"));
  }
  device.memory_bytes = *memory;
  if (parts.size() == 3) {
    absl::StatusOr<double> bandwidth =
        ParseBandwidth(parts[2], absl::StrCat("device '", spec, "' bandwidth"));
    if (!bandwidth.ok()) return bandwidth.status();
    device.bandwidth_bytes_per_s = *bandwidth;
  }
  device.description = absl::StrCat("user-defined as '", spec, "'");
  device.source = "user-defined (--device)";
  return device;
}

}  // namespace lowp
