#include "eval/variant.h"

#include "absl/strings/str_cat.h"

namespace lowp {

WeightReport WeightVariant::Report() const {
  WeightReport r;
  r.total.tensor = "(all)";
  for (const auto& [key, report] : reports_) {
    r.total.Add(report);
    r.tensors.push_back(report);
  }
  r.total.scheme = scheme_names_ == "mixed" ? "" : scheme_names_;
  return r;
}

absl::Status WeightVariant::TableBytes(
    Table, int, const std::function<absl::Status(std::span<const uint8_t>)>&) {
  return absl::UnimplementedError(
      absl::StrCat("'", spec_, "' is no rule list: its tables have no bytes of lowp's making"));
}

}  // namespace lowp
