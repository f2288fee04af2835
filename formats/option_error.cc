#include "formats/option_error.h"

#include "absl/strings/cord.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace lowp {

absl::Status OptionError(absl::string_view field, absl::string_view why,
                         absl::string_view separator) {
  absl::Status status = absl::InvalidArgumentError(absl::StrCat(field, separator, why));
  status.SetPayload(kOptionPayload, absl::Cord(field));
  return status;
}

std::optional<std::string> OptionOf(const absl::Status& status) {
  absl::optional<absl::Cord> field = status.GetPayload(kOptionPayload);
  if (!field) return std::nullopt;
  return std::string(*field);
}

absl::Status PrefixOption(const absl::Status& status, absl::string_view prefix) {
  std::optional<std::string> field = OptionOf(status);
  if (!field) return status;
  absl::string_view message = status.message();
  if (!absl::StartsWith(message, *field)) return OptionError(absl::StrCat(prefix, *field), message);
  return OptionError(absl::StrCat(prefix, *field), message.substr(field->size()), "");
}

}  // namespace lowp
