#include "quant/calibration.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace lowp {

std::string Calibration::Suffix() const {
  if (method == Method::kNone) return "";
  if (method == Method::kAwq) return alpha < 0 ? ":awq" : absl::StrCat(":awq=", alpha);
  if (method == Method::kSmooth) return alpha < 0 ? ":smooth" : absl::StrCat(":smooth=", alpha);
  return act_order ? ":gptq=actorder" : ":gptq";
}

bool IsCalibrationOption(absl::string_view key) {
  return key == "gptq" || key == "awq" || key == "smooth";
}

absl::StatusOr<std::pair<std::string, Calibration>> SplitCalibration(absl::string_view name) {
  std::vector<absl::string_view> kept;
  Calibration calibration;
  bool first = true;
  for (absl::string_view part : absl::StrSplit(name, ':')) {
    const size_t eq = part.find('=');
    const absl::string_view key = part.substr(0, eq);
    if (first || !IsCalibrationOption(key)) {
      kept.push_back(part);
      first = false;
      continue;
    }
    if (calibration.active()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "scheme '", name, "': one calibration per scheme (':gptq', ':awq' or ':smooth'), not two"));
    }
    const absl::string_view value = eq == absl::string_view::npos ? "" : part.substr(eq + 1);
    if (key == "awq" || key == "smooth") {
      double alpha = -1;
      if (!value.empty() && (!absl::SimpleAtod(value, &alpha) || !(alpha >= 0 && alpha <= 1))) {
        return absl::InvalidArgumentError(absl::StrCat("scheme '", name, "': ':", key,
                                                       "' takes no value or an alpha in [0, 1], "
                                                       "not '", value, "'"));
      }
      calibration.method =
          key == "awq" ? Calibration::Method::kAwq : Calibration::Method::kSmooth;
      calibration.alpha = alpha;
      continue;
    }
    if (!value.empty() && value != "actorder") {
      return absl::InvalidArgumentError(absl::StrCat(
          "scheme '", name, "': ':gptq' takes no value or 'actorder', not '", value, "'"));
    }
    calibration.method = Calibration::Method::kGptq;
    calibration.act_order = value == "actorder";
  }
  return std::make_pair(absl::StrJoin(kept, ":"), calibration);
}

}  // namespace lowp
