#include "model/layer_reader.h"

namespace lowp {

LayerReader::LayerReader(const Checkpoint& checkpoint, uint64_t resident_bytes,
                         bool experts_later, bool matrices_later)
    : checkpoint_(checkpoint), experts_later_(experts_later), matrices_later_(matrices_later) {
  const int64_t layers = checkpoint.config().num_layers;
  resident_ = checkpoint.LayerBytes() * static_cast<uint64_t>(layers) <= resident_bytes;
  storage_.resize(resident_ ? static_cast<size_t>(layers) : 1);
  layers_.resize(storage_.size());
  read_.assign(storage_.size(), false);
}

absl::StatusOr<const LayerWeights*> LayerReader::Layer(int64_t layer, int threads, bool again) {
  const size_t slot = resident_ ? static_cast<size_t>(layer) : 0;
  if (resident_ && read_[slot]) return &layers_[slot];
  // A resident layer is never read again.
  absl::StatusOr<LayerWeights> w =
      checkpoint_.ReadLayer(layer, storage_[slot], threads, again && !resident_, experts_later_,
                            matrices_later_);
  if (!w.ok()) return w.status();
  layers_[slot] = *std::move(w);
  read_[slot] = true;
  return &layers_[slot];
}

absl::StatusOr<std::span<const float>> LayerReader::FinalNorm() {
  if (!final_norm_read_) {
    if (absl::Status s = checkpoint_.ReadFinalNorm(final_norm_); !s.ok()) return s;
    final_norm_read_ = true;
  }
  return std::span<const float>(final_norm_);
}

}  // namespace lowp
