// `lowp mix --device D`: the bytes a device leaves for a model's matrices
// when it serves the model. The memory model (sizing/memory.h) prices the
// job on the device for inference, at the given context, batch and KV cache
// format; what is not the mixed matrices (KV cache, forward workspace,
// buffers, the norms and biases at float32) is taken from the device's
// capacity, and the rest is the matrices' budget.
#ifndef LOWP_MIX_BUDGET_H_
#define LOWP_MIX_BUDGET_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "model/config.h"
#include "sizing/devices.h"
#include "sizing/memory.h"

namespace lowp {

struct DeviceBudget {
  Device device;
  SizingOptions sizing;        // the job, every default filled in
  int64_t capacity_bytes = 0;  // the device's memory after headroom
  // Everything the job holds on the device but the matrices: KV cache,
  // activations, workspace, buffers, the other weights at float32.
  int64_t other_bytes = 0;
  int64_t kv_cache_bytes = 0;
  int64_t other_weight_bytes = 0;  // of those, the norms and biases (float32)
  // capacity_bytes - other_bytes: what the matrices may take (can be <= 0).
  int64_t matrices_bytes = 0;
  // Their budget: matrices_bytes, at least 0 and at most their float32 bytes.
  uint64_t budget_bytes = 0;
};

// The elements of the matrices `lowp mix` assigns types to, as a config
// implies them: the token embedding, every decoder layer's linear layers,
// lm_head unless tied (MixGroups of a checkpoint of that config).
uint64_t MixMatrixWeights(const ModelConfig& model);

// `sizing` gives the job (seq, batch, kv, buffers_bytes, headroom; its mode
// and weight formats are set here: inference, float32 weights, so that the
// matrices' share is 4 bytes per weight and taken out exactly);
// `matrix_weights` the elements of the matrices mixed, each stored once.
// InvalidArgument naming the option for what EstimateMemory rejects, or
// when the matrices are more than the model's weights.
absl::StatusOr<DeviceBudget> BudgetOnDevice(const ModelConfig& model, uint64_t matrix_weights,
                                            const Device& device, SizingOptions sizing);

// Bits per weight <-> bytes, as llama.cpp counts a type's bits: storage
// bits over the elements. `BudgetBytes` rounds down (what a budget allows),
// `StoredBytes` up (what a mix at that rate stores).
double BitsPerWeight(uint64_t bytes, uint64_t weights);
uint64_t BudgetBytes(double bits_per_weight, uint64_t weights);
uint64_t StoredBytes(double bits_per_weight, uint64_t weights);

// What a mix must fit, one of: bits per weight over the matrices mixed,
// their bytes, or the device the model is served on (a catalog name or
// NAME:MEMORY) with the job beside the matrices in `job` (seq, batch, kv
// (default fp16), buffers_bytes, headroom).
struct MixBudgetOptions {
  std::optional<double> bits_per_weight;
  std::optional<uint64_t> bytes;
  std::string device;
  SizingOptions job;
};

// The options alone, before any model is read: exactly one given, bits
// per weight finite and above 0. An option error on the field given (on
// bits_per_weight when none or two are).
absl::Status CheckMixBudget(const MixBudgetOptions& options);

struct MixBudget {
  uint64_t bytes = 0;
  std::optional<DeviceBudget> device;  // with MixBudgetOptions::device
  std::string field;                   // the option the budget came from
};
// The budget for the matrices of `model` (`weights` elements, the smallest
// assignment `smallest` bytes): at most their float32 bytes (an error above
// that, not a cap, for bits per weight and bytes) and at least `smallest`.
// Errors name the option given.
absl::StatusOr<MixBudget> ResolveMixBudget(const MixBudgetOptions& options,
                                           const ModelConfig& model, uint64_t weights,
                                           uint64_t smallest);

}  // namespace lowp

#endif  // LOWP_MIX_BUDGET_H_
