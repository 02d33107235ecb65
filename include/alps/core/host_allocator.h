#pragma once
// Large host tensors reuse freed buffers instead of mapping fresh memory (src/core/host_allocator.cc).
#include <cstdint>

namespace alps {

struct HostCacheStats {
  int64_t hits = 0;          ///< large allocations served from a freed buffer
  int64_t misses = 0;        ///< large allocations that mapped new memory
  int64_t cached_bytes = 0;  ///< freed buffers held for reuse now
  int64_t limit_bytes = 0;   ///< the most bytes the cache may hold for reuse
};

/// Makes libtorch's CPU allocator keep freed buffers of at least 4 MiB, up to `limit_bytes` in all (0: an eighth
/// of physical memory, at most 4 GiB), and hand them out again for requests of about the same size. A forward
/// pass allocates the same large activations batch after batch; glibc maps each above 32 MiB afresh and the kernel
/// zeroes every page on first touch, about a tenth of a CPU forward pass. Idempotent; the limit of the first call
/// stays.
void install_host_buffer_cache(int64_t limit_bytes = 0);
/// Counters since installation (all zero when not installed).
HostCacheStats host_buffer_cache_stats();
/// Returns every cached buffer to the system.
void release_host_buffer_cache();

}  // namespace alps
