// The fused CPU form of rms_norm (model/rms_norm.h): per row, the sum of squares in fp64 (ATen sums in fp32, in
// another order), then out = w * (x * r) with r = rsqrt(mean + eps) in fp32, rounded product by product as ATen
// rounds them (no floating-point contraction, CMakeLists.txt).
#include <ATen/ATen.h>

#include <cmath>

#include "model/kernels/cpu_kernels.h"

namespace alps::model::detail {

at::Tensor rms_norm_cpu(const at::Tensor& x, const at::Tensor& weight, double eps) {
  const at::Tensor xc = x.contiguous(), w = weight.contiguous();
  const int64_t n = xc.size(-1), rows = n == 0 ? 0 : xc.numel() / n;
  at::Tensor out = at::empty_like(xc);
  const float* xp = xc.data_ptr<float>();
  const float* wp = w.data_ptr<float>();
  float* op = out.data_ptr<float>();
  const float e = static_cast<float>(eps);
  for (int64_t i = 0; i < rows; ++i) {
    const float* xi = xp + i * n;
    double squares = 0;
    for (int64_t j = 0; j < n; ++j) squares += static_cast<double>(xi[j]) * xi[j];
    const float r = 1.0f / std::sqrt(static_cast<float>(squares / static_cast<double>(n)) + e);
    float* o = op + i * n;
    for (int64_t j = 0; j < n; ++j) o[j] = wp[j] * (xi[j] * r);
  }
  return out;
}

}  // namespace alps::model::detail
