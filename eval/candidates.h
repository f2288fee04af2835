// The candidates of `lowp eval` (and of mix and plan, built by the same code):
// each an emulated variant of the model, and the grammar of the site lists
// that make them.
//
// Each site is a comma-separated list of items ("none", or an empty list:
// float32); the candidates are every combination of the sites' items:
//   weights       a plain SCHEME takes the decoder layers' linear layers; a
//                 run of PATTERN=SCHEME items is one candidate, its rules
//                 tried in order ("*.mlp.down_proj.weight=q8_0,*=int4-g128";
//                 PATTERN=none keeps those matrices in float32); a recipe
//                 (Q4_K_M) decides for every matrix;
//   weights files checkpoint files of the model, each a candidate as stored;
//   activations   a scheme on the input of each linear layer, per token row;
//   kv            a scheme on each cached key and value vector, ":rotate"
//                 (llama.cpp's rotation) or ":rotate=N" (blocks of N);
//   compute       a floating format every site's result is rounded to.
// Errors are option errors (formats/option_error.h) on the site's field:
// weights, weights_file, activations, kv, compute.
#ifndef LOWP_EVAL_CANDIDATES_H_
#define LOWP_EVAL_CANDIDATES_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "eval/calibrator.h"
#include "model/forward.h"
#include "model/weights.h"
#include "quant/importance.h"

namespace lowp {

// One emulated variant of the model.
struct EvalCandidate {
  std::string label;    // how results name it ("int4-g128", "w=q8_0 kv=fp8_e4m3fn")
  std::string weights;  // the weight spec as given, or the file ("" for float32 weights)
  std::vector<WeightRule> weight_rules;
  // The imatrix the weight rules' schemes quantize with (none: without).
  std::shared_ptr<const ImportanceMap> importance;
  // The tokens the rules that calibrate (":gptq") calibrate on.
  std::shared_ptr<const CalibrationTokens> calibration;
  std::string weights_file;  // a checkpoint file whose matrices the candidate runs
  std::string activations;   // scheme names as given, "" when not emulated
  std::string kv;
  std::string compute;
  Emulation emulation;
};

// The site lists, as the options give them.
struct SiteLists {
  std::string weights;
  std::vector<std::string> weights_files;
  std::string activations;
  std::string kv;
  std::string compute;
};

// fp16, bf16, fp8_e4m3fn, fp8_e4m3fn-channel, int8-channel, int4-g128, nf4,
// mxfp4, q4_0: the weights when no site is given.
const std::vector<std::string>& DefaultEvalWeights();

// Every combination of the sites' items, at most kMaxCandidates. Weight
// files join the weights' items; with files and no weights, they are the
// only ones (the float32 weights are the reference).
absl::StatusOr<std::vector<EvalCandidate>> MakeCandidates(const SiteLists& sites);
constexpr size_t kMaxCandidates = 256;
// --activations' item for llama.cpp's CPU conversion of each product's input
// (Emulation::ggml_products).
inline constexpr char kGgmlActivations[] = "ggml";

// Whether any of the candidate's weight rules calibrates (":gptq").
bool Calibrates(const EvalCandidate& candidate);

// A candidate of weight rules alone, labelled `label` (mix's and plan's).
EvalCandidate RulesCandidate(const std::string& label, std::vector<WeightRule> rules);

// What makes two candidates' weights the same variant: the file, or the
// parsed rules (each pattern and its scheme's canonical name) with the
// importance matrix they quantize with; "" for float32 weights.
std::string WeightsKey(const EvalCandidate& candidate);

}  // namespace lowp

#endif  // LOWP_EVAL_CANDIDATES_H_
