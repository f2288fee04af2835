// placeholder: being written
#include "quant/scheme_families.h"
namespace lowp::internal {
absl::StatusOr<std::unique_ptr<Scheme>> MakeGgmlScheme(absl::string_view, const SchemeOptions&) {
  return absl::NotFoundError("");
}
std::vector<SchemeFamily> GgmlFamilies() { return {}; }
}  // namespace lowp::internal
