// JSON from untrusted files (safetensors headers, index files, config.json):
// nlohmann-json with duplicate keys and deep nesting refused. Internal to the
// library (not installed).
#ifndef LOWP_IO_STRICT_JSON_H_
#define LOWP_IO_STRICT_JSON_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace lowp {

// Parses `text`. A duplicate key in any object (nlohmann would keep the last
// one silently, and which one a reader sees is then a guess), nesting deeper
// than 64 levels, or text that is not JSON is InvalidArgument starting with
// `context` ("model.safetensors: header").
absl::StatusOr<nlohmann::ordered_json> ParseStrictJson(absl::string_view text,
                                                       absl::string_view context);

// The same into nlohmann::json, whose objects are sorted maps: for large
// objects whose key order means nothing (tokenizer.json's vocabulary of
// 10^5 keys, which ordered_json's linear lookups take seconds to build).
absl::StatusOr<nlohmann::json> ParseStrictJsonUnordered(absl::string_view text,
                                                        absl::string_view context);

}  // namespace lowp

#endif  // LOWP_IO_STRICT_JSON_H_
