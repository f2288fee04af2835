// Internal to api/: what the use cases share in reading their inputs.
// Not installed.
#ifndef LOWP_API_INPUTS_H_
#define LOWP_API_INPUTS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "api/eval.h"
#include "mix/sensitivity.h"
#include "model/checkpoint.h"

namespace lowp::api {

// The tokens `given` names, as eval reads them (EvalTokens), for mix's
// tuning or verification: errors name the options with `prefix` before
// them ("tune_ctx").
absl::StatusOr<MixTokens> ReadMixTokens(const EvalOptions& given, absl::string_view prefix,
                                        int threads, const Checkpoint& model,
                                        const std::string& path);

}  // namespace lowp::api

#endif  // LOWP_API_INPUTS_H_
