#include "api/text.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace lowp::api {
namespace {

constexpr double kGB = 1e9;
constexpr double kGiB = 1073741824.0;

}  // namespace

std::string Grouped(int64_t v) {
  const uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
  const std::string digits = absl::StrCat(magnitude);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string Gb(int64_t bytes) { return absl::StrFormat("%.2f", static_cast<double>(bytes) / kGB); }
std::string Gib(int64_t bytes) {
  return absl::StrFormat("%.2f", static_cast<double>(bytes) / kGiB);
}
std::string TbPerS(double bytes_per_s) {
  return bytes_per_s > 0 ? absl::StrFormat("%.4g", bytes_per_s / 1e12) : std::string("-");
}

std::string PercentText(double fraction) {
  if (std::isnan(fraction)) return "-";
  return std::isinf(fraction) ? (fraction > 0 ? "inf" : "-inf")
                              : absl::StrFormat("%.3g%%", 100 * fraction);
}

std::string SqnrText(double db) {
  if (std::isnan(db)) return "-";
  return std::isinf(db) ? (db > 0 ? "inf" : "-inf") : absl::StrFormat("%.2f", db);
}

}  // namespace lowp::api
