// What a format does to the model's outputs (`lowp eval`, lowp.eval): the
// float32 model and its emulated variants on the same tokens, compared
// position by position (eval/evaluate.h); and the forward pass and sampler
// themselves (lowp.forward, lowp.sample).
#ifndef LOWP_API_EVAL_H_
#define LOWP_API_EVAL_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/inputs.h"
#include "eval/candidates.h"
#include "eval/evaluate.h"
#include "eval/sample.h"
#include "model/blas.h"
#include "model/config.h"
#include "nlohmann/json.hpp"
#include "tokenizer/tokenizer.h"

namespace lowp::api {

// The tokens as TokenOptions (api/inputs.h) give them, the model, the sites.
struct EvalOptions : TokenOptions {
  // A Hugging Face snapshot directory, a config.json or a preset (then
  // `tensors` is required); empty: the bundled stories260K-hf.
  std::string model;
  std::vector<std::string> tensors;
  // The sites, each a comma-separated list of candidates ("none" or an empty
  // list: float32); the candidates are every combination. In `weights` a run
  // of PATTERN=SCHEME items is one candidate, its rules tried in order
  // ("*.mlp.down_proj.weight=q8_0,*=int4-g128"); a plain SCHEME takes the
  // decoder layers' linear layers. With no site given, `weights` is
  // DefaultEvalWeights().
  std::string weights;
  // Checkpoint files of the same model as candidates of their own, each
  // evaluated as stored (a GGUF file llama.cpp made from the model, by
  // llama.cpp's names; or safetensors by Hugging Face's): its matrices, the
  // model's norms and biases. Combined with the other sites as `weights` is.
  std::vector<std::string> weights_files;
  // An importance matrix the weight schemes quantize with (llama.cpp's
  // imatrix, .gguf or legacy .dat; api/quant.h's OpenImportance), and the
  // mixes choose with (RecipeModel::has_imatrix). Not for weights_files.
  std::string imatrix;
  // The tokens `weights` schemes with ":gptq" calibrate on (api/inputs.h:
  // the bundled calibration text by default); errors name calib_text, ...
  TokenOptions calibration = DefaultCalibrationOptions();
  std::string activations;  // schemes on the input of each linear layer, per token row
  std::string kv;           // schemes on each cached key and value vector
  std::string compute;      // floating formats every site's result is rounded to
  // Candidates built by the caller (plan --mix's), evaluated after the
  // sites' combinations.
  std::vector<EvalCandidate> candidates;
  int threads = 0;
  // Tokens per pass over the checkpoint (EvalRun::batch_tokens); 0: automatic.
  int64_t batch_tokens = 0;
  // How a layer's matrices are read (EvalRun::reads): "auto" (a layer's
  // routed experts one at a time when they take more than 512 MiB in
  // float32, its other matrices when they take more than 2 GiB), "whole",
  // "one-at-a-time" (every matrix and expert as the forward pass reaches
  // it). The results are the same.
  std::string matrices = "auto";
  // (steps done, steps in all, what): a step is a decoder layer of the
  // reference or of one weight variant, for one batch.
  std::function<void(int64_t done, int64_t total, const std::string& what)> progress;
};

struct EvalResult {
  std::string model;  // as given or found (the bundled model's directory)
  ModelConfig config;
  std::string tokens;  // where they came from: the file, "array", "sampled N:LEN seed S" or "text FILE"
  // With text: the tokenizer, and the text's tokens before chunking.
  TokenizerInfo tokenizer;
  uint64_t text_tokens = 0;
  std::string imatrix;  // EvalOptions::imatrix
  // The tokens the calibrated candidates calibrated on ("" when none did).
  std::string calibration;
  uint64_t calibration_tokens = 0;
  EvalReport report;
  BlasKernels blas;  // what ran the products (model/blas.h)
};

// Errors name the option (model, tensors, tokens, sample, text, tokenizer, ctx, chunks, weights,
// activations, kv, compute, threads), the file and tensor, or the position
// of a bad token.
absl::StatusOr<EvalResult> Eval(const EvalOptions& options);
nlohmann::json ToJson(const EvalResult& result);

// The candidates a set of site lists makes (what Eval runs), for tests and
// the plan.
absl::StatusOr<std::vector<EvalCandidate>> EvalCandidates(const EvalOptions& options);

// The float32 logits of `tokens` ([sequences, length]): [sequences, length,
// vocab_size] (eval/evaluate.h's ReferenceLogits).
absl::StatusOr<std::vector<float>> ForwardLogits(const std::string& model,
                                                 const std::vector<std::string>& tensors,
                                                 const TokenArray& tokens, int threads);

// Sequences sampled from the float32 model (eval/sample.h).
absl::StatusOr<TokenArray> Sample(const std::string& model, const std::vector<std::string>& tensors,
                                  const SampleOptions& options);

}  // namespace lowp::api

#endif  // LOWP_API_EVAL_H_
