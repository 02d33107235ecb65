// alps_bench_products: fp32 products and the Cholesky B-update's solves, native fp32 against split TF32 products
// (include/alps/core/products.h), side by side in one process on one device: one [n, n] x [n, k] product (the left
// operand split once, the right one at each call, as ALPS's iterations do), CholeskySolver's construction (factor,
// inverted diagonal blocks, split) and one solve. Prints a markdown table; each timing is the best of --repeat runs,
// each run ended by waiting for the device.
// Usage: alps_bench_products [--device cuda] [--shapes 4096x4096,8192x28672,28672x8192] [--repeat 3]
//        (a shape is n x k: the factor's width and the right-hand sides')
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "alps/core/device.h"
#include "alps/core/device_streams.h"
#include "alps/core/error.h"
#include "alps/core/linalg.h"
#include "alps/core/products.h"
#include "best_seconds.h"

int main(int argc, char** argv) {
  try {
    std::string device_name = "cpu";
    std::vector<std::pair<int64_t, int64_t>> shapes{{4096, 4096}, {8192, 28672}, {28672, 8192}};
    int repeat = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string flag = argv[i], value = argv[i + 1];
      if (flag == "--device") {
        device_name = value;
      } else if (flag == "--shapes") {
        shapes.clear();
        std::stringstream ss(value);
        for (std::string item; std::getline(ss, item, ',');) {
          const size_t x = item.find('x');
          ALPS_CHECK(x != std::string::npos, "alps_bench_products: --shapes takes NxK[,NxK...], got '", value, "'");
          shapes.emplace_back(std::stoll(item.substr(0, x)), std::stoll(item.substr(x + 1)));
        }
      } else if (flag == "--repeat") {
        repeat = std::max(1, std::stoi(value));
      } else {
        ALPS_FAIL("alps_bench_products: unknown flag '", flag, "'");
      }
    }
    const at::Device device(device_name);
    alps::warm_up(device);
    auto timed = [&](const std::function<void()>& fn) {
      fn();  // the first call's allocations and kernel loading are not the steady state
      alps::synchronize(device);
      return best_seconds(repeat, [&] {
        fn();
        alps::synchronize(device);
      });
    };
    std::printf("| n x k | step | fp32 s | tf32x3 s | fp32 / tf32x3 | fp32 TFLOP/s |\n|---|---|---|---|---|---|\n");
    for (const auto& [n, k] : shapes) {
      at::manual_seed(0);
      const auto on = at::TensorOptions().device(device);
      at::Tensor X = at::randn({n, n}, on);
      at::Tensor A = X.mm(X.t()) / static_cast<double>(n);
      A.diagonal().add_(1.0);  // Hn + rho I: positive definite
      X.reset();
      const at::Tensor C = at::linalg_cholesky(A);
      const at::Tensor R = at::randn({n, k}, on);
      at::Tensor out = at::empty({n, k}, on);
      const double flops = 2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(k);
      auto row = [&](const char* step, double native, double split, double step_flops) {
        const std::string rate = step_flops > 0 ? std::to_string(step_flops / native / 1e12).substr(0, 6) : "";
        std::printf("| %lldx%lld | %s | %.4f | %.4f | %.2fx | %s |\n", static_cast<long long>(n),
                    static_cast<long long>(k), step, native, split, native / split, rate.c_str());
        std::fflush(stdout);
      };
      double t[2], f[2], s[2], b[2];
      for (int m = 0; m < 2; ++m) {
        const auto how = m == 0 ? alps::Fp32Products::kNative : alps::Fp32Products::kSplitTf32;
        const alps::Fp32Matrix op(A, how);
        t[m] = timed([&] { op.mm_out(out, R); });
        f[m] = timed([&] { alps::CholeskySolver(C, how); });
        b[m] = timed([&] { (void)alps::CholeskySolver::factor(A.clone(), how); });
        const alps::CholeskySolver solver(C, how);
        s[m] = timed([&] { solver.solve(R, out); });
      }
      const double potrf = timed([&] { (void)at::linalg_cholesky_ex(A); });
      std::printf("| %lldx%lld | factor Hn + rho I (cuSOLVER/LAPACK potrf, fp32) | %.4f | | | %.1f |\n",
                  static_cast<long long>(n), static_cast<long long>(k), potrf,
                  static_cast<double>(n) * n * n / 3 / potrf / 1e12);
      row("product [n,n] x [n,k]", t[0], t[1], flops);
      row("CholeskySolver construction (blocks inverted, split)", f[0], f[1], 0);
      // What ALPS's cholesky B-update does per rho: the factorization by blocks, inverses included (with A's copy).
      row("CholeskySolver::factor (by blocks, products as the solves')", b[0], b[1],
          static_cast<double>(n) * n * n / 3);
      row("CholeskySolver solve (two substitutions)", s[0], s[1], flops);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "alps_bench_products: %s\n", e.what());
    return 1;
  }
}
