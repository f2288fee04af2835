#include "io/strict_json.h"

#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace lowp {
namespace {

// Thrown by the parser callback to stop at the first problem.
struct DuplicateKey {
  std::string key;
};
struct TooDeep {};

template <class Json>
absl::StatusOr<Json> Parse(absl::string_view text, absl::string_view context) {
  std::vector<std::set<std::string>> keys;
  auto callback = [&keys](int depth, typename Json::parse_event_t event, Json& parsed) {
    switch (event) {
      case Json::parse_event_t::object_start:
        keys.emplace_back();
        break;
      case Json::parse_event_t::object_end:
        if (!keys.empty()) keys.pop_back();
        break;
      case Json::parse_event_t::key:
        if (!keys.empty() && !keys.back().insert(parsed.template get<std::string>()).second) {
          throw DuplicateKey{parsed.template get<std::string>()};
        }
        break;
      default:
        break;
    }
    if (depth > 64) throw TooDeep{};
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), callback);
  } catch (const DuplicateKey& e) {
    return absl::InvalidArgumentError(absl::StrCat(context, ": duplicate key \"", e.key, "\""));
  } catch (const TooDeep&) {
    return absl::InvalidArgumentError(
        absl::StrCat(context, ": JSON nested more than 64 levels deep"));
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(context, " is not valid JSON: ", e.what()));
  }
}

}  // namespace

absl::StatusOr<nlohmann::ordered_json> ParseStrictJson(absl::string_view text,
                                                       absl::string_view context) {
  return Parse<nlohmann::ordered_json>(text, context);
}

absl::StatusOr<nlohmann::json> ParseStrictJsonUnordered(absl::string_view text,
                                                        absl::string_view context) {
  return Parse<nlohmann::json>(text, context);
}

}  // namespace lowp
