// Token sequences checked against a model, once for every caller: the
// evaluator's contract (Evaluate refuses what fails) and the front ends'
// messages (api/ names the option each fault is the user's).
#ifndef LOWP_EVAL_TOKENS_H_
#define LOWP_EVAL_TOKENS_H_

#include <cstdint>
#include <span>
#include <string>

#include "absl/status/status.h"
#include "model/config.h"

namespace lowp {

struct TokenFault {
  enum Kind {
    kNone,
    kShape,   // the ids do not make whole sequences of `length`
    kLength,  // sequences longer than the model's positions
    kId,      // an id outside the vocabulary
  };
  Kind kind = kNone;
  std::string message;  // what is wrong, naming the sequence and position of an id
};

// The first fault of `tokens` ([sequences, length] row-major) for `config`.
TokenFault FindTokenFault(const ModelConfig& config, std::span<const int32_t> tokens,
                          int64_t length);

// InvalidArgument with the fault's message; OK without one.
absl::Status CheckTokens(const ModelConfig& config, std::span<const int32_t> tokens,
                         int64_t length);

}  // namespace lowp

#endif  // LOWP_EVAL_TOKENS_H_
