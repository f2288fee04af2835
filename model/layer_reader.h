// A checkpoint's decoder layers for a run that passes over the model once or
// many times (the evaluator's batches, the sampler's steps): kept in memory
// once read when the whole model is small, otherwise read into one set of
// buffers each time, the file's pages dropped as they are read.
#ifndef LOWP_MODEL_LAYER_READER_H_
#define LOWP_MODEL_LAYER_READER_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "model/checkpoint.h"
#include "model/weights.h"

namespace lowp {

// Models whose layers take at most this many float32 bytes stay in memory.
constexpr uint64_t kResidentLayerBytes = uint64_t{256} << 20;

class LayerReader {
 public:
  // Resident when the layers' float32 bytes are at most `resident_bytes`.
  // With `experts_later`, layers with experts leave them to be read one at
  // a time; with `matrices_later`, every matrix (Checkpoint::ReadLayer).
  explicit LayerReader(const Checkpoint& checkpoint, uint64_t resident_bytes = kResidentLayerBytes,
                       bool experts_later = false, bool matrices_later = false);

  bool resident() const { return resident_; }

  // Layer `layer`'s weights, read on `threads` threads (or kept from an
  // earlier pass); valid until the next call unless resident. The file's
  // pages are dropped as they are read, kept in the page cache when `again`
  // (another pass follows and the layers are not resident).
  absl::StatusOr<const LayerWeights*> Layer(int64_t layer, int threads, bool again);

  // The final norm's weight, read once.
  absl::StatusOr<std::span<const float>> FinalNorm();

 private:
  const Checkpoint& checkpoint_;
  bool resident_;
  bool experts_later_;
  bool matrices_later_;
  std::vector<LayerStorage> storage_;  // one per layer when resident, else one
  std::vector<LayerWeights> layers_;
  std::vector<bool> read_;
  std::vector<float> final_norm_;
  bool final_norm_read_ = false;
};

}  // namespace lowp

#endif  // LOWP_MODEL_LAYER_READER_H_
