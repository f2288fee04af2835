// What a model directory says about its special tokens beside the
// tokenizer's own file: tokenizer_config.json (add_bos_token, bos_token,
// eos_token) and config.json (bos_token_id, eos_token_id). Internal to the
// tokenizer layer.
#ifndef LOWP_TOKENIZER_SPECIAL_TOKENS_H_
#define LOWP_TOKENIZER_SPECIAL_TOKENS_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace lowp {

struct SpecialTokenConfig {
  std::string tokenizer_config;                   // its path, when there is one
  std::optional<bool> add_bos;                    // tokenizer_config.json add_bos_token
  std::optional<bool> add_eos;                    // tokenizer_config.json add_eos_token
  std::string chat_template;                      // tokenizer_config.json chat_template (a string)
  std::optional<std::string> bos_text, eos_text;  // tokenizer_config.json bos_token, eos_token
  int32_t bos_id = -1, eos_id = -1;               // config.json (the first of a list)
};

// Reads the two files in `directory` where they exist ("" reads nothing).
// A file that is not the JSON it should be is InvalidArgument naming it.
absl::StatusOr<SpecialTokenConfig> ReadSpecialTokenConfig(const std::string& directory);

// Whether BOS is added, the rule every kind shares: as add_bos_token says,
// else as the kind does by default (`default_add`), never without a BOS
// (`bos` < 0: none). An add_bos_token true with no BOS to add is
// InvalidArgument naming `file` and tokenizer_config.json.
absl::StatusOr<bool> AddBos(const SpecialTokenConfig& special, int32_t bos, bool default_add,
                            const std::string& file);

}  // namespace lowp

#endif  // LOWP_TOKENIZER_SPECIAL_TOKENS_H_
