#include "eval/schedule.h"

#include <algorithm>

namespace lowp {

LayerSchedule::Kind LayerSchedule::For(const ModelConfig& config) {
  return SmallLayer(config) ? Kind::kSideBySide : Kind::kOneAtATime;
}

LayerSchedule::LayerSchedule(Kind kind, const ModelConfig& config, size_t streams,
                             size_t variants, int threads)
    : kind_(kind),
      config_(config),
      streams_(streams),
      threads_(threads),
      storage_(kind == Kind::kSideBySide ? std::max<size_t>(1, variants) : 1) {}

void LayerSchedule::Begin(const Batch& batch) {
  batch_ = &batch;
  const bool side_by_side = kind_ == Kind::kSideBySide;
  groups_ = side_by_side ? batch.Groups() : std::vector<Batch>{batch};
  kv_.assign(side_by_side ? streams_ * batch.sequences.size() : batch.sequences.size(), LayerKv());
  kv_of_.resize(kv_.size());
  for (size_t i = 0; i < kv_.size(); ++i) kv_of_[i] = &kv_[i];
  waiting_.clear();
}

LayerStorage& LayerSchedule::StorageFor(size_t v) {
  return storage_[kind_ == Kind::kSideBySide ? v : 0];
}

absl::Status LayerSchedule::Add(size_t index, Stream& s, const LayerWeights& weights,
                                int64_t layer) {
  const bool side_by_side = kind_ == Kind::kSideBySide;
  const Batch& batch = *batch_;
  const size_t kv_base = side_by_side ? index * batch.sequences.size() : 0;
  std::vector<LayerTask> tasks;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const int64_t first_sequence = side_by_side ? batch.group_starts[g] : 0;
    const int64_t first_row = batch.sequences[first_sequence].first_row;
    LayerTask t;
    t.weights = &weights;
    t.emulation = &EmulationOf(s);
    t.batch = &groups_[g];
    t.hidden = std::span<float>(s.hidden).subspan(
        static_cast<size_t>(first_row * config_.hidden_size),
        static_cast<size_t>(groups_[g].rows * config_.hidden_size));
    t.kv = std::span<LayerKv* const>(kv_of_).subspan(kv_base + first_sequence,
                                                     groups_[g].sequences.size());
    t.census = &s.census;
    t.inputs = s.inputs;
    if (!s.routes.empty()) {
      const size_t k = static_cast<size_t>(config_.experts_per_token);
      t.routes = std::span<int32_t>(s.routes).subspan(static_cast<size_t>(first_row) * k,
                                                      static_cast<size_t>(groups_[g].rows) * k);
    }
    tasks.push_back(t);
  }
  if (side_by_side) {
    waiting_.insert(waiting_.end(), tasks.begin(), tasks.end());
    return absl::OkStatus();
  }
  return Run(tasks, layer);
}

absl::Status LayerSchedule::Flush(int64_t layer) { return Run(waiting_, layer); }

absl::Status LayerSchedule::Run(std::vector<LayerTask>& tasks, int64_t layer) {
  for (LayerKv& cache : kv_) cache.Clear();
  const absl::Status s = RunLayerTasks(config_, layer, tasks, buffers_, threads_);
  tasks.clear();
  return s;
}

}  // namespace lowp
