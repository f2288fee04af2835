// The weights of a decoder-only transformer, read from a checkpoint by their
// Hugging Face names and checked against the model's config.json, as float32
// (any floating dtype of the file is read exactly). Tensors are shared, not
// copied, between a model and its emulated variants: QuantizeWeights replaces
// only the matrices it quantizes.
#ifndef LOWP_MODEL_WEIGHTS_H_
#define LOWP_MODEL_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "io/tensor_set.h"
#include "model/config.h"
#include "quant/measure.h"
#include "quant/scheme.h"

namespace lowp {

using Values = std::shared_ptr<const std::vector<float>>;

// A matrix [rows, cols] = [out_features, in_features], row-major, and the
// bias of a linear layer (null when it has none).
struct Matrix {
  std::string name;  // the tensor's name in the checkpoint
  int64_t rows = 0;
  int64_t cols = 0;
  Values values;
  Values bias;
};

struct Expert {
  Matrix gate, up, down;  // Mixtral's w1, w3, w2
};

struct LayerWeights {
  // input_layernorm, post_attention_layernorm and (Gemma 2)
  // pre_feedforward_layernorm, post_feedforward_layernorm.
  Values input_norm, post_attention_norm, pre_feedforward_norm, post_feedforward_norm;
  Matrix q, k, v, o;
  Values q_norm, k_norm;  // Qwen3
  Matrix gate, up, down;  // a dense MLP
  Matrix router;          // Mixtral: [num_local_experts, hidden_size]
  std::vector<Expert> experts;
};

struct ModelWeights {
  ModelConfig config;
  Matrix embed;  // [vocab_size, hidden_size]
  std::vector<LayerWeights> layers;
  Values final_norm;
  Matrix lm_head;  // the embedding's values when tied

  // Every matrix stored in the checkpoint, in file-name order of layers: the
  // embedding, each layer's linear layers (and router), the lm_head unless
  // tied. `linear` is set on the decoder layers' linear layers (what a
  // weight scheme given without a tensor pattern applies to).
  struct Entry {
    Matrix* matrix;
    bool linear;
  };
  std::vector<Entry> Matrices();
};

// The architectures the forward pass runs (model_type), for messages.
std::string ForwardModelTypes();

// Checks that the forward pass implements what `config` asks for: its
// model_type, activation, rope_scaling type. InvalidArgument naming the field
// and listing what is supported.
absl::Status CheckForwardSupport(const ModelConfig& config);

// Reads every tensor the config implies from `set`. A missing tensor, or one
// whose shape contradicts the config, is InvalidArgument naming the tensor,
// its file and the config fields it contradicts; a tensor that is not
// floating is InvalidArgument naming it.
absl::StatusOr<ModelWeights> LoadWeights(const ModelConfig& config, const TensorSet& set);

// Opens a model for the forward pass. `model` is a Hugging Face snapshot
// directory (config.json with model.safetensors.index.json or
// model.safetensors), a config.json, or a preset of ModelPresets; `tensors`
// (checkpoint files) overrides the directory's and is required for the other
// two. A missing part is an option error (formats/option_error.h) on the
// field "model" or "tensors".
absl::StatusOr<ModelWeights> OpenModel(const std::string& model,
                                       const std::vector<std::string>& tensors);

// The checkpoint of a snapshot directory: model.safetensors.index.json, else
// model.safetensors; an option error on "tensors" when it has neither.
absl::StatusOr<std::vector<std::string>> SnapshotCheckpoint(const std::string& dir);

// Which scheme each matrix gets. A rule with an empty pattern applies to the
// linear layers; otherwise to every matrix whose name matches the pattern
// (MatchesPattern globs: the embedding and lm_head included). The first rule
// that applies wins; a matrix no rule takes stays as it is.
struct WeightRule {
  std::string pattern;
  std::shared_ptr<const Scheme> scheme;
};

// What QuantizeWeights did, per matrix and in all.
struct WeightReport {
  std::vector<QuantReport> tensors;
  QuantReport total;  // tensor "(all)", scheme "" when mixed
};

// `weights` with each matrix a rule takes replaced by its dequantized values.
// `threads` as MeasureOptions::threads; the values never depend on it.
absl::StatusOr<ModelWeights> QuantizeWeights(const ModelWeights& weights,
                                             const std::vector<WeightRule>& rules, int threads,
                                             WeightReport* report);

}  // namespace lowp

#endif  // LOWP_MODEL_WEIGHTS_H_
