#include "mix/budget.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace lowp {

uint64_t MixMatrixWeights(const ModelConfig& model) {
  uint64_t n = 0;
  for (const TensorSpec& t : InputTensors(model)) {
    if (t.name == "embed_tokens") n += static_cast<uint64_t>(t.parameters());
  }
  for (const TensorSpec& t : LayerTensors(model)) {
    if (t.linear) n += static_cast<uint64_t>(t.parameters()) * static_cast<uint64_t>(model.num_layers);
  }
  for (const TensorSpec& t : OutputTensors(model)) {
    if (t.component == Component::kLmHead) n += static_cast<uint64_t>(t.parameters());
  }
  return n;
}

absl::StatusOr<DeviceBudget> BudgetOnDevice(const ModelConfig& model, uint64_t matrix_weights,
                                            const Device& device, SizingOptions sizing) {
  sizing.mode = Mode::kInference;
  sizing.weights = "fp32";
  sizing.embed = "fp32";
  // llama.cpp's default KV cache type; the embeddings' format would be
  // float32 here.
  if (sizing.kv.empty()) sizing.kv = "fp16";
  sizing.dp = sizing.tp = sizing.pp = 1;
  absl::StatusOr<SizingReport> report = EstimateMemory(model, sizing, device);
  if (!report.ok()) return report.status();
  const Bytes& b = report->per_device;
  const int64_t matrices = 4 * static_cast<int64_t>(matrix_weights);
  if (matrix_weights > (uint64_t{1} << 60) || matrices > b.weights) {
    return absl::InvalidArgumentError(
        absl::StrCat("the matrices' ", matrix_weights, " weights are more than the model's ",
                     b.weights / 4, " (", model.name, ")"));
  }
  DeviceBudget out;
  out.device = device;
  out.sizing = report->options;
  out.capacity_bytes = report->capacity_bytes;
  out.other_bytes = b.total() - matrices;
  out.kv_cache_bytes = b.kv_cache;
  out.other_weight_bytes = b.weights - matrices;
  out.matrices_bytes = out.capacity_bytes - out.other_bytes;
  out.budget_bytes = static_cast<uint64_t>(std::clamp<int64_t>(out.matrices_bytes, 0, matrices));
  return out;
}

}  // namespace lowp
