#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cli/commands.h"

namespace lowp::cli {

absl::StatusOr<Args> Args::Parse(const std::vector<std::string>& argv,
                                 const std::vector<std::string>& value_options,
                                 const std::vector<std::string>& flags) {
  auto contains = [](const std::vector<std::string>& list, absl::string_view s) {
    for (const std::string& item : list) {
      if (item == s) return true;
    }
    return false;
  };
  Args args;
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (arg.size() < 2 || arg.compare(0, 2, "--") != 0) {
      args.positional_.push_back(arg);
      continue;
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    // One rule for every option: given once. A list is one comma-separated
    // value; a second --NAME would silently replace the first.
    if (contains(flags, name) && eq == std::string::npos) {
      if (args.Has(name)) {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " is given twice"));
      }
      args.flags_.push_back(name);
    } else if (contains(value_options, name)) {
      std::string value;
      if (eq != std::string::npos) {
        value = arg.substr(eq + 1);
      } else if (i + 1 < argv.size()) {
        value = argv[++i];
      } else {
        return absl::InvalidArgumentError(absl::StrCat("--", name, " needs a value"));
      }
      if (std::optional<std::string> first = args.Value(name)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--", name, " is given twice ('", *first, "', then '", value,
                         "'); give it once, a list as comma-separated values"));
      }
      args.values_.emplace_back(name, std::move(value));
    } else {
      std::vector<std::string> known;
      for (const std::string& v : value_options) known.push_back("--" + v);
      for (const std::string& f : flags) known.push_back("--" + f);
      return absl::InvalidArgumentError(
          absl::StrCat("unknown option '", arg, "'; valid: ", absl::StrJoin(known, ", ")));
    }
  }
  return args;
}

std::optional<std::string> Args::Value(absl::string_view name) const {
  std::optional<std::string> last;
  for (const auto& [key, value] : values_) {
    if (key == name) last = value;
  }
  return last;
}

bool Args::Has(absl::string_view name) const {
  for (const std::string& flag : flags_) {
    if (flag == name) return true;
  }
  return false;
}

}  // namespace lowp::cli
