// `lowp imatrix` / lowp.imatrix: llama.cpp's importance matrix of a model
// over calibration tokens (eval/imatrix.h), written as llama.cpp writes it
// (io/imatrix.h: the GGUF imatrix or the legacy .dat).
#ifndef LOWP_API_IMATRIX_H_
#define LOWP_API_IMATRIX_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "api/eval.h"
#include "io/imatrix.h"
#include "nlohmann/json.hpp"

namespace lowp::api {

struct ImatrixOptions {
  // The model and the calibration tokens by EvalOptions' fields (model,
  // tensors; text, text_file, tokenizer, ctx, chunks, tokens_file,
  // token_array, sample, seed; threads, batch_tokens, progress); the sites
  // are ignored. Text runs llama-imatrix's protocol: chunks of ctx tokens,
  // BOS first in each; the perplexity printed is over their second halves.
  EvalOptions input;
  bool process_output = false;  // also lm_head's input (llama-imatrix --process-output)
  // The file to write, whole or not at all; empty: none (Python returns the
  // matrix). `format` "gguf" or "dat"; empty: "dat" for a name ending in
  // .dat, else "gguf" (llama-imatrix's default).
  std::string out;
  std::string format;
  // A mixture of experts: experts that took fewer tokens than this in an
  // entry are listed (llama-quantize quantizes them from importance
  // gathered on few tokens, or none).
  int64_t min_expert_tokens = 1;
};

// The experts of a merged entry (blk.N.ffn_*_exps) and their tokens.
struct ExpertCoverage {
  std::string entry;
  uint64_t min_tokens = 0, max_tokens = 0;
  std::vector<int64_t> under_min;  // the experts below min_expert_tokens
};

struct ImatrixResult {
  std::string model;
  std::string tokens;  // their description, as eval's
  uint64_t text_tokens = 0;
  int64_t chunks = 0;      // sequences run
  int64_t chunk_size = 0;  // tokens each
  double perplexity = 0;   // the float32 model's on the scored positions
  Imatrix imatrix;
  std::string out;     // the file written, "" for none
  std::string format;  // "gguf" or "dat"
  int64_t min_expert_tokens = 1;
  std::vector<ExpertCoverage> experts;  // one per merged expert entry, in name order
};

// Errors name the option (model, tensors, the token fields, threads,
// batch_tokens, format, out) or the file.
absl::StatusOr<ImatrixResult> MakeImatrix(const ImatrixOptions& options);
// Per entry: name, columns, matrices, counts and the importance's mean,
// min and max (in_sum2 / count); per merged expert entry the experts under
// min_expert_tokens.
nlohmann::json ToJson(const ImatrixResult& result);

}  // namespace lowp::api

#endif  // LOWP_API_IMATRIX_H_
