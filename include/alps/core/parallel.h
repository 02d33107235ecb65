#pragma once
// Fork-join over an index range on plain threads, for the CPU vector kernels (fused ALPS/PCG passes). libtorch's
// own pool is left at its default of one OpenMP thread (raising it made BLAS-bound work slower: the spinning
// OpenMP workers compete with OpenBLAS's threads), so these passes bring their own threads.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace alps {

/// Upper bound on the threads of a pass; 0 (the default) means one per core, at most 8. `--threads N` sets it.
inline std::atomic<int>& parallel_threads_cap() {
  static std::atomic<int> cap{0};
  return cap;
}

/// Threads a pass over `n` items would use: the cap above, and no more than one per `grain` items.
inline int parallel_threads(int64_t n, int64_t grain = int64_t{1} << 16) {
  const int cap = parallel_threads_cap().load();
  const int64_t cores =
      cap > 0 ? cap : std::max<int64_t>(1, std::min<int64_t>(8, std::thread::hardware_concurrency()));
  return static_cast<int>(std::clamp<int64_t>(n / std::max<int64_t>(grain, 1), 1, cores));
}

/// Runs fn(begin, end, t) on `threads` contiguous chunks of [0, n) (t = chunk index; chunk t - 1 ends where t
/// begins), chunk 0 on the calling thread.
template <class Fn>
void parallel_chunks(int64_t n, int threads, Fn&& fn) {
  if (threads <= 1 || n <= 0) {
    fn(int64_t{0}, n, 0);
    return;
  }
  auto bound = [&](int t) { return t >= threads ? n : n * t / threads; };
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(threads - 1));
  for (int t = 1; t < threads; ++t) workers.emplace_back([&, t] { fn(bound(t), bound(t + 1), t); });
  fn(bound(0), bound(1), 0);
  for (auto& w : workers) w.join();
}

}  // namespace alps
