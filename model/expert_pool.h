// Reused LoadedExpert objects for an ExpertSource (model/weights.h): loading
// expert after expert into fresh buffers zeroed and faulted in a new
// expert's memory each time (half the time of a DeepSeek-V3-shaped layer);
// a pool hands back the buffers of an expert no one holds any more.
#ifndef LOWP_MODEL_EXPERT_POOL_H_
#define LOWP_MODEL_EXPERT_POOL_H_

#include <memory>
#include <mutex>
#include <vector>

#include "model/weights.h"

namespace lowp {

class ExpertPool : public std::enable_shared_from_this<ExpertPool> {
 public:
  static std::shared_ptr<ExpertPool> Make() { return std::shared_ptr<ExpertPool>(new ExpertPool); }

  // An expert with no matrices and the buffers of one released before (or
  // none); back in the pool when its last holder lets it go.
  std::shared_ptr<LoadedExpert> Get() {
    LoadedExpert* expert = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        expert = free_.back().release();
        free_.pop_back();
      }
    }
    if (expert == nullptr) expert = new LoadedExpert;
    return std::shared_ptr<LoadedExpert>(expert, [pool = shared_from_this()](LoadedExpert* e) {
      e->matrices = Expert();
      e->from.reset();
      std::lock_guard<std::mutex> lock(pool->mutex_);
      pool->free_.emplace_back(e);
    });
  }

 private:
  ExpertPool() = default;
  std::mutex mutex_;
  std::vector<std::unique_ptr<LoadedExpert>> free_;
};

}  // namespace lowp

#endif  // LOWP_MODEL_EXPERT_POOL_H_
