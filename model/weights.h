// The weights of one decoder layer as the forward pass reads them: float32
// views, by their Hugging Face names, over buffers a LayerStorage owns (a
// checkpoint reads a layer into one, model/checkpoint.h; a candidate's
// quantized copy is another, eval/variant.h). Views let a candidate share
// the reference's tensors it leaves alone.
#ifndef LOWP_MODEL_WEIGHTS_H_
#define LOWP_MODEL_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "model/config.h"
#include "quant/calibration.h"
#include "quant/scheme.h"

namespace lowp {

// A matrix [rows, cols] = [out_features, in_features], row-major, and the
// bias of a linear layer (empty when it has none).
struct Matrix {
  std::string name;  // the Hugging Face name: "model.layers.3.self_attn.q_proj.weight"
  int64_t rows = 0;
  int64_t cols = 0;
  std::span<const float> values;
  std::span<const float> bias;
  // The llama.cpp type the values are stored in, as llama.cpp's CPU backend
  // would multiply them (what --activations ggml quantizes the input for):
  // a GGUF tensor's type, F32/F16/BF16 for a tensor of that dtype, a rule's
  // llama.cpp type (Scheme::GgmlLayout); null for any other.
  const ggml::TypeInfo* stored_type = nullptr;
};

struct Expert {
  Matrix gate, up, down;  // Mixtral's w1, w3, w2
};

class ExpertSource;
class MatrixSource;
template <class T>
class LoadedPool;  // model/expert_pool.h
struct LoadedExpert;
struct LoadedMatrix;

struct LayerWeights {
  // input_layernorm, post_attention_layernorm and (Gemma 2)
  // pre_feedforward_layernorm, post_feedforward_layernorm.
  std::span<const float> input_norm, post_attention_norm, pre_feedforward_norm,
      post_feedforward_norm;
  Matrix q, k, v, o;
  std::span<const float> q_norm, k_norm;  // Qwen3
  std::span<const float> sinks;           // gpt-oss: one logit per head
  // DeepSeek-V3's latent attention (ModelConfig::kv_lora_rank): q_a, its
  // norm and q_b (or q alone), kv_a, its norm and kv_b.
  Matrix q_a, q_b, kv_a, kv_b;
  std::span<const float> q_a_norm, kv_a_norm;
  std::span<const float> score_bias;  // DeepSeek-V3: the router's e_score_correction_bias
  Matrix gate, up, down;                  // a dense MLP
  Matrix router;  // [experts, hidden_size] (gpt-oss: with a bias)
  std::vector<Expert> experts;
  // Qwen2-MoE: an expert every token takes, its output times
  // sigmoid(shared_expert_gate x) ([1, hidden_size]); rows 0 when none.
  Expert shared;
  Matrix shared_gate;
  // Set when the routed experts are read one at a time: `experts` then
  // holds their names and shapes with no values, and the forward pass loads
  // each expert some row routes to from here, once per ForwardLayer call,
  // and lets it go before the next.
  std::shared_ptr<const ExpertSource> expert_source;
  // Set when the layer's other matrices are read one at a time too: those
  // with no values are loaded from here where the forward pass multiplies
  // by them, and let go after.
  std::shared_ptr<const MatrixSource> matrix_source;

  // The layer's matrices in checkpoint order (q, k, v, o, then gate, up,
  // down or the router, each expert's w1, w3, w2 and the shared expert's
  // gate, up, down and its gate). `linear` marks the linear layers (what a
  // weight scheme without a pattern applies to: not the routers).
  struct Entry {
    Matrix* matrix;
    bool linear;
  };
  std::vector<Entry> Matrices(const ModelConfig& config);
};

// The float32 buffers behind a layer's views, one per tensor, kept between
// layers so that reading the next layer reuses their memory (no page is
// faulted in and zeroed again).
struct LayerStorage {
  std::vector<std::vector<float>> buffers;
  // When set, a variant also keeps the stored form of each matrix it
  // quantizes (what a checkpoint of the variant holds): stored[index] for
  // buffer `index`, its `bytes` for a type with a llama.cpp layout
  // (Scheme::GgmlLayout), its scales, zero points, tensor scale and column
  // order for a scheme with a CodeLayout (Scheme::Codes); codes are never
  // kept (they follow from the values and these). Empty for a matrix it
  // left as it was.
  bool keep_stored = false;
  // Set by a caller that reads no values of the matrices a variant
  // quantizes (a writer of their bytes, a report of their statistics): the
  // variant may then leave those values as the reference's (it does unless
  // it needs them itself: a calibrating variant runs the layer on them),
  // saving a layer's float32 copy.
  bool values_unused = false;
  std::vector<StoredChunk> stored;
  // The buffers of matrices and experts read one at a time for the layers
  // this storage serves (model/expert_pool.h): each load reuses one let go
  // before, whichever layer or candidate it served.
  std::shared_ptr<LoadedPool<LoadedExpert>> expert_pool;
  std::shared_ptr<LoadedPool<LoadedMatrix>> matrix_pool;

  // Buffer `index` resized to `size` (never shrunk).
  std::span<float> Buffer(size_t index, size_t size);
  // Stored form `index`, emptied.
  StoredChunk& Stored(size_t index);
};

// One expert's matrices with the buffers behind them.
struct LoadedExpert {
  Expert matrices;
  LayerStorage storage;
  // The expert whose buffers the matrices left as they were still view (a
  // candidate's expert made from the reference's).
  std::shared_ptr<const LoadedExpert> from;
};

// Where a layer's experts come from one at a time (LayerWeights::
// expert_source): a checkpoint, or a candidate made from another source.
// Load may be called from several threads at once; each call returns its
// own copy.
class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  virtual absl::StatusOr<std::shared_ptr<const LoadedExpert>> Load(int64_t expert,
                                                                   int threads) const = 0;
};

// One matrix with the buffer behind it (its bias a view into the layer's).
struct LoadedMatrix {
  Matrix matrix;
  LayerStorage storage;
};

// Where a layer's matrices come from one at a time (LayerWeights::
// matrix_source); Load may be called from several threads at once.
class MatrixSource {
 public:
  virtual ~MatrixSource() = default;
  // `m` (its name, shape and bias as the layer has them) with its values.
  virtual absl::StatusOr<std::shared_ptr<const LoadedMatrix>> Load(const Matrix& m,
                                                                   int threads) const = 0;
};

// Whether `name` is a router's matrix (Mixtral's block_sparse_moe.gate, the
// Qwen MoEs' mlp.gate and mlp.shared_expert_gate, gpt-oss's mlp.router): in a decoder layer but
// no linear layer a scheme without a pattern takes (LayerWeights::Entry).
bool IsRouter(absl::string_view name);

// The architectures the forward pass runs (model_type), for messages.
std::string ForwardModelTypes();

// Checks that the forward pass implements what `config` asks for: its
// model_type, activation, rope_scaling type. InvalidArgument naming the field
// and listing what is supported.
absl::Status CheckForwardSupport(const ModelConfig& config);

// Which scheme each matrix gets. A rule with an empty pattern applies to the
// linear layers (a recipe without a pattern to every matrix: it is a
// whole-model mix); otherwise to every matrix whose name matches the
// pattern (MatchesPattern globs: the embedding and lm_head included). The
// first rule that applies wins; a rule with no scheme keeps the matrix as it
// is, and so does a matrix no rule takes.
struct WeightRule {
  std::string pattern;
  std::shared_ptr<const Scheme> scheme;
  // How the scheme's codes are chosen: as the scheme chooses them, or
  // calibrated on the layer's inputs (":gptq"; eval/ runs it).
  Calibration calibration;
};

// The rule that takes matrix `name` (linear: a decoder layer's linear
// layer), or null.
const WeightRule* RuleFor(std::span<const WeightRule> rules, const std::string& name, bool linear);

}  // namespace lowp

#endif  // LOWP_MODEL_WEIGHTS_H_
