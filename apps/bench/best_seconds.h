#pragma once
// The benchmarks' timer: the fastest of `repeat` runs, the figure least disturbed by a shared, noisy machine.
#include <algorithm>
#include <chrono>
#include <functional>

inline double best_seconds(int repeat, const std::function<void()>& fn) {
  double best = 1e300;
  for (int r = 0; r < repeat; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}
