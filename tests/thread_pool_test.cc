// The shared thread pool (kernels/thread_pool.h): every index runs exactly
// the default count is the process's CPU affinity.
#include "kernels/thread_pool.h"

#include <fstream>
#include <string>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace lowp {
namespace {

// Runs count indices on `threads` threads; true when each ran once.
bool EachOnce(size_t count, int threads) {
  std::vector<std::atomic<int>> hits(count);
  ParallelFor(count, threads, [&](size_t i) { hits[i].fetch_add(1); });
  for (const std::atomic<int>& h : hits) {
    if (h.load() != 1) return false;
  }
  return true;
}

TEST(ThreadPool, EveryIndexOnceForAnyThreadCount) {
  for (int threads : {0, 1, 2, 3, 8, 64}) {
    for (size_t count : {0, 1, 2, 7, 100, 10000}) {
      EXPECT_TRUE(EachOnce(count, threads)) << count << " on " << threads;
    }
  }
}

TEST(ThreadPool, UsesMoreThanOneThreadWhenAsked) {
  std::mutex m;
  std::vector<std::thread::id> seen;
  ParallelFor(64, 4, [&](size_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard<std::mutex> lock(m);
    if (std::find(seen.begin(), seen.end(), std::this_thread::get_id()) == seen.end()) {
      seen.push_back(std::this_thread::get_id());
    }
  });
  EXPECT_GT(seen.size(), 1u);
  EXPECT_LE(seen.size(), 4u);
}

TEST(ThreadPool, NestedAndConcurrentCallsComplete) {
  std::atomic<int> inner{0};
  ParallelFor(8, 4, [&](size_t) {
    ParallelFor(10, 4, [&](size_t) { inner.fetch_add(1); });
  });
  EXPECT_EQ(inner.load(), 80);
  std::vector<std::thread> callers;
  std::atomic<int> ok{0};
  for (int t = 0; t < 6; ++t) {
    callers.emplace_back([&] {
      for (int round = 0; round < 50; ++round) ok += EachOnce(257, 3) ? 1 : 0;
    });
  }
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(ok.load(), 300);
}

TEST(ThreadPool, AForkedChildHasAPoolOfItsOwn) {
  ASSERT_TRUE(EachOnce(1000, 4));  // the parent's workers exist now
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(EachOnce(1000, 4) ? 0 : 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
}

TEST(ThreadPool, DefaultCountIsTheAffinity) {
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  // The affinity, unless a cgroup CPU quota (cpu.max) caps it lower.
  std::ifstream quota("/sys/fs/cgroup/cpu.max");
  std::string limit;
  if (!(quota >> limit) || limit == "max") {
    EXPECT_EQ(AvailableCpus(), CPU_COUNT(&set));
  } else {
    EXPECT_LE(AvailableCpus(), CPU_COUNT(&set));
    EXPECT_GE(AvailableCpus(), 1);
  }
  EXPECT_EQ(ResolveThreads(0), AvailableCpus());
  EXPECT_EQ(ResolveThreads(3), 3);
  // Restricted to one CPU, the default is one thread.
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &set)) {
      CPU_SET(c, &one);
      break;
    }
  }
  ASSERT_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
  EXPECT_EQ(AvailableCpus(), 1);
  ASSERT_EQ(sched_setaffinity(0, sizeof(set), &set), 0);
}

}  // namespace
}  // namespace lowp
