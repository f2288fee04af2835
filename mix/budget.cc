#include "mix/budget.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "formats/option_error.h"

namespace lowp {

uint64_t MixMatrixWeights(const ModelConfig& model) {
  uint64_t n = 0;
  for (const TensorSpec& t : InputTensors(model)) {
    if (t.name == "embed_tokens") n += static_cast<uint64_t>(t.parameters());
  }
  for (const LayerKind& kind : LayerKinds(model)) {
    for (const TensorSpec& t : kind.tensors) {
      if (t.linear) n += static_cast<uint64_t>(t.parameters()) * kind.layers.size();
    }
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

double BitsPerWeight(uint64_t bytes, uint64_t weights) {
  return 8 * static_cast<double>(bytes) / static_cast<double>(weights);
}

uint64_t BudgetBytes(double bits_per_weight, uint64_t weights) {
  return static_cast<uint64_t>(std::floor(bits_per_weight * static_cast<double>(weights) / 8));
}

uint64_t StoredBytes(double bits_per_weight, uint64_t weights) {
  return static_cast<uint64_t>(std::ceil(bits_per_weight * static_cast<double>(weights) / 8));
}

absl::Status CheckMixBudget(const MixBudgetOptions& o) {
  if (o.bits_per_weight.has_value() + o.bytes.has_value() + !o.device.empty() != 1) {
    return OptionError("bits_per_weight",
                       "give the budget as bits per weight, as bytes or as a device (one)");
  }
  if (o.bits_per_weight && !(*o.bits_per_weight > 0 && std::isfinite(*o.bits_per_weight))) {
    return OptionError("bits_per_weight", absl::StrCat(*o.bits_per_weight, " is not a budget"));
  }
  if (o.bytes && *o.bytes == 0) return OptionError("bytes", "0 is not a budget");
  return absl::OkStatus();
}

absl::StatusOr<MixBudget> ResolveMixBudget(const MixBudgetOptions& o, const ModelConfig& model,
                                           uint64_t weights, uint64_t smallest) {
  MixBudget b;
  b.field = o.bytes ? "bytes" : !o.device.empty() ? "device" : "bits_per_weight";
  if (o.bits_per_weight.value_or(0) > 32 || o.bytes.value_or(0) > 4 * weights) {
    return OptionError(b.field, absl::StrCat("is above float32 (", 4 * weights,
                                             " bytes for these ", weights, " weights)"));
  }
  if (!o.device.empty()) {
    absl::StatusOr<Device> device = FindDevice(o.device);
    if (!device.ok()) return OptionError("device", device.status().message());
    absl::StatusOr<DeviceBudget> budget = BudgetOnDevice(model, weights, *device, o.job);
    if (!budget.ok()) return budget.status();
    b.device = *budget;
    b.bytes = budget->budget_bytes;
  } else {
    b.bytes = o.bytes ? *o.bytes : BudgetBytes(*o.bits_per_weight, weights);
  }
  if (b.bytes < smallest) {
    const std::string beside =
        b.device ? absl::StrCat(b.device->device.name,
                                b.device->matrices_bytes > 0
                                    ? absl::StrCat(" leaves ", b.device->matrices_bytes, " bytes")
                                    : std::string(" has no room"),
                                " beside the job's ", b.device->other_bytes, " (KV cache ",
                                b.device->kv_cache_bytes, "): ")
                 : "";
    return OptionError(b.field, absl::StrCat(beside, b.bytes, " bytes (",
                                             BitsPerWeight(b.bytes, weights),
                                             " bits per weight) is below the smallest mix of "
                                             "these types, ",
                                             smallest, " bytes (", BitsPerWeight(smallest, weights),
                                             ")"));
  }
  return b;
}

}  // namespace lowp
