// The host buffer cache (core/host_allocator.h): freed large buffers come back for requests of about their size,
// small ones and much smaller requests do not take them, the pool stays under its limit, and tensors keep their
// contents while other threads allocate and free.
#include "alps/core/host_allocator.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <vector>

#include "alps/core/parallel.h"

namespace alps {
namespace {

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kLimit = 64 * kMiB;

at::Tensor floats(int64_t bytes) { return at::empty({bytes / 4}, at::kFloat); }

TEST(HostBufferCache, ReusesAFreedBufferForARequestOfAboutItsSize) {
  install_host_buffer_cache(kLimit);
  release_host_buffer_cache();
  void* first = nullptr;
  {
    at::Tensor t = floats(8 * kMiB);
    first = t.data_ptr();
  }
  const HostCacheStats before = host_buffer_cache_stats();
  EXPECT_EQ(before.cached_bytes, 8 * kMiB);
  at::Tensor again = floats(7 * kMiB);  // rounded to 8 MiB: the same buffer
  EXPECT_EQ(again.data_ptr(), first);
  EXPECT_EQ(host_buffer_cache_stats().hits, before.hits + 1);
  EXPECT_EQ(host_buffer_cache_stats().cached_bytes, 0);
}

TEST(HostBufferCache, MuchSmallerAndSmallRequestsLeaveTheBufferPooled) {
  install_host_buffer_cache(kLimit);
  release_host_buffer_cache();
  { at::Tensor big = floats(32 * kMiB); }
  const HostCacheStats before = host_buffer_cache_stats();
  at::Tensor half = floats(16 * kMiB);  // would waste half of the pooled buffer
  at::Tensor small = floats(kMiB);      // below the cache's minimum: glibc's heap
  const HostCacheStats after = host_buffer_cache_stats();
  EXPECT_EQ(after.hits, before.hits);
  EXPECT_EQ(after.misses, before.misses + 1);
  EXPECT_EQ(after.cached_bytes, 32 * kMiB);
}

TEST(HostBufferCache, PoolStaysUnderItsLimit) {
  install_host_buffer_cache(kLimit);
  release_host_buffer_cache();
  {
    std::vector<at::Tensor> held;
    for (int i = 0; i < 6; ++i) held.push_back(floats(16 * kMiB));  // 96 MiB live, freed together below
  }
  const HostCacheStats s = host_buffer_cache_stats();
  EXPECT_EQ(s.limit_bytes, kLimit);
  EXPECT_EQ(s.cached_bytes, kLimit);  // four pooled, two unmapped
  release_host_buffer_cache();
  EXPECT_EQ(host_buffer_cache_stats().cached_bytes, 0);
}

TEST(HostBufferCache, TensorsKeepTheirContentsUnderConcurrentUse) {
  install_host_buffer_cache(kLimit);
  std::vector<int> bad(4, 0);
  run_tasks(4, [&](int t) {
    for (int round = 0; round < 20; ++round) {
      at::Tensor x = at::full({(4 + t % 3) * kMiB / 4}, static_cast<float>(t * 100 + round));
      at::Tensor y = floats((5 + round % 2) * kMiB);  // churn beside x
      y.fill_(-1);
      if (!x.eq(static_cast<float>(t * 100 + round)).all().item<bool>()) ++bad[static_cast<size_t>(t)];
    }
  });
  for (int t = 0; t < 4; ++t) EXPECT_EQ(bad[static_cast<size_t>(t)], 0) << "task " << t;
}

}  // namespace
}  // namespace alps
