#include "alps/core/host_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <sys/mman.h>
#include <torch/version.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <unordered_map>

#include "alps/core/error.h"

namespace alps {
namespace {

constexpr size_t kMinBytes = size_t{4} << 20;   // smaller buffers stay in glibc's heap, which reuses them itself
constexpr size_t kGranule = size_t{2} << 20;    // sizes rounded up to this, so nearly equal requests share buffers

// Buffers of at least kMinBytes are mapped directly and, once freed, kept in a pool keyed by size (up to the
// limit); a request takes the smallest pooled buffer that holds it if that wastes at most a quarter. Smaller
// requests go to the allocator that was installed before.
class CachingHostAllocator final : public c10::Allocator {
 public:
  CachingHostAllocator(c10::Allocator* fallback, int64_t limit) : fallback_(fallback), limit_(limit) {}

#if TORCH_VERSION_MAJOR >= 2
  c10::DataPtr allocate(size_t n) override { return allocate_impl(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const override { default_copy_data(dest, src, count); }
#else
  c10::DataPtr allocate(size_t n) const override { return allocate_impl(n); }
#endif
  c10::DeleterFnPtr raw_deleter() const override { return nullptr; }

  HostCacheStats stats() {
    std::lock_guard<std::mutex> lock(mu_);
    return {hits_, misses_, static_cast<int64_t>(cached_), limit_};
  }

  void release_all() const {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [size, p] : pool_) ::munmap(p, size);
    pool_.clear();
    cached_ = 0;
  }

 private:
  c10::DataPtr allocate_impl(size_t n) const {
    if (n < kMinBytes) return fallback_->allocate(n);
    const size_t want = (n + kGranule - 1) / kGranule * kGranule;
    void* p = take(want);
    if (p == nullptr) p = map(want);
    return {p, p, &CachingHostAllocator::release, c10::Device(c10::kCPU)};
  }

  void* take(size_t want) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = pool_.lower_bound(want);
    if (it == pool_.end() || it->first > want + want / 4) {
      ++misses_;
      return nullptr;
    }
    void* p = it->second;
    cached_ -= it->first;
    live_[p] = it->first;
    pool_.erase(it);
    ++hits_;
    return p;
  }

  void* map(size_t size) const {
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {  // memory held in the pool is the first to give back
      release_all();
      p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    }
    ALPS_CHECK(p != MAP_FAILED, "out of host memory: could not allocate ", size >> 20, " MiB (", std::strerror(errno),
               ")");
    std::lock_guard<std::mutex> lock(mu_);
    live_[p] = size;
    return p;
  }

  static void release(void* p);
  void give_back(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) return;
    const size_t size = it->second;
    live_.erase(it);
    if (cached_ + size <= static_cast<size_t>(limit_)) {
      pool_.emplace(size, p);
      cached_ += size;
    } else {
      ::munmap(p, size);
    }
  }

  c10::Allocator* fallback_;
  const int64_t limit_;
  mutable std::mutex mu_;
  mutable std::multimap<size_t, void*> pool_;          // freed buffers by size
  mutable std::unordered_map<void*, size_t> live_;     // handed-out buffers and their mapped size
  mutable size_t cached_ = 0;
  mutable int64_t hits_ = 0, misses_ = 0;
};

CachingHostAllocator* g_cache = nullptr;

void CachingHostAllocator::release(void* p) { g_cache->give_back(p); }

}  // namespace

void install_host_buffer_cache(int64_t limit_bytes) {
  static std::once_flag once;
  std::call_once(once, [&] {
    if (limit_bytes <= 0) {
      const int64_t ram = static_cast<int64_t>(::sysconf(_SC_PHYS_PAGES)) * ::sysconf(_SC_PAGESIZE);
      limit_bytes = std::min<int64_t>(ram / 8, int64_t{4} << 30);
    }
    // Never destroyed: tensors freed during static destruction still return their buffers to it.
    g_cache = new CachingHostAllocator(c10::GetCPUAllocator(), limit_bytes);
    c10::SetCPUAllocator(g_cache, /*priority=*/1);
  });
}

HostCacheStats host_buffer_cache_stats() { return g_cache != nullptr ? g_cache->stats() : HostCacheStats{}; }

void release_host_buffer_cache() {
  if (g_cache != nullptr) g_cache->release_all();
}

}  // namespace alps
