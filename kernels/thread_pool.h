// The process's one pool of worker threads, started on first use and kept:
// the conversion kernels, the measurement of schemes and whatever else runs
// in parallel share it, so no call pays for creating threads.
//
// ParallelFor(count, threads, body) runs body(i) for every i in [0, count)
// on up to `threads` threads (the caller is one of them) and returns when
// all are done. Which thread runs which i is not fixed: callers that need a
// deterministic result keep per-index results and merge them in order (as
// every caller in lowp does). A call made while the pool is busy (from
// another thread, or nested inside a body) runs on its own thread instead
// of waiting, so calls never deadlock. After fork() the child starts a pool
// of its own on first use.
#ifndef LOWP_KERNELS_THREAD_POOL_H_
#define LOWP_KERNELS_THREAD_POOL_H_

#include <cstddef>
#include <functional>

namespace lowp {

// The CPUs this process may run on (its affinity mask, as taskset or a
// container's cpuset sets it, capped by a cgroup v2 CPU quota such as docker
// --cpus sets), at least 1: the default thread count everywhere a count of 0
// means "all".
int AvailableCpus();

// `requested` threads, or AvailableCpus() for 0.
int ResolveThreads(int requested);

void ParallelFor(size_t count, int threads, const std::function<void(size_t)>& body);

}  // namespace lowp

#endif  // LOWP_KERNELS_THREAD_POOL_H_
