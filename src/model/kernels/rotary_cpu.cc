// The fused CPU form of apply_rotary (model/rotary.h): one pass over x where the ATen form makes six (two halves
// concatenated, a negation, two products, a sum) and the tables' concatenations. Compiled without floating-point
// contraction (CMakeLists.txt), so that each product and sum rounds as ATen's separate kernels round it.
#include <ATen/ATen.h>

#include "model/kernels/cpu_kernels.h"

namespace alps::model::detail {

at::Tensor apply_rotary_cpu(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t B = x.size(0), H = x.size(1), T = x.size(2), half = x.size(3) / 2;
  const at::Tensor c = cos.contiguous(), s = sin.contiguous();
  const int64_t table_batch_stride = c.size(0) == 1 ? 0 : T * half;
  at::Tensor out = at::empty_like(x);  // x's layout: in the forwards, [B, T, H, D] viewed as [B, H, T, D]
  const float* xp = x.data_ptr<float>();
  const float* cp = c.data_ptr<float>();
  const float* sp = s.data_ptr<float>();
  float* op = out.data_ptr<float>();
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const float* ct = cp + b * table_batch_stride + t * half;
      const float* st = sp + b * table_batch_stride + t * half;
      for (int64_t h = 0; h < H; ++h) {
        const float* xi = xp + b * x.stride(0) + h * x.stride(1) + t * x.stride(2);
        float* o = op + b * out.stride(0) + h * out.stride(1) + t * out.stride(2);
        for (int64_t j = 0; j < half; ++j) {
          const float lo = xi[j], hi = xi[j + half];
          o[j] = lo * ct[j] + -hi * st[j];
          o[j + half] = hi * ct[j] + lo * st[j];
        }
      }
    }
  return out;
}

}  // namespace alps::model::detail
