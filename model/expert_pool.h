// Reused LoadedExpert and LoadedMatrix objects for the sources of
// model/weights.h: loading expert after expert into fresh buffers zeroed and
// faulted in a new expert's memory each time (half the time of a
// DeepSeek-V3-shaped layer); a pool hands back the buffers of one no one
// holds any more.
#ifndef LOWP_MODEL_EXPERT_POOL_H_
#define LOWP_MODEL_EXPERT_POOL_H_

#include <memory>
#include <mutex>
#include <vector>

#include "model/weights.h"

namespace lowp {

// T: LoadedExpert or LoadedMatrix.
template <class T>
class LoadedPool : public std::enable_shared_from_this<LoadedPool<T>> {
 public:
  static std::shared_ptr<LoadedPool> Make() { return std::shared_ptr<LoadedPool>(new LoadedPool); }

  // One with no matrices and the buffers of one released before (or none);
  // back in the pool when its last holder lets it go.
  std::shared_ptr<T> Get() {
    T* item = nullptr;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        item = free_.back().release();
        free_.pop_back();
      }
    }
    if (item == nullptr) item = new T;
    return std::shared_ptr<T>(item, [pool = this->shared_from_this()](T* t) {
      LayerStorage buffers = std::move(t->storage);
      *t = T();
      t->storage = std::move(buffers);
      std::lock_guard<std::mutex> lock(pool->mutex_);
      pool->free_.emplace_back(t);
    });
  }

 private:
  LoadedPool() = default;
  std::mutex mutex_;
  std::vector<std::unique_ptr<T>> free_;
};

using ExpertPool = LoadedPool<LoadedExpert>;
using MatrixPool = LoadedPool<LoadedMatrix>;

}  // namespace lowp

#endif  // LOWP_MODEL_EXPERT_POOL_H_
