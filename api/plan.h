// The plan: per candidate weight format, the memory of a job on each device
// beside the precision the format loses on real tensors (`lowp plan`,
// lowp.plan), with the Pareto-optimal candidates marked; optionally written
// as an HTML report. The computation is sizing/plan.h's MakePlan.
#ifndef LOWP_API_PLAN_H_
#define LOWP_API_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "api/inputs.h"
#include "api/quant.h"
#include "nlohmann/json.hpp"
#include "sizing/memory.h"
#include "sizing/plan.h"

namespace lowp::api {

struct PlanJobOptions {
  std::string model;  // a preset or a config.json path
  // The job; sizing.weights must be empty (each candidate sets it).
  // sizing.kv is the KV cache's format for every candidate, or a
  // comma-separated list of several: the KV study (sizing/plan.h
  // PlanKvStudy; the candidates' own rows then keep the default cache),
  // each pair's KL measured on the evaluated model (which it implies) on
  // `kv_sample` tokens ("N:LEN"; empty: 4 sequences of the evaluated model's
  // whole context, at most kPlanKvContext tokens each) sampled with
  // eval_seed.
  SizingOptions sizing;
  std::string kv_sample;
  std::vector<std::string> formats;  // candidates; empty: DefaultPlanFormats(mode)
  std::vector<std::string> devices;  // names; empty: h100-sxm
  // Checkpoint files the accuracy is measured on; empty: the bundled one.
  std::vector<std::string> tensor_files;
  std::string select;  // globs on tensor names; empty: the linear weights
  int threads = 0;
  // Also write the HTML report to this file (whole or not at all; never over
  // a file the plan reads), showing `html_command` as what made it.
  std::optional<std::string> html;
  std::string html_command;
  // Also run lowp eval with each candidate format on the linear layers:
  // KL, top-1 and perplexity beside the memory, and the Pareto front on KL.
  // `eval_model` is a Hugging Face directory (empty: the bundled
  // stories260K-hf); tokens sampled as `eval_sample` ("N:LEN") with
  // `eval_seed`.
  bool eval = false;
  std::string eval_model;
  std::string eval_sample = "16:128";
  uint64_t eval_seed = 0;
  // Or text (over eval_sample): lowp eval --text's llama.cpp protocol with
  // chunks of eval_ctx tokens, eval_chunks of them at most (-1: all).
  std::string eval_text;
  int64_t eval_ctx = 512;
  int64_t eval_chunks = -1;
  // An importance matrix of the evaluated model (lowp imatrix) its formats
  // and the mix quantize with, as eval's and mix's --imatrix.
  std::string eval_imatrix;
  // The tokens a calibrated format (":gptq", ":awq", ":smooth"; those need
  // `eval`) calibrates on, as eval's (errors name calib_text, ...).
  TokenOptions calibration = DefaultCalibrationOptions();
  // Also (with eval, which it implies) per device the mix `lowp mix` chooses
  // for what the device leaves beside the job (inference on one device per
  // replica only): its types (`mix_types`, empty: lowp mix's defaults) and
  // sensitivities measured on the evaluated model, on `mix_tune_sample`
  // tokens sampled with `mix_tune_seed`, then evaluated with the formats. The
  // evaluated model is then the bundled stories3M-hf (where llama.cpp's
  // types apply) unless eval_model or a snapshot --model says otherwise.
  bool mix = false;
  std::vector<std::string> mix_types;
  std::string mix_tune_sample = "8:256";
  uint64_t mix_tune_seed = 1;
  std::string mix_sensitivity = "predicted";  // as lowp mix's sensitivity
  // (A KV study also evaluates; its tokens are `kv_sample`, above.)
  // Before each tensor measured, then (with `eval`) after each sequence
  // evaluated, with that phase's total.
  ProgressFn progress;
};

// Errors name the field (model, formats X, device, tensors, select, html,
// eval_model, eval_sample, calib_text, ..., mix, mix_types, mix_tune_sample,
// mix_sensitivity, kv, kv_sample).
absl::StatusOr<Plan> PlanJob(const PlanJobOptions& options);
inline constexpr int64_t kPlanKvContext = 2048;
nlohmann::json ToJson(const Plan& plan);

}  // namespace lowp::api

#endif  // LOWP_API_PLAN_H_
