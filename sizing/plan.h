// The plan: for each candidate weight format, the memory a job takes on each
// device (EstimateMemory with the decoder's linear weights in that format)
// beside the precision the format loses on real tensors (MeasureTensor over
// the checkpoint's linear weights), and which candidates are Pareto-optimal.
//
// The memory of a candidate is exactly what `lowp size --weights FORMAT`
// reports for the same options, with the KV cache kept in the bf16
// reference's format so that the rows differ in their weights alone (as
// CompareFormats). The error of a candidate is exactly the "(all)" row of
// `lowp quant-error --tensors <the measured tensors>`: the same reports added
// in the same order.
#ifndef LOWP_SIZING_PLAN_H_
#define LOWP_SIZING_PLAN_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "quant/measure.h"
#include "sizing/devices.h"
#include "sizing/memory.h"
#include "model/config.h"

namespace lowp {

struct PlanOptions {
  // The job; `sizing.weights` is ignored (each candidate sets it).
  SizingOptions sizing;
  // Candidate weight formats, any name `lowp schemes` accepts (full
  // training, pretrain and finetune: floating casts only), or one calibrated
  // on a model's inputs (":gptq", ":awq", ":smooth"; quant/calibration.h),
  // sized as its scheme and measured end to end only (api::PlanJob's eval):
  // its error on the tensors alone is not defined. Empty takes
  // DefaultPlanFormats(sizing.mode).
  std::vector<std::string> formats;
  // At least one; each candidate is sized on each.
  std::vector<Device> devices;
  // KV cache formats to size each candidate with beside the job's own
  // (Plan::kv_study); empty: none.
  std::vector<std::string> kv_formats;

  // Tensor files the accuracy is measured on (.safetensors, a sharded
  // checkpoint's index, .npy); empty takes BundledCheckpoint().
  std::vector<std::string> tensor_files;
  // Comma-separated globs on tensor names; empty selects the linear weights
  // (IsLinearWeightName on every floating tensor of rank 2, or 3 for
  // stacked experts).
  std::string select;
  MeasureOptions measure;
  // Called before each tensor is measured with (tensors in all, name); never
  // from more than one thread at a time. Not kept in the Plan.
  std::function<void(size_t, const std::string&)> progress;
};

// Where the accuracy was measured.
struct PlanSource {
  std::vector<std::string> files;
  bool bundled = false;  // BundledCheckpoint(), no files given
  // The measured tensors are not the model's: some 2-D tensor's shape is not
  // the shape of any of the model's linear layers. The accuracy is then a
  // proxy (the bundled sample for a 70B preset, say).
  bool proxy = false;
  std::string proxy_reason;          // e.g. "[64, 64] is no linear layer of llama-3.1-8b"
  std::vector<std::string> tensors;  // measured, in order
  uint64_t elements = 0;
  std::vector<std::string> skipped;  // selected but not floating
};

// One candidate on one device.
struct PlanFit {
  Device device;
  // False when no number of these devices holds the job (`reason` says
  // why): its buffers and headroom leave nothing (the report is then
  // empty), or even the smallest share the model can be cut into does not
  // fit: the largest tensor-parallel degree the heads allow, one layer per
  // pipeline stage, under ZeRO the most data-parallel ranks (2^20 devices
  // in all), the other options as given.
  bool possible = true;
  std::string reason;
  SizingReport report;  // on the layout of PlanOptions::sizing
  // When the report does not fit: that smallest share's layout and bytes
  // on its most loaded device.
  int64_t smallest_share_dp = 0, smallest_share_tp = 0, smallest_share_pp = 0;
  int64_t smallest_share_bytes = 0;
};

struct PlanCandidate {
  std::string format;
  std::string kv;  // the KV cache's format it is sized with
  int64_t kv_cache_bytes = 0;  // the whole job's KV cache (device-independent)
  // Of the model, from the memory model (device-independent): bits per
  // parameter of the linear layers and over all parameters, scales and zero
  // points included; the whole model's weight bytes.
  double linear_bits_per_parameter = 0;
  double weight_bits_per_parameter = 0;
  int64_t weight_bytes = 0;
  double saving_vs_bf16 = 0;  // 1 - weight_bytes / weight_bytes(bf16)

  // Over the measured tensors ("(all)" as quant-error reports it, its sums
  // over the pairs where input and output are finite); empty (nothing
  // measured) for a calibrated candidate.
  QuantReport error;
  bool calibrated = false;  // ":gptq", ":awq", ":smooth": bytes of its scheme
  // The candidate's error: ||q - x|| / ||x|| = 10^(-sqnr_db / 20) over every
  // finite input. A format that turns any finite weight into inf or NaN
  // (error.stats.nonfinite_outputs) has infinite error: relative_rmse +inf,
  // sqnr_db -inf. NaN when nothing was measured (all inputs NaN or inf, or
  // a calibrated candidate).
  double relative_rmse() const;
  double sqnr_db() const;
  // Clipped, and overflowed to inf or NaN, over the finite inputs (NaN when
  // nothing was measured).
  double clipped_fraction() const;
  double overflow_fraction() const;

  // The model's own outputs with its linear layers in this format, from
  // lowp eval (api::PlanJob with `eval`); empty without.
  struct EndToEnd {
    double kl_mean = 0, kl_p99 = 0;  // nats; +inf with a non-finite logit
    double top1_agreement = 0;       // fraction of positions
    double perplexity = 0;
    double perplexity_ratio = 0;     // perplexity / the float32 model's
  };
  std::optional<EndToEnd> end_to_end;

  // ParetoOptimal over (weight_bytes, relative_rmse) of all candidates, or
  // over (weight_bytes, end_to_end->kl_mean) when the plan has them; in the
  // KV study over (weight_bytes + kv_cache_bytes, end_to_end->kl_mean).
  bool pareto = false;
  std::vector<PlanFit> fits;  // one per device, in PlanOptions order
};

// Where the end-to-end columns were measured.
struct PlanEval {
  std::string model;   // the evaluated model's directory
  std::string tokens;  // "sampled 16:128 seed 0", a file
  uint64_t positions = 0;
  double reference_perplexity = 0;
  // Not the planned model (the bundled stories260K-hf for a 70B preset):
  // its outputs then stand in for the planned model's.
  bool proxy = false;
  std::string proxy_reason;
};

// lowp plan --mix, on one device: lowp mix's assignment for what the device
// leaves beside the job (filled in by api::PlanJob; mix/budget.h).
struct PlanMix {
  Device device;
  // For the planned model's matrices (the embedding, the linear layers,
  // lm_head unless tied): what the device leaves beside the KV cache,
  // workspace, buffers and the other weights, at most their float32 bytes,
  // as bytes and as bits per weight over them.
  int64_t budget_bytes = 0;
  double budget_bits_per_weight = 0;
  int64_t other_bytes = 0;         // the rest of the job on the device
  int64_t other_weight_bytes = 0;  // of which the norms and biases
  int64_t capacity_bytes = 0;
  // False when the budget is below the smallest mix of the types (`reason`).
  bool possible = true;
  std::string reason;
  // The mix allocated on the evaluated model at the budget's bits per
  // weight: its bits per weight, predicted KL, and measured outputs.
  double bits_per_weight = 0;
  double predicted_kl = 0;
  std::optional<PlanCandidate::EndToEnd> end_to_end;
  std::string weights_option;  // as eval --weights takes it, the evaluated model's names
  // The planned model at the mix's bits per weight: weight bytes (matrices
  // and the other weights) and the most loaded device's bytes.
  int64_t weight_bytes = 0;
  int64_t per_device_bytes = 0;
};

struct PlanMixes {
  std::string model;  // the model the mix was measured on (the evaluated one)
  std::vector<std::string> types;
  std::string tune_tokens;
  uint64_t tune_positions = 0;
  std::string sensitivity;  // "predicted" or "exact" (mix/sensitivity.h)
  int64_t candidates_measured = 0;
  std::vector<PlanMix> devices;  // in PlanOptions::devices order
};

// lowp plan --kv A,B,...: each candidate weight format with each KV cache
// format, the job sized on every device (the longest context at the job's
// batch, the most sequences at its seq: PlanFit's report), and, measured on
// the evaluated model at the longest context it allows (api::PlanJob), each
// pair's KL and each KV format's alone (float32 weights); the Pareto front
// over the pairs' bytes (weights and the job's KV cache) and KL.
struct PlanKvFormat {
  std::string format;
  int64_t kv_cache_bytes = 0;  // the job's, on the planned model
  std::optional<PlanCandidate::EndToEnd> end_to_end;  // float32 weights, this cache
};
struct PlanKvStudy {
  std::vector<PlanKvFormat> formats;
  // pairs[w * formats.size() + k]: candidates[w].format with formats[k].
  std::vector<PlanCandidate> pairs;
  // Where the KL was measured (set with it).
  std::string model, tokens;
  int64_t context = 0;  // tokens per sequence
  uint64_t positions = 0;
  double reference_perplexity = 0;
};

struct Plan {
  ModelConfig model;
  std::optional<PlanEval> eval;
  std::optional<PlanMixes> mix;
  std::optional<PlanKvStudy> kv_study;
  PlanOptions options;  // formats filled in, no progress callback
  std::string kv;       // the KV cache's format for every candidate
  PlanSource source;
  std::vector<PlanCandidate> candidates;
};

// InvalidArgument naming the option for an unknown format, no devices, or
// what EstimateMemory rejects; file errors name the file; InvalidArgument
// when the selection matches no floating tensor.
absl::StatusOr<Plan> MakePlan(const ModelConfig& model, const PlanOptions& options);

// The Pareto front of the KV study on its measured KLs (the pairs' `pareto`).
void MarkKvPareto(PlanKvStudy& study);

// Serving and adapters: bf16, fp8_e4m3fn, int8-channel, int4-g128, nf4,
// mxfp4, q4_0. Full training (the weights themselves are updated, so only
// floating casts apply): fp32, bf16, fp16, fp8_e4m3fn.
const std::vector<std::string>& DefaultPlanFormats(Mode mode);

// Sizes within this fraction of each other count as equal for Pareto
// optimality: 0.1%, below what the tables show (fp8's 8 bits per weight
// against int8-channel's 8.003 are the same size).
inline constexpr double kParetoSizeTolerance = 1e-3;

// pareto[i]: no j is at most as large and at least as accurate, and
// strictly better in one: bytes[j] < bytes[i] beyond the tolerance, or about
// the same size with error[j] < error[i]. Equal candidates are both
// optimal. Only finite errors take part: inf or NaN is never optimal and
// dominates nothing.
std::vector<bool> ParetoOptimal(const std::vector<double>& bytes, const std::vector<double>& error);

// A linear layer's weight by its name: ends in "weight"; not an embedding
// or output head (names containing "embed", "embd", "lm_head", "wte", "wpe",
// or the whole name "output.weight"), not a mixture-of-experts router
// ("router", ".gate.weight"), not a vision or audio tower or projector
// ("vision", "visual", "image", "audio", "projector"). Used with rank 2 (3
// for stacked experts) to select the tensors a weight format applies to, as
// the memory model applies it.
bool IsLinearWeightName(absl::string_view name);

}  // namespace lowp

#endif  // LOWP_SIZING_PLAN_H_
