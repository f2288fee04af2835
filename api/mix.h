// `lowp mix`, lowp.mix: the per-tensor types that fit a budget, chosen by
// measured end-to-end loss.
//
//   sensitivity  every matrix of the model (mix/groups.h) quantized alone
//                with each type, all other weights float32, evaluated end to
//                end on the tuning tokens (the streamed evaluator, each
//                candidate starting from the reference's hidden state at its
//                layer): the mean KL that matrix costs under that type.
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
  // headroom; mix/budget.h), at most float32's bytes.
  double bits_per_weight = 0;
  uint64_t bytes = 0;
  std::string device;
  SizingOptions job;
  // The types to choose from; empty: DefaultMixTypes() that apply to every
  // matrix's rows.
  std::vector<std::string> types;
  // The tokens, by the token fields of EvalOptions (text, text_file,
  // tokenizer, ctx, chunks, tokens_file, token_array, sample, seed; the
  // rest is ignored): `tune` for the sensitivities, `verify` for the
  // verification. Defaults: 8 sequences of 256 sampled with seed 1, and 16
  // of 256 with seed 0.
  EvalOptions tune = [] {
    EvalOptions e;
    e.sample = "8:256";
    e.seed = 1;
    return e;
  }();
  EvalOptions verify = [] {
    EvalOptions e;
    e.sample = "16:256";
    return e;
  }();
  // llama.cpp's recipes to verify beside the mix, each with lowp's mix at
  // its size; empty: DefaultMixBaselines(). {"none"}: no baselines.
  std::vector<std::string> baselines;
  // Random assignments also verified, to show how well the prediction
  // ranks mixes (seeded by `seed`).
  int random_mixes = 0;
  uint64_t seed = 0;
  // An importance matrix every type and recipe quantizes with (as eval's).
  std::string imatrix;
  int threads = 0;
  std::function<void(int64_t done, int64_t total, const std::string& what)> progress;
};

// q2_K q3_K q4_K q5_K q6_K q8_0 iq4_xs fp16.
const std::vector<std::string>& DefaultMixTypes();
// Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K Q8_0.
const std::vector<std::string>& DefaultMixBaselines();

// One verified mix.
struct MixRow {
  std::string kind;   // "mix" (the chosen one), "recipe", "lowp" (at a recipe's size), "random"
  std::string label;  // the recipe's name; "lowp @ Q4_K_M"; "random 3"
  MixAssignment schemes;  // per group (a recipe's own choices)
  uint64_t bytes = 0;
  double bits_per_weight = 0;
  double predicted_kl = NAN;  // NaN when a choice is not among the types measured
  double kl_mean = 0;
  double top1_agreement = 0;
  double perplexity = 0;
  LlamaCppStats llama_cpp;
};

// The matrices, the types and what each costs: `lowp mix`'s sensitivity
// sweep, from which any number of budgets can be allocated (plan --mix
// allocates one per device).
struct MixTable {
  std::string model;  // the snapshot directory
  std::vector<MixGroup> groups;
  std::vector<std::string> types;
  std::vector<std::shared_ptr<const Scheme>> schemes;  // types[t]'s
  uint64_t weights = 0;  // elements of the groups
  // sensitivity[g][t]: mean KL with group g in types[t], all else float32;
  // bytes[g][t] what it stores in.
  std::vector<std::vector<double>> sensitivity;
  std::vector<std::vector<uint64_t>> bytes;
  std::string tune_tokens;  // their description, as eval's `tokens`
  uint64_t tune_positions = 0;
  int64_t candidates_measured = 0;
  std::string imatrix;  // MixOptions::imatrix
  std::shared_ptr<const ImportanceMap> importance;

  // The bytes of the smallest assignment.
  uint64_t SmallestBytes() const;
  // The assignment of least predicted KL within `budget` bytes
  // (mix/allocate.h), as type names, with its bytes and predicted KL.
  absl::StatusOr<Allocation> Allocate(uint64_t budget) const;
  MixAssignment Assignment(const Allocation& a) const;
  uint64_t Bytes(const Allocation& a) const;
  // The sum of the groups' costs; NaN when a type was not measured.
  double Predict(const MixAssignment& a) const;
  // The assignment as an eval candidate: one rule per group.
  EvalCandidate Candidate(const std::string& label, const MixAssignment& a) const;
};

// The table's groups, types and bytes for `options` (model, tensors, types),
// without the sweep; errors name model, tensors or types.
absl::StatusOr<MixTable> MixTypes(const MixOptions& options, const Checkpoint& model,
                                  const std::string& path);
// The sweep on `options.tune`'s tokens: every group alone in every type.
absl::Status MeasureSensitivity(const MixOptions& options, const Checkpoint& model,
                                MixTable& table);

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
  std::vector<MixRow> rows;              // rows[0] the chosen mix
  // Over the random mixes (NaN with fewer than 3): Spearman's rank
  // correlation of predicted and measured KL, and the median of
  // |predicted - measured| / measured.
  double spearman = NAN;
  double median_relative_error = NAN;
};

// Errors name the option: model, tensors, bits_per_weight / bytes / device
// (none or two given, below the smallest assignment, above float32; an
// unknown device, a job the memory model rejects), types (unknown,
// or not applying to a matrix's rows), baselines, random_mixes, the tokens'.
absl::StatusOr<MixResult> Mix(const MixOptions& options);
nlohmann::json ToJson(const MixResult& result);

// Spearman's rank correlation of two equally long series (average ranks for
// ties); NaN below 3 points.
double SpearmanCorrelation(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace lowp::api

#endif  // LOWP_API_MIX_H_
