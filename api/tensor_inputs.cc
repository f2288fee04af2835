#include "api/tensor_inputs.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "formats/option_error.h"

namespace lowp::api {

absl::StatusOr<TensorSet> Open(const TensorInputs& inputs) {
  if (inputs.files.empty()) return TensorSet::FromViews(inputs.arrays);
  return TensorSet::OpenAll(inputs.files);
}

absl::StatusOr<std::vector<const TensorView*>> Select(const TensorSet& set,
                                                      const std::string& pattern,
                                                      const std::vector<std::string>& files) {
  std::vector<const TensorView*> selected;
  for (const TensorView& t : set.tensors()) {
    if (MatchesPattern(pattern, t.name)) selected.push_back(&t);
  }
  const std::string where =
      files.empty() ? std::string("the arrays given") : absl::StrJoin(files, ", ");
  if (selected.empty()) {
    if (set.tensors().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("no tensors in ", where));
    }
    return OptionError("tensors", absl::StrCat("'", pattern, "' matches no tensor of ", where),
                       " ");
  }
  // Every use case measures floating tensors only (the others are reported
  // as skipped): a selection with none would report nothing as if measured.
  std::vector<std::string> kinds;
  for (const TensorView* t : selected) {
    if (IsFloating(t->dtype)) return selected;
    if (kinds.size() < 8) kinds.push_back(absl::StrCat(t->name, " (", t->type_name(), ")"));
  }
  const std::string why = absl::StrCat(
      "no floating tensor (lowp measures and quantizes floating tensors only) among the ",
      selected.size(), " selected: ", absl::StrJoin(kinds, ", "),
      selected.size() > kinds.size() ? ", ..." : "");
  if (!pattern.empty()) return OptionError("tensors", absl::StrCat("'", pattern, "' in ", where, ": ", why), " ");
  return absl::InvalidArgumentError(absl::StrCat(where, ": ", why));
}

}  // namespace lowp::api
