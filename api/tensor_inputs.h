// Internal to api/: opening a use case's tensors (files or caller arrays) and
// selecting them by name. Not installed.
#ifndef LOWP_API_TENSOR_INPUTS_H_
#define LOWP_API_TENSOR_INPUTS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/quant.h"
#include "io/tensor_set.h"

namespace lowp::api {

// The files of `inputs`, or its arrays when it names no file.
absl::StatusOr<TensorSet> Open(const TensorInputs& inputs);

// The tensors whose names match `pattern` (comma-separated globs; empty:
// all); an error naming `tensors` when a pattern matches none or only
// tensors that are not floating (there would be nothing to measure), or the
// files when they hold no tensor or none floating.
absl::StatusOr<std::vector<const TensorView*>> Select(const TensorSet& set,
                                                      const std::string& pattern,
                                                      const std::vector<std::string>& files);

}  // namespace lowp::api

#endif  // LOWP_API_TENSOR_INPUTS_H_
