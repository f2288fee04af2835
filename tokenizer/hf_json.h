// Reading tokenizer.json's members without trusting their types: a member
// of the wrong type is InvalidArgument naming it, where nlohmann's value()
// and get() would throw. Internal to the tokenizer layer.
#ifndef LOWP_TOKENIZER_HF_JSON_H_
#define LOWP_TOKENIZER_HF_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace lowp {

// The "type" member when it is a string; "" otherwise.
inline std::string TypeOf(const nlohmann::json& j) {
  auto it = j.find("type");
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// A string member (`fallback` when absent or null); InvalidArgument
// starting with `where` otherwise.
inline absl::StatusOr<std::string> StringField(const nlohmann::json& j, const char* key,
                                               const std::string& where,
                                               const std::string& fallback = "") {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", key, " is not a string"));
  }
  return it->get<std::string>();
}

// A boolean member, the same way.
inline absl::StatusOr<bool> BoolField(const nlohmann::json& j, const char* key,
                                      const std::string& where, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", key, " is not a boolean"));
  }
  return it->get<bool>();
}

}  // namespace lowp

#endif  // LOWP_TOKENIZER_HF_JSON_H_
