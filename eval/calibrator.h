// GPTQ, AWQ and SmoothQuant inside the layer stream: a calibrated variant's matrices quantized
// layer by layer from the inputs the variant's own quantized layers before
// them produce on calibration tokens, as GPTQ's reference implementation
// does (sequentially, sub-layer by sub-layer).
//
// The calibrator keeps the calibration tokens' hidden state at the variant's
// current layer: one more stream, [calibration tokens, hidden_size] float32
// in memory (the layer's scratch is freed after each layer). For GPTQ it runs
// layer L once on that state: as the run reaches each stage whose matrices it
// calibrates (q, k and v; o; gate and up; down, in the order the layer
// computes them), the stage's input Hessian (calib/hessian.h) is gathered
// over every calibration row and GPTQ (calib/gptq.h) quantizes the stage's
// matrices before the run multiplies by them, so every stage sees the inputs
// the quantized stages before it give, and the run leaves the state at layer
// L + 1. AWQ and SmoothQuant run the layer twice: once for every input's
// statistics, once with the folded, quantized layer. The calibration runs
// the float32 forward pass without the candidate's other emulation
// (activations, KV cache, compute): the weights are chosen for the inputs
// the quantized weights give.
#ifndef LOWP_EVAL_CALIBRATOR_H_
#define LOWP_EVAL_CALIBRATOR_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/batch.h"
#include "model/checkpoint.h"
#include "model/forward.h"
#include "model/weights.h"
#include "quant/calibration.h"
#include "quant/scheme.h"

namespace lowp {

// The calibration tokens: [sequences, length] row-major.
struct CalibrationTokens {
  std::vector<int32_t> ids;
  int64_t length = 0;
  std::string source;  // where they came from, for reports
};

class LayerCalibrator {
 public:
  LayerCalibrator(const Checkpoint& reference, std::shared_ptr<const CalibrationTokens> tokens);

  // A matrix of the layer to calibrate: its entry in LayerWeights::Matrices
  // order, the scheme it gets (a recipe's choice made) and how.
  struct Target {
    size_t entry = 0;
    const Scheme* scheme = nullptr;
    Calibration calibration;
  };

  // Starts over at layer 0: the tokens' embedding rows from `embed` (the
  // variant's table, or the reference's), scaled as the model scales them.
  absl::Status Start(
      const std::function<absl::Status(std::span<const int32_t>, std::span<float>)>& embed,
      int threads);

  // Layer `layer` (the one after the last, from 0 after Start): `w` holds
  // the layer as the variant stores it but for the targets' matrices, which
  // are the reference's; each target's matrix is quantized and its view set
  // to `storage`'s buffer `entry`. Then moves the state past the layer.
  // InvalidArgument naming the matrix for what GPTQ refuses (a scheme it
  // cannot round, a mixture of experts' matrices).
  absl::Status Layer(int64_t layer, LayerWeights& w, std::span<const Target> targets,
                     LayerStorage& storage, int threads);

  int64_t rows() const { return static_cast<int64_t>(tokens_->ids.size()); }

  // After Layer: target k's effective weight when it differs from what is
  // stored (AWQ: the stored values with the scales undone), else empty.
  std::span<const float> Effective(size_t k) const {
    return k < effective_.size() ? std::span<const float>(effective_[k]) : std::span<const float>();
  }

 private:
  absl::Status Run(int64_t layer, const LayerWeights& w, std::span<float> hidden,
                   LinearInputs* inputs, int threads);
  // AWQ's layer: one run of the layer as it stands for every input's
  // statistics, each group's scales searched, folded, the targets stored.
  absl::Status Awq(int64_t layer, LayerWeights& w, std::span<const Target> targets,
                   LayerStorage& storage, int threads);
  // Frees what a layer's runs used beside the hidden state: between layers
  // a calibrator holds [calibration tokens, hidden_size] float32 and no
  // more, however many calibrated candidates a round runs (lowp mix's
  // sensitivity sweep runs up to 64).
  void ReleaseScratch();

  const Checkpoint& reference_;
  std::shared_ptr<const CalibrationTokens> tokens_;
  Batch batch_;
  std::vector<float> hidden_, scratch_;
  std::vector<LayerKv> kv_;
  ForwardBuffers buffers_;
  int64_t next_layer_ = -1;  // -1: not started
  std::vector<std::vector<float>> effective_;
};

}  // namespace lowp

#endif  // LOWP_EVAL_CALIBRATOR_H_
