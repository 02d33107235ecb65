// alps_bench_kernels: the dense symmetric kernels alps chooses between (include/alps/core/linalg.h), side by side
// in one process: the eigendecomposition (libtorch fp64, LAPACK fp64, LAPACK fp32), the per-rho inverse rebuild of
// ALPS (product vs syrk) and the calibration Gram accumulation G += X^T X (addmm vs syrk). Prints a markdown table;
// each timing is the best of --repeat runs.
// Usage: alps_bench_kernels [--sizes 768,2048,3072] [--tokens 16384] [--repeat 3]
#include <ATen/ATen.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "alps/core/error.h"
#include "alps/core/linalg.h"
#include "best_seconds.h"

namespace {

void row(int64_t n, const char* kernel, const char* a_name, double a, const char* b_name, double b) {
  std::printf("| %lld | %s | %s %.3f s | %s %.3f s | %.2fx |\n", static_cast<long long>(n), kernel, a_name, a, b_name,
              b, a / b);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<int64_t> sizes{768, 2048, 3072};
    int64_t tokens = 16384;
    int repeat = 3;
    for (int i = 1; i + 1 < argc; i += 2) {
      const std::string flag = argv[i], value = argv[i + 1];
      if (flag == "--sizes") {
        sizes.clear();
        std::stringstream ss(value);
        for (std::string item; std::getline(ss, item, ',');) sizes.push_back(std::stoll(item));
      } else if (flag == "--tokens") {
        tokens = std::stoll(value);
      } else if (flag == "--repeat") {
        repeat = std::max(1, std::stoi(value));
      } else {
        ALPS_FAIL("alps_bench_kernels: unknown flag '", flag, "'");
      }
    }
    std::printf("| n | kernel | before | now | speed-up |\n|---|---|---|---|---|\n");
    for (const int64_t n : sizes) {
      at::manual_seed(0);
      at::Tensor X = at::randn({tokens, n});
      at::Tensor A = X.t().mm(X) / static_cast<double>(tokens);  // a Gram-like symmetric matrix
      const at::Tensor A64 = A.to(at::kDouble);
      const double torch64 = best_seconds(repeat, [&] { (void)at::linalg_eigh(A64); });
      const double lapack64 = best_seconds(repeat, [&] { (void)alps::symmetric_eigh(A64); });
      const double lapack32 = best_seconds(repeat, [&] { (void)alps::symmetric_eigh(A); });
      row(n, "eigendecomposition (fp64 reference)", "at::linalg_eigh fp64", torch64, "LAPACK dsyevd", lapack64);
      row(n, "eigendecomposition (ALPS default)", "at::linalg_eigh fp64", torch64, "LAPACK ssyevd fp32", lapack32);
      // ALPS's (Hn + rho I)^-1 = Qs Qs^T with Qs = Q diag(1 / sqrt(L + rho)).
      at::Tensor Qs = at::randn({n, n}), M = at::empty({n, n});
      const double mm = best_seconds(repeat, [&] { at::mm_out(M, Qs, Qs.t()); });
      const double syrk = best_seconds(repeat, [&] {
        alps::syrk_lower(M, Qs, /*transpose_a=*/false, 0.0);
        alps::mirror_lower(M);
      });
      row(n, "inverse rebuild Qs Qs^T", "mm", mm, "syrk + mirror", syrk);
      at::Tensor G = at::zeros({n, n});
      const double addmm = best_seconds(repeat, [&] { G.addmm_(X.t(), X); });
      const double accumulate = best_seconds(repeat, [&] { alps::syrk_lower(G, X, /*transpose_a=*/true, 1.0); });
      row(n, "Gram accumulation G += X^T X", "addmm", addmm, "syrk", accumulate);
    }
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "alps_bench_kernels: %s\n", e.what());
    return 1;
  }
}
