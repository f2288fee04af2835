#include "eval/tokens.h"

#include "absl/strings/str_cat.h"
#include "model/forward.h"

namespace lowp {

TokenFault FindTokenFault(const ModelConfig& c, std::span<const int32_t> tokens, int64_t length) {
  if (length < 1 || tokens.empty() || tokens.size() % static_cast<size_t>(length) != 0) {
    return {TokenFault::kShape,
            absl::StrCat(tokens.size(), " tokens do not make sequences of ", length)};
  }
  if (absl::Status s = CheckSequenceLength(c, length); !s.ok()) {
    return {TokenFault::kLength, std::string(s.message())};
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= c.vocab_size) {
      return {TokenFault::kId,
              absl::StrCat("token ", tokens[i], " at sequence ", i / length, ", position ",
                           i % length, " is not a token id of the model (vocab_size ",
                           c.vocab_size, ")")};
    }
  }
  return {};
}

absl::Status CheckTokens(const ModelConfig& config, std::span<const int32_t> tokens,
                         int64_t length) {
  TokenFault fault = FindTokenFault(config, tokens, length);
  if (fault.kind == TokenFault::kNone) return absl::OkStatus();
  return absl::InvalidArgumentError(fault.message);
}

}  // namespace lowp
