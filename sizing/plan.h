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
#include "sizing/model.h"

namespace lowp {

struct PlanOptions {
  // The job; `sizing.weights` is ignored (each candidate sets it).
  SizingOptions sizing;
  // Candidate weight formats, any name `lowp schemes` accepts; empty takes
  // DefaultPlanFormats().
  std::vector<std::string> formats;
  // At least one; each candidate is sized on each.
  std::vector<Device> devices;

  // Tensor files the accuracy is measured on (.safetensors, a sharded
  // checkpoint's index, .npy); empty takes BundledCheckpoint().
  std::vector<std::string> tensor_files;
  // Comma-separated globs on tensor names; empty selects the linear weights
  // (IsLinearWeightName on every floating tensor of rank 2).
  std::string select;
  MeasureOptions measure;
  // Called before each tensor is measured: (tensors done, tensors in all,
  // name). Never called from more than one thread at a time.
  std::function<void(size_t, size_t, const std::string&)> progress;
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
  // pipeline stage, the other options as given.
  bool possible = true;
  std::string reason;
  SizingReport report;  // on the layout of PlanOptions::sizing
  // When the report does not fit: that smallest share, per device.
  int64_t smallest_share_tp = 0, smallest_share_pp = 0, smallest_share_bytes = 0;
};

struct PlanCandidate {
  std::string format;
  // Of the model, from the memory model (device-independent): bits per
  // parameter of the linear layers and over all parameters, scales and zero
  // points included; the whole model's weight bytes.
  double linear_bits_per_parameter = 0;
  double weight_bits_per_parameter = 0;
  int64_t weight_bytes = 0;
  double saving_vs_bf16 = 0;  // 1 - weight_bytes / weight_bytes(bf16)

  // Over the measured tensors ("(all)" as quant-error reports it).
  QuantReport error;
  double sqnr_db() const { return error.sqnr_db(); }
  // ||q - x|| / ||x|| = 10^(-sqnr_db / 20).
  double relative_rmse() const;
  // Clipped elements over the elements measured.
  double clipped_fraction() const;

  // No other candidate has weight_bytes <= and sqnr_db >= this one's with
  // one of them strict.
  bool pareto = false;
  std::vector<PlanFit> fits;  // one per device, in PlanOptions order
};

struct Plan {
  ModelConfig model;
  PlanOptions options;  // formats filled in; sizing as given
  PlanSource source;
  std::vector<PlanCandidate> candidates;
};

// InvalidArgument naming the option for an unknown format, no devices, or
// what EstimateMemory rejects; file errors name the file; InvalidArgument
// when the selection matches no floating tensor.
absl::StatusOr<Plan> MakePlan(const ModelConfig& model, const PlanOptions& options);

// bf16, fp8_e4m3fn, int8-channel, int4-g128, nf4, mxfp4, q4_0.
const std::vector<std::string>& DefaultPlanFormats();

// pareto[i]: no j with bytes[j] <= bytes[i] and error[j] <= error[i], one of
// them strict. Equal candidates are both optimal. NaN errors are never
// optimal and dominate nothing.
std::vector<bool> ParetoOptimal(const std::vector<double>& bytes, const std::vector<double>& error);

// A linear layer's weight by its name: not an embedding or output head
// (names containing "embed", "embd", "lm_head", "wte", "wpe", or the whole
// name "output.weight") and not a mixture-of-experts router (".gate.weight",
// "router"). Used with rank 2 to select the tensors a weight format applies
// to, as the memory model applies it.
bool IsLinearWeightName(absl::string_view name);

// The bundled checkpoint (stories260K in float32): $LOWP_DATA_DIR if set,
// else the installed copy (share/lowp), else the source tree's.
// NotFound naming the places looked in.
absl::StatusOr<std::string> BundledCheckpoint();

}  // namespace lowp

#endif  // LOWP_SIZING_PLAN_H_
