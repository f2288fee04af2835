// `lowp mix`'s verification, on tokens the mix was not tuned on: the chosen
// mix, llama.cpp's recipes (baselines) and lowp's mix at each recipe's own
// size, and random assignments when asked, each predicted (the sum of its
// matrices' costs) beside measured: KL, top-1, perplexity. Over the random
// mixes, how well the prediction ranks them (Spearman) and its median
// relative error.
#ifndef LOWP_MIX_VERIFY_H_
#define LOWP_MIX_VERIFY_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "eval/llama_cpp_stats.h"
#include "mix/sensitivity.h"
#include "mix/table.h"

namespace lowp {

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

// Q2_K Q3_K_S Q3_K_M Q3_K_L Q4_K_S Q4_K_M Q5_K_S Q5_K_M Q6_K Q8_0.
const std::vector<std::string>& DefaultMixBaselines();

struct Baseline {
  std::string name;
  std::shared_ptr<const Scheme> recipe;
};
// `names` as recipes (empty: DefaultMixBaselines; {"none"}: none); an
// option error on "baselines" for a name that is not one of llama.cpp's.
absl::StatusOr<std::vector<Baseline>> ParseBaselines(const std::vector<std::string>& names);

struct VerifyOptions {
  std::vector<Baseline> baselines;
  int random_mixes = 0;
  uint64_t seed = 0;  // of the random mixes
};
constexpr int kMaxRandomMixes = 1000;

struct Verification {
  std::vector<MixRow> rows;  // rows[0] the chosen mix
  uint64_t positions = 0;
  double reference_perplexity = 0;
  double spearman = NAN;               // NaN with fewer than 3 random mixes
  double median_relative_error = NAN;  // of |predicted - measured| / measured
};

// The rows for `chosen` (the table's allocation) and `options`, evaluated
// on `tokens`. An option error on "baselines" for a recipe llama-quantize
// refuses to make without an importance matrix.
absl::StatusOr<Verification> VerifyMixes(const Checkpoint& model, const MixTable& table,
                                         const Allocation& chosen, const VerifyOptions& options,
                                         const MixTokens& tokens, const MixRun& run);

// Spearman's rank correlation of two equally long series (average ranks for
// ties); NaN below 3 points.
double SpearmanCorrelation(const std::vector<double>& a, const std::vector<double>& b);

}  // namespace lowp

#endif  // LOWP_MIX_VERIFY_H_
