// The memory model: what each device holds to train or serve a model, by
// component, each component in its own format; how many devices that takes;
// the longest context and largest batch that fit; the decode speed bound.
//
// Every count is exact bytes. A component's format is any name `lowp
// schemes` accepts: a catalog format (fp32, bf16, fp8_e4m3fn) costs its bits
// per value; a quantization scheme (int4-g128, nf4, mxfp4, q4_0) costs what
// Scheme::StorageBits says for each tensor's shape on each device, scales and
// zero points included. The conventions (what is counted, where the peers
// differ) are in docs/sizing.md.
#ifndef LOWP_SIZING_MEMORY_H_
#define LOWP_SIZING_MEMORY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "sizing/devices.h"
#include "model/config.h"

namespace lowp {

enum class Mode { kPretrain, kFinetune, kLora, kQlora, kInference };

// The searches for the longest sequence and largest batch stop here.
inline constexpr int64_t kSizingMaxSeq = int64_t{1} << 24;
inline constexpr int64_t kSizingMaxBatch = int64_t{1} << 20;
enum class Optimizer { kAdamW, kAdamW8bit, kSgd, kAdafactor };
enum class Recompute { kNone, kSelective, kFull };

absl::StatusOr<Mode> ParseMode(absl::string_view name);
absl::StatusOr<Optimizer> ParseOptimizer(absl::string_view name);
absl::StatusOr<Recompute> ParseRecompute(absl::string_view name);
absl::string_view ModeName(Mode mode);
absl::string_view OptimizerName(Optimizer optimizer);
absl::string_view RecomputeName(Recompute recompute);

struct SizingOptions {
  Mode mode = Mode::kPretrain;

  // Formats. Empty means the mode's default (docs/sizing.md):
  //   weights     linear layers of the decoder: bf16; qlora: nf4
  //   embed       embeddings, lm_head, norms, biases, router: the weights'
  //               format when it is a 16- or 32-bit float cast, else bf16
  //   grads       the weights' format when training them; adapters: bf16
  //   master      fp32 when the trained weights are narrower, "none" to drop
  //   opt_state   fp32 (the moments of AdamW, SGD's momentum, Adafactor's
  //               factors); 8-bit Adam fixes its own
  //   kv          the embeddings' format (the model's dtype)
  std::string weights, embed, grads, master, opt_state, kv;
  Optimizer optimizer = Optimizer::kAdamW;
  // Bytes per activation value in the training graph (2 for bf16/fp16
  // activations, Korthikanti's assumption; 4 for fp32).
  int activation_bytes = 2;

  int64_t seq = 4096;  // tokens per sequence (context length for inference)
  int64_t batch = 1;   // micro-batch per data-parallel rank; concurrent sequences for inference

  int64_t dp = 1, tp = 1, pp = 1;
  int zero = 0;                    // ZeRO stage 0-3 across the dp ranks
  bool sequence_parallel = false;  // Megatron's sequence parallelism (with tp)
  Recompute recompute = Recompute::kNone;
  bool flash_attention = true;     // no s x s attention scores are stored
  bool offload_optimizer = false;  // master weights and optimizer states in host memory

  int64_t lora_rank = 16;
  // Linear layers that get adapters, by TensorSpec::lora_name; empty = all.
  std::vector<std::string> lora_targets;

  // Inference: tokens processed in one forward pass during prefill (chunked
  // prefill); 0 = min(seq * batch, 8192) for each seq and batch estimated
  // (the report's options give the value at the requested ones).
  int64_t prefill_tokens = 0;

  int64_t buffers_bytes = 2'000'000'000;  // per device: CUDA context, NCCL, allocator
  double headroom = 0;                    // fraction of each device's memory kept free
};

// Bytes by component.
struct Bytes {
  int64_t weights = 0;  // parameters as stored (frozen base included)
  int64_t gradients = 0;
  int64_t master = 0;       // high-precision copy of the trained weights
  int64_t optimizer = 0;    // optimizer states
  int64_t activations = 0;  // kept for the backward pass; inference: the forward workspace
  int64_t kv_cache = 0;
  // ZeRO-3's largest gathered unit with its gradient, QLoRA's dequantized
  // linear, full recomputation's rebuilt layer.
  int64_t workspace = 0;
  int64_t buffers = 0;

  int64_t total() const {
    return weights + gradients + master + optimizer + activations + kv_cache + workspace + buffers;
  }
  int64_t model_states() const { return weights + gradients + master + optimizer; }
};

struct SizingReport {
  ModelConfig model;
  SizingOptions options;  // with every default filled in
  Device device;
  ParameterCounts parameters;
  int64_t trainable_parameters = 0;  // 0 for inference
  // Bits per parameter of the weights as stored, over all of the model's
  // parameters and over the linear layers alone.
  double weight_bits_per_parameter = 0;
  double linear_bits_per_parameter = 0;

  // The whole job on one imaginary device (no parallelism, no buffers): the
  // model's states once, the activations of one micro-batch, the KV cache.
  Bytes whole;
  // The most loaded device of the given layout (dp x tp x pp devices).
  Bytes per_device;
  int pipeline_stage = 0;             // the stage that device belongs to, from 0
  int64_t host_bytes_per_device = 0;  // offloaded states kept in host memory
  int64_t capacity_bytes = 0;         // floor(memory * (1 - headroom)), per device
  int64_t usable_bytes = 0;           // capacity_bytes - buffers
  bool fits = false;                  // per_device.total() <= capacity_bytes

  int64_t devices_in_layout = 1;  // dp * tp * pp
  // Lower bounds with everything divided evenly among devices. The first
  // counts the model states alone over the capacity (the seeds' count: no
  // activations, no buffers), ceil(whole.model_states() / capacity_bytes);
  // the second the whole job over what its buffers leave,
  // ceil(whole.total() / usable_bytes).
  double devices_for_states_exact = 0;
  int64_t devices_for_states = 0;
  double devices_needed_exact = 0;
  int64_t devices_needed = 0;

  // On the given layout: the longest seq at the given batch and the largest
  // batch at the given seq that fit (0 when none does; capped at
  // max_position_embeddings for seq when known, and at 2^20 for batch).
  int64_t max_seq = 0;
  int64_t max_batch = 0;

  // Inference: an upper bound on decode speed from memory bandwidth. One
  // step reads every weight and the whole KV cache at `seq` tokens once per
  // device; pipeline stages run one after the other. 0 without bandwidth.
  int64_t bytes_read_per_step = 0;  // on the devices of one pipeline path
  double decode_tokens_per_s_per_sequence = 0;
  double decode_tokens_per_s = 0;  // all `batch` sequences
};

// Computes the report. InvalidArgument naming the option for unknown formats
// or absurd values (zero or negative sizes, tp not dividing the heads, pp
// above the layers, ZeRO stage above 3, headroom outside [0, 1)).
absl::StatusOr<SizingReport> EstimateMemory(const ModelConfig& model, const SizingOptions& options,
                                            const Device& device);

// One row of `lowp size --compare-formats`: the same job with the linear
// weights in `format`.
struct FormatRow {
  std::string format;
  double linear_bits_per_parameter = 0;
  int64_t weight_bytes = 0;   // whole model
  double saving_vs_bf16 = 0;  // 1 - weight_bytes / weight_bytes(bf16)
  int64_t per_device_bytes = 0;
  bool fits = false;
  int64_t devices_needed = 0;
  int64_t max_seq = 0;
  double decode_tokens_per_s_per_sequence = 0;
};
absl::StatusOr<std::vector<FormatRow>> CompareFormats(const ModelConfig& model,
                                                      const SizingOptions& options,
                                                      const Device& device,
                                                      const std::vector<std::string>& formats);
// fp32, bf16, fp8_e4m3fn, int8-channel, int4-g128, nf4, mxfp4, q4_0.
const std::vector<std::string>& DefaultCompareFormats();

}  // namespace lowp

#endif  // LOWP_SIZING_MEMORY_H_
