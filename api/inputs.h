// What the use cases share in reading their inputs: the thread count, the
// tensors (files or caller arrays) and their selection, the model, an
// importance matrix, and the tokens (as eval, imatrix, mix and plan read
// them). Errors are option errors on the field at fault
// (formats/option_error.h).
#ifndef LOWP_API_INPUTS_H_
#define LOWP_API_INPUTS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "eval/candidates.h"
#include "io/tensor.h"
#include "io/tensor_set.h"
#include "mix/sensitivity.h"
#include "mix/table.h"
#include "model/checkpoint.h"
#include "quant/importance.h"
#include "tokenizer/tokenizer.h"

namespace lowp::api {

// ---------------------------------------------------------------- threads

inline constexpr int kMaxThreads = 1024;
// OK for 0 (every core) to kMaxThreads, else an option error naming `threads`.
absl::Status CheckThreads(int threads);

// ---------------------------------------------------------------- tensors

// The tensors a use case reads: files (.safetensors, a sharded checkpoint's
// .safetensors.index.json, .npy), or, when `files` is empty, `arrays`: views
// of tensors the caller keeps alive (a NumPy array's memory).
struct TensorInputs {
  std::vector<std::string> files;
  std::vector<TensorView> arrays;
};

// The files of `inputs`, or its arrays when it names no file.
absl::StatusOr<TensorSet> Open(const TensorInputs& inputs);

// The tensors whose names match `pattern` (comma-separated globs; empty:
// all); an error naming `tensors` when a pattern matches none or only
// tensors that are not floating (there would be nothing to measure), or the
// files when they hold no tensor or none floating.
absl::StatusOr<std::vector<const TensorView*>> Select(const TensorSet& set,
                                                      const std::string& pattern,
                                                      const std::vector<std::string>& files);

// ---------------------------------------------------------------- model

// `model` as given, or the bundled stories260K-hf's directory when empty
// (an error naming the option when it is not installed).
absl::StatusOr<std::string> ModelPath(const std::string& model);

// ---------------------------------------------------------------- importance

// The importance weights of an imatrix file (io/imatrix.h), null for "";
// errors name the option (imatrix) and the file.
absl::StatusOr<std::shared_ptr<const ImportanceMap>> OpenImportance(const std::string& path);

// ---------------------------------------------------------------- tokens

// Token ids in memory: [sequences, length] row-major.
struct TokenArray {
  std::vector<int32_t> ids;
  int64_t length = 0;
};

struct TokenOptions {
  // The tokens: `tokens_file` (.npy of int32/int64, [sequences, length] or
  // [length]), else `token_array` when it holds ids, else `sample` sequences
  // drawn from the float32 model ("N:LEN", BOS first, temperature 1, `seed`).
  std::string tokens_file;
  TokenArray token_array;
  std::string sample = "16:128";
  uint64_t seed = 0;
  // Or text, over all of the above: `text_file` (or `text` itself), one
  // trailing newline dropped, tokenized whole as one string by the model's
  // tokenizer (`tokenizer`: a file or directory over the model's own), BOS
  // first when the tokenizer adds it; then llama.cpp's perplexity protocol:
  // consecutive chunks of `ctx` tokens (the rest dropped; `chunks` of them
  // at most, -1: all), the first token of each replaced by BOS when the
  // tokenizer adds one, and only positions ctx/2 .. ctx-2 scored, each
  // predicting the next (EvalRun::scored_from).
  std::string text_file;
  std::optional<std::string> text;
  std::string tokenizer;
  int64_t ctx = 512;
  int64_t chunks = -1;
};

// The tokens read, and what they are.
struct Tokens {
  TokenArray array;
  int64_t scored_from = -1;  // EvalRun::scored_from
  // Where they came from: the file, "array", "sampled N:LEN seed S" or "text FILE".
  std::string description;
  // With text: the tokenizer, and the text's tokens before chunking.
  TokenizerInfo tokenizer;
  uint64_t text_tokens = 0;
};

// The options' faults found before any work (reading a text, sampling):
// text and text file both given, ctx and chunks out of range, a sample that
// is not N:LEN or longer than the model's positions.
absl::Status CheckTokenOptions(const TokenOptions& options, const ModelConfig& config);

// The tokens `options` name for `model` (found at `path`; sampling runs on
// `threads`), checked against it: errors name the option each fault is the
// user's (tokens, sample, text, tokenizer or model, ctx, chunks).
absl::StatusOr<Tokens> ReadTokens(const TokenOptions& options, int threads,
                                  const Checkpoint& model, const std::string& path);

// An array given by the caller checked against `config` (the ids below its
// vocabulary, the sequences within its positions): an option error on
// "tokens".
absl::Status CheckTokenArray(const TokenArray& tokens, const ModelConfig& config);

// The same, for mix's tuning or verification: errors name the options with
// `prefix` before them ("tune_ctx").
absl::Status CheckMixTokenOptions(const TokenOptions& options, absl::string_view prefix,
                                  const ModelConfig& config);
absl::StatusOr<MixTokens> ReadMixTokens(const TokenOptions& options, absl::string_view prefix,
                                        int threads, const Checkpoint& model,
                                        const std::string& path);

// ---------------------------------------------------------------- calibration

// The tokens the weight rules that calibrate (":gptq") calibrate on, as
// TokenOptions name them; naming none (the default) takes the bundled
// calibration text (io/bundled.h BundledCalibrationText) in chunks of `ctx`
// 256, at most 64 of them.
TokenOptions DefaultCalibrationOptions();
// Errors name the options with "calib_" before them (calib_text, calib_ctx).
absl::Status CheckCalibrationOptions(const TokenOptions& options, const ModelConfig& config);
absl::StatusOr<std::shared_ptr<const CalibrationTokens>> ReadCalibration(
    const TokenOptions& options, int threads, const Checkpoint& model, const std::string& path);
// The calibration of every candidate whose rules calibrate, read once when
// one does (a candidate's own is kept).
absl::Status SetCalibration(std::vector<EvalCandidate>& candidates, const TokenOptions& options,
                            int threads, const Checkpoint& model, const std::string& path);
// The tokens a mix table's calibrated types calibrate on, read when one does.
absl::Status SetCalibration(MixTable& table, const TokenOptions& options, int threads,
                            const Checkpoint& model, const std::string& path);

}  // namespace lowp::api

#endif  // LOWP_API_INPUTS_H_
