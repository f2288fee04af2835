#include "tokenizer/special_tokens.h"

#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "io/mapped_file.h"
#include "io/strict_json.h"

namespace lowp {
namespace {

using Json = nlohmann::ordered_json;

// Reads `directory`/`name` as a JSON object; nullopt when it does not exist.
absl::StatusOr<std::optional<Json>> ReadObject(const std::string& directory, const char* name) {
  const std::string path = (std::filesystem::path(directory) / name).string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<Json>();
  absl::StatusOr<std::string> text = ReadRegularFile(path, uint64_t{16} << 20);
  if (!text.ok()) return text.status();
  absl::StatusOr<Json> json = ParseStrictJson(*text, path);
  if (!json.ok()) return json.status();
  if (!json->is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": not an object"));
  return std::optional<Json>(*std::move(json));
}

// A token as tokenizer_config.json writes it: "<s>" or {"content": "<s>", ...}.
absl::StatusOr<std::optional<std::string>> TokenText(const Json& config, const char* key,
                                                     const std::string& path) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_object()) {
    auto content = it->find("content");
    if (content != it->end() && content->is_string()) {
      return std::optional<std::string>(content->get<std::string>());
    }
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": ", key, " is neither a string nor an object with a string content"));
}

// config.json's id: an integer, or a list whose first item is one.
absl::StatusOr<int32_t> TokenId(const Json& config, const char* key, const std::string& path) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return -1;
  const Json* value = &*it;
  if (value->is_array() && !value->empty()) value = &(*value)[0];
  if (!value->is_number_integer() || value->get<int64_t>() < 0 ||
      value->get<int64_t>() > INT32_MAX) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": ", key, " is not a token id (a non-negative integer)"));
  }
  return static_cast<int32_t>(value->get<int64_t>());
}

}  // namespace

absl::StatusOr<SpecialTokenConfig> ReadSpecialTokenConfig(const std::string& directory) {
  SpecialTokenConfig out;
  if (directory.empty()) return out;
  absl::StatusOr<std::optional<Json>> tc = ReadObject(directory, "tokenizer_config.json");
  if (!tc.ok()) return tc.status();
  if (tc->has_value()) {
    const Json& c = **tc;
    const std::string path = (std::filesystem::path(directory) / "tokenizer_config.json").string();
    out.tokenizer_config = path;
    for (auto [key, field] : {std::pair{"add_bos_token", &out.add_bos},
                              std::pair{"add_eos_token", &out.add_eos}}) {
      if (auto it = c.find(key); it != c.end() && !it->is_null()) {
        if (!it->is_boolean()) {
          return absl::InvalidArgumentError(absl::StrCat(path, ": ", key, " is not a boolean"));
        }
        *field = it->get<bool>();
      }
    }
    // A list of named templates (some models ship one) is not written:
    // llama.cpp's converter takes those from other files.
    if (auto it = c.find("chat_template"); it != c.end() && it->is_string()) {
      out.chat_template = it->get<std::string>();
    }
    absl::StatusOr<std::optional<std::string>> bos = TokenText(c, "bos_token", path);
    if (!bos.ok()) return bos.status();
    absl::StatusOr<std::optional<std::string>> eos = TokenText(c, "eos_token", path);
    if (!eos.ok()) return eos.status();
    out.bos_text = *bos;
    out.eos_text = *eos;
  }
  absl::StatusOr<std::optional<Json>> mc = ReadObject(directory, "config.json");
  if (!mc.ok()) return mc.status();
  if (mc->has_value()) {
    const std::string path = (std::filesystem::path(directory) / "config.json").string();
    absl::StatusOr<int32_t> bos = TokenId(**mc, "bos_token_id", path);
    if (!bos.ok()) return bos.status();
    absl::StatusOr<int32_t> eos = TokenId(**mc, "eos_token_id", path);
    if (!eos.ok()) return eos.status();
    out.bos_id = *bos;
    out.eos_id = *eos;
  }
  return out;
}

absl::StatusOr<bool> AddBos(const SpecialTokenConfig& special, int32_t bos, bool default_add,
                            const std::string& file) {
  if (special.add_bos == true && bos < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        special.tokenizer_config, " asks for BOS (add_bos_token true), but ", file,
        " has no BOS token", special.bos_text ? absl::StrCat(" (bos_token \"", *special.bos_text, "\" is not in it)") : "",
        special.bos_id >= 0 ? absl::StrCat(" (config.json's bos_token_id ", special.bos_id,
                                           " is not one of its ids)")
                            : ""));
  }
  return bos >= 0 && special.add_bos.value_or(default_add);
}

}  // namespace lowp
