// The persistent pool behind the CPU vector passes: every chunk runs exactly once, a second job can follow at once
// (workers that saw the last job must see the next), errors reach the caller, and calls from inside a task or from
// a second thread run serially instead of deadlocking.
#include "alps/core/parallel.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "alps/core/threads.h"

namespace alps {
namespace {

TEST(Parallel, EveryChunkRunsOnceAndTheChunksTileTheRange) {
  for (int round = 0; round < 200; ++round) {
    const int threads = 1 + round % 5;
    const int64_t n = 1000 + round;
    std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
    std::atomic<int> chunks{0};
    parallel_chunks(n, threads, [&](int64_t b, int64_t e, int) {
      ++chunks;
      for (int64_t i = b; i < e; ++i) ++hits[static_cast<size_t>(i)];
    });
    EXPECT_EQ(chunks.load(), threads);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << round << " " << i;
  }
}

TEST(Parallel, AnErrorInAnyTaskReachesTheCallerAndThePoolStaysUsable) {
  for (int bad : {0, 2}) {
    EXPECT_THROW(run_tasks(3, [&](int t) {
                   if (t == bad) throw std::runtime_error("task failed");
                 }),
                 std::runtime_error);
    std::atomic<int> sum{0};
    run_tasks(3, [&](int t) { sum += t + 1; });
    EXPECT_EQ(sum.load(), 6);
  }
}

TEST(Parallel, NestedAndConcurrentCallsComplete) {
  std::atomic<int> inner{0};
  run_tasks(3, [&](int) { run_tasks(4, [&](int) { ++inner; }); });
  EXPECT_EQ(inner.load(), 12);
  std::atomic<int> total{0};
  std::vector<std::thread> callers;
  for (int c = 0; c < 4; ++c)
    callers.emplace_back([&] {
      for (int r = 0; r < 50; ++r) run_tasks(3, [&](int) { ++total; });
    });
  for (std::thread& t : callers) t.join();
  EXPECT_EQ(total.load(), 4 * 50 * 3);
}

TEST(Threads, ConfigureGivesEveryPoolTheCores) {
  const ThreadSettings before = thread_settings();
  const ThreadSettings s = configure_threads(3);
  EXPECT_EQ(s.threads, 3);
  EXPECT_EQ(s.passes, 3);
  // Where the products run on a BLAS pool of their own, libtorch's pool keeps one thread; else it runs them.
  if (!s.blas_library.empty()) EXPECT_EQ(s.blas, 3);
  EXPECT_EQ(s.intra_op, products_in_intra_op_pool() ? 3 : 1);
  EXPECT_NE(thread_settings_text(s).find("alps passes 3"), std::string::npos) << thread_settings_text(s);
  configure_threads(before.threads);
  parallel_threads_cap() = 0;
}

}  // namespace
}  // namespace alps
