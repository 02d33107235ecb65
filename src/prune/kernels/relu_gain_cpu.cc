#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>

#include "prune/kernels/cpu_kernels.h"

namespace alps::prune::detail {

at::Tensor relu_gain_cpu(const at::Tensor& V, const at::Tensor& a) {
  const at::Tensor v = V.contiguous(), at_g = a.t().contiguous();  // at_g[g, o] = a[o, g]
  const int64_t out = v.size(0), groups = v.size(1);
  at::Tensor R = at::zeros({groups, groups}, v.options());
  const float* vp = v.data_ptr<float>();
  const float* ap = at_g.data_ptr<float>();
  float* rp = R.data_ptr<float>();
  // A tile of rows of R stays in cache while every row of V streams past it once.
  constexpr int64_t kTile = 8;
  at::parallel_for(0, (groups + kTile - 1) / kTile, 1, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) {
      const int64_t g0 = t * kTile, g1 = std::min(groups, g0 + kTile);
      for (int64_t o = 0; o < out; ++o) {
        const float* vo = vp + o * groups;
        for (int64_t g = g0; g < g1; ++g) {
          const float x = ap[g * out + o];
          float* r = rp + g * groups;
          for (int64_t q = 0; q < groups; ++q) r[q] += std::max(0.0f, vo[q] - x);
        }
      }
    }
  });
  return R;
}

}  // namespace alps::prune::detail
