// `lowp mix`, lowp.mix: the per-tensor types that fit a budget, chosen by
// measured end-to-end loss (the logic is mix/'s; this reads the options and
// the tokens, runs the stages and writes the result).
//
//   sensitivity  what each matrix of the model (mix/groups.h) costs alone in
//                each type, all other weights float32, on the tuning tokens
//                (the streamed evaluator, each candidate starting from the
//                reference's hidden state at its layer): predicted (the
//                default) from one probe type measured end to end per matrix
//                and each type's weight error on it, or exact, every matrix
//                in every type measured (mix/sensitivity.h).
//   prediction   a mix's KL is the sum of its matrices' costs (independent
//                small perturbations add to first order in the KL).
//   allocation   the assignment of least predicted KL within the budget,
//                exactly (mix/allocate.h; or within the bound it states).
//   verification the chosen mix, llama.cpp's recipes and lowp's mix at each
//                recipe's own size (and random mixes, when asked) evaluated
//                on the verification tokens, which the mix was not tuned on:
//                predicted beside measured KL, top-1 and perplexity.
#ifndef LOWP_API_MIX_H_
#define LOWP_API_MIX_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "api/eval.h"
#include "mix/allocate.h"
#include "mix/budget.h"
#include "mix/groups.h"
#include "mix/table.h"
#include "mix/verify.h"
#include "model/checkpoint.h"
#include "quant/scheme.h"
#include "nlohmann/json.hpp"

namespace lowp::api {

struct MixOptions {
  // A Hugging Face snapshot directory (as eval takes it); empty: the bundled
  // stories3M-hf. `tensors` as eval's.
  std::string model;
  std::vector<std::string> tensors;
  // The budget, one of: bits per weight over the matrices mixed, their
  // bytes, or the device the model is served on (a catalog name or
  // NAME:MEMORY, as plan takes it): what it leaves for the matrices beside
  // the job in `job` (seq, batch, kv (default fp16), buffers_bytes,
  // headroom; mix/budget.h), at most float32's bytes. Validated by
  // mix/budget.h's CheckMixBudget.
  std::optional<double> bits_per_weight;
  std::optional<uint64_t> bytes;
  std::string device;
  SizingOptions job;
  // The types to choose from; empty: DefaultMixTypes() that apply to every
  // matrix's rows.
  std::vector<std::string> types;
  // "predicted" (default) or "exact" (mix/sensitivity.h).
  std::string sensitivity = "predicted";
  // The tokens (api/inputs.h): `tune` for the sensitivities, `verify` for
  // the verification. Defaults: 8 sequences of 256 sampled with seed 1, and
  // 16 of 256 with seed 0.
  TokenOptions tune = [] {
    TokenOptions e;
    e.sample = "8:256";
    e.seed = 1;
    return e;
  }();
  TokenOptions verify = [] {
    TokenOptions e;
    e.sample = "16:256";
    return e;
  }();
  // llama.cpp's recipes to verify beside the mix, each with lowp's mix at
  // its size; empty: DefaultMixBaselines(). {"none"}: no baselines.
  std::vector<std::string> baselines;
  // A layer's routed experts: "layer" (default), each kind (gate, up,
  // down) of all of them one group, as llama.cpp stores them; "each", every
  // expert's matrix a group of its own (no llama-quantize line then).
  std::string expert_groups = "layer";
  // Random assignments also verified, to show how well the prediction
  // ranks mixes (seeded by `seed`).
  int random_mixes = 0;
  uint64_t seed = 0;
  // An importance matrix every type and recipe quantizes with (as eval's).
  std::string imatrix;
  // The tokens calibrated types ("q4_K:gptq") calibrate on, as eval's
  // (errors name calib_text, ...).
  TokenOptions calibration = DefaultCalibrationOptions();
  int threads = 0;
  std::function<void(int64_t done, int64_t total, const std::string& what)> progress;
  // When set, the chosen mix is written there as `lowp quantize --model`
  // writes its rules (api/quantize_model.h): a .gguf file llama.cpp runs
  // (each matrix the mix's own bytes; the vocabulary of verify.tokenizer
  // when given, else the model's) or a .safetensors file of the dequantized
  // model.
  std::string out;
  // The sweep in shards, for several machines or processes: with `shard`
  // ("I/N") and `table_out`, only every N-th unit of the sensitivity sweep
  // from the I-th (a candidate, or a group when predicted) is measured and
  // written to table_out, and nothing else is done (the other options as
  // the merging run's); with `tables`,
  // the N shard files are read instead of measuring, then allocation and
  // verification run as usual (mix/table_file.h).
  std::string shard;
  std::string table_out;
  std::vector<std::string> tables;
};

struct MixResult : MixTable {
  uint64_t budget_bytes = 0;
  std::optional<DeviceBudget> device;  // with MixOptions::device
  std::string verify_tokens;  // as tune_tokens
  uint64_t verify_positions = 0;
  double reference_perplexity = 0;  // on the verification tokens
  Allocation allocation;
  std::vector<std::string> rules;        // NAME=TYPE per group
  // llama-quantize's command, or why there is none (a type it lacks).
  LlamaQuantizeCommand llama_quantize;
  std::string llama_quantize_error;
  std::string written;                   // MixOptions::out, once written
  std::vector<MixRow> rows;              // rows[0] the chosen mix
  // Over the random mixes (NaN with fewer than 3): Spearman's rank
  // correlation of predicted and measured KL, and the median of
  // |predicted - measured| / measured.
  double spearman = NAN;
  double median_relative_error = NAN;
  // A shard run (MixOptions::shard): the shard and the file written; the
  // table then holds the shard's KLs only, and nothing else is set.
  std::string shard;
  std::string table_written;
};

// Errors name the option: model, tensors, bits_per_weight / bytes / device
// (none or two given, below the smallest assignment, above float32; an
// unknown device, a job the memory model rejects), types (unknown,
// or not applying to a matrix's rows), baselines, random_mixes, the tokens',
// out (not .gguf or .safetensors; the writer's own errors as quantize's).
absl::StatusOr<MixResult> Mix(const MixOptions& options);
nlohmann::json ToJson(const MixResult& result);

}  // namespace lowp::api

#endif  // LOWP_API_MIX_H_
