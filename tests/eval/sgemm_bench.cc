// Measures this machine's fp32 matrix-product rate through libtorch (the same BLAS and threads `alps eval` uses),
// as the yardstick for scripts/bench_eval.sh. Prints one JSON document: per shape the best GFLOP/s of `reps` runs.
// Usage: alps_sgemm_bench [reps]
#include <ATen/ATen.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <nlohmann/json.hpp>

#include "alps/core/threads.h"

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 5;
  const alps::ThreadSettings threads = alps::configure_threads(0);  // as `alps` sets them by default
  // [M, K] x [K, N]: OPT-125M's fc1 and lm_head products on one 2048-token window, and a square reference.
  const int64_t shapes[][3] = {{2048, 768, 3072}, {2048, 768, 50272}, {2048, 2048, 2048}};
  nlohmann::json out = nlohmann::json::array();
  double best_overall = 0;
  for (const auto& s : shapes) {
    at::Tensor a = at::randn({s[0], s[1]}), b = at::randn({s[1], s[2]});
    at::Tensor c = at::matmul(a, b);  // warm-up (thread pool, BLAS init)
    double best = 0;
    for (int r = 0; r < reps; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      c = at::matmul(a, b);
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      best = std::max(best, 2.0 * s[0] * s[1] * s[2] / sec / 1e9);
    }
    best_overall = std::max(best_overall, best);
    out.push_back({{"m", s[0]}, {"k", s[1]}, {"n", s[2]}, {"gflops", best}});
  }
  const nlohmann::json report = {
      {"threads", alps::thread_settings_text(threads)}, {"shapes", out}, {"best_gflops", best_overall}};
  std::cout << report.dump() << std::endl;
  return 0;
}
