// placeholder: being written
#include "quant/scheme_families.h"
namespace lowp::internal {
absl::StatusOr<std::unique_ptr<Scheme>> MakeMxScheme(absl::string_view, const SchemeOptions&) {
  return absl::NotFoundError("");
}
std::vector<SchemeFamily> MxFamilies() { return {}; }
}  // namespace lowp::internal
