#include "eval/variant.h"

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

}  // namespace lowp
