#include "api/inputs.h"

#include "formats/option_error.h"

namespace lowp::api {

absl::StatusOr<MixTokens> ReadMixTokens(const EvalOptions& given, absl::string_view prefix,
                                        int threads, const Checkpoint& model,
                                        const std::string& path) {
  EvalOptions e = given;
  e.threads = threads;
  EvalResult described;
  EvalRun run;
  absl::StatusOr<TokenArray> array = EvalTokens(e, model, path, described, run);
  if (!array.ok()) return PrefixOption(array.status(), prefix);
  return MixTokens{.ids = std::move(array->ids),
                   .length = array->length,
                   .scored_from = run.scored_from,
                   .description = described.tokens};
}

}  // namespace lowp::api
