#include "kernels/thread_pool.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

namespace lowp {
namespace {

// Workers wait for a job; a job is handed out by generation number, and
// each worker whose index is below the job's width takes indices from a
// shared counter until none are left.
class Pool {
 public:
  // Runs the job if the pool is free; false when it is busy.
  bool TryRun(size_t count, int threads, const std::function<void(size_t)>& body) {
    // A body that calls again (on a worker, or on this thread) runs inline:
    // trying busy_ again from the thread that holds it would be undefined.
    if (inside_) return false;
    std::unique_lock<std::mutex> busy(busy_, std::try_to_lock);
    if (!busy.owns_lock()) return false;
    const int helpers = std::min<int>(threads - 1, static_cast<int>(count) - 1);
    Grow(helpers);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      body_ = &body;
      count_ = count;
      next_.store(0);
      width_ = helpers;
      pending_ = helpers;
      ++generation_;
    }
    wake_.notify_all();
    inside_ = true;
    Work();
    inside_ = false;
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, [&] { return pending_ == 0; });
    body_ = nullptr;
    return true;
  }

 private:
  void Work() {
    for (size_t i = next_.fetch_add(1); i < count_; i = next_.fetch_add(1)) (*body_)(i);
  }

  void Grow(int helpers) {
    while (static_cast<int>(workers_.size()) < helpers) {
      const int index = static_cast<int>(workers_.size());
      workers_.emplace_back([this, index] { Loop(index); });
    }
  }

  void Loop(int index) {
    inside_ = true;
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return generation_ != seen; });
      seen = generation_;
      if (index >= width_) continue;
      lock.unlock();
      Work();
      lock.lock();
      if (--pending_ == 0) done_.notify_one();
    }
  }

  std::mutex busy_;  // held by the caller of the running job
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> workers_;  // never joined: the pool lives as long as the process
  uint64_t generation_ = 0;
  const std::function<void(size_t)>* body_ = nullptr;
  size_t count_ = 0;
  std::atomic<size_t> next_{0};
  int width_ = 0, pending_ = 0;
  // This thread runs a body of the pool's (a worker, or the caller during
  // its job).
  static thread_local bool inside_;
};

thread_local bool Pool::inside_ = false;

Pool* shared = nullptr;
std::once_flag once;

Pool& Shared() {
  std::call_once(once, [] {
    shared = new Pool();  // never destroyed: workers may still wait at exit
    // A forked child has none of the parent's workers: it gets a new pool
    // (the parent's is left behind, unused).
    pthread_atfork(nullptr, nullptr, [] { shared = new Pool(); });
  });
  return *shared;
}

}  // namespace

namespace {

// A cgroup v2 CPU quota ("QUOTA PERIOD" in /sys/fs/cgroup/cpu.max, as
// docker --cpus sets it), rounded up to whole CPUs; 0 when there is none.
int CgroupCpuQuota() {
  std::FILE* f = std::fopen("/sys/fs/cgroup/cpu.max", "r");
  if (f == nullptr) return 0;
  char quota[32] = {};
  long long period = 0;
  const int read = std::fscanf(f, "%31s %lld", quota, &period);
  std::fclose(f);
  if (read != 2 || period <= 0 || std::strcmp(quota, "max") == 0) return 0;
  const long long q = std::atoll(quota);
  if (q <= 0) return 0;
  return static_cast<int>(std::min<long long>((q + period - 1) / period, 1 << 16));
}

}  // namespace

int AvailableCpus() {
  static const int quota = CgroupCpuQuota();  // read once; the affinity every call
  int n = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) n = std::max(1, CPU_COUNT(&set));
  return quota > 0 ? std::min(n, quota) : n;
}

int ResolveThreads(int requested) { return requested > 0 ? requested : AvailableCpus(); }

void ParallelFor(size_t count, int threads, const std::function<void(size_t)>& body) {
  if (count == 0) return;
  if (threads <= 1 || count == 1 || !Shared().TryRun(count, threads, body)) {
    for (size_t i = 0; i < count; ++i) body(i);
  }
}

}  // namespace lowp
