#pragma once
// Fork-join over an index range, for the CPU vector kernels (fused ALPS/PCG passes). libtorch's own OpenMP pool
// stays at one thread where the BLAS library has a pool of its own (core/threads.h), so these passes bring their
// own threads: a persistent pool whose idle workers sleep (never spin), so that between passes the cores belong
// to BLAS.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

namespace alps {

/// Upper bound on the threads of a pass; 0 means one per core, at most 8. `--threads N` sets it.
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

/// Runs task(t) for t = 0 .. tasks - 1, task 0 on the calling thread and the others on the pool's workers, and
/// returns when all are done. A call made while the pool is busy (from a worker, or from a second thread) runs
/// its tasks one after another on the caller.
void run_tasks(int tasks, const std::function<void(int)>& task);

/// Runs fn(begin, end, t) on `threads` contiguous chunks of [0, n) (t = chunk index; chunk t - 1 ends where t
/// begins), chunk 0 on the calling thread.
template <class Fn>
void parallel_chunks(int64_t n, int threads, Fn&& fn) {
  if (threads <= 1 || n <= 0) {
    fn(int64_t{0}, n, 0);
    return;
  }
  auto bound = [&](int t) { return t >= threads ? n : n * t / threads; };
  run_tasks(threads, [&](int t) { fn(bound(t), bound(t + 1), t); });
}

}  // namespace alps
