// Internal to eval/: how the streams of a batch run through a decoder layer.
// The evaluator adds each stream with its weights, then flushes the layer:
//   side by side (small layers, model/forward.h SmallLayer): every stream
//     and every group of sequences at once, one thread each, each with KV
//     caches of its own; what is added runs at the flush, so the streams'
//     weights must live until then (each variant's layer in its own storage);
//   one at a time (large layers): each stream runs as it is added, with
//     every thread on each product, on one set of KV caches; the variants'
//     layers are made one after another in one storage.
// Both give the same values, bit for bit.
#ifndef LOWP_EVAL_SCHEDULE_H_
#define LOWP_EVAL_SCHEDULE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "eval/stream.h"
#include "model/batch.h"
#include "model/forward.h"
#include "model/weights.h"

namespace lowp {

class LayerSchedule {
 public:
  enum class Kind { kSideBySide, kOneAtATime };
  // What a layer of `config` takes: side by side when it is small.
  static Kind For(const ModelConfig& config);

  // For `streams` streams and `variants` weight variants.
  LayerSchedule(Kind kind, const ModelConfig& config, size_t streams, size_t variants,
                int threads);
  Kind kind() const { return kind_; }

  // Before a batch's first layer: its groups and KV caches.
  void Begin(const Batch& batch);
  // Where variant `v`'s layer is made (one storage for all when one at a
  // time).
  LayerStorage& StorageFor(size_t v);
  // Stream `index` (its place among the streams) runs `layer` with
  // `weights`: now, or at the flush.
  absl::Status Add(size_t index, Stream& stream, const LayerWeights& weights, int64_t layer);
  // Runs what waits for `layer`.
  absl::Status Flush(int64_t layer);

 private:
  absl::Status Run(std::vector<LayerTask>& tasks, int64_t layer);

  const Kind kind_;
  const ModelConfig& config_;
  const size_t streams_;
  const int threads_;
  const Batch* batch_ = nullptr;
  std::vector<Batch> groups_;        // side by side: the batch's groups; else the batch
  std::vector<LayerKv> kv_;          // side by side: one per (stream, sequence)
  std::vector<LayerKv*> kv_of_;
  std::vector<LayerTask> waiting_;   // side by side: added since the last flush
  std::vector<LayerStorage> storage_;
  ForwardBuffers buffers_;
};

}  // namespace lowp

#endif  // LOWP_EVAL_SCHEDULE_H_
