#include "model/rotary.h"

#include <ATen/ATen.h>

#include "model/kernels/cpu_kernels.h"

namespace alps::model {

at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const bool fused = x.is_cpu() && x.scalar_type() == at::kFloat && cos.is_cpu() && sin.is_cpu() &&
                     cos.scalar_type() == at::kFloat && sin.scalar_type() == at::kFloat && x.dim() == 4 &&
                     x.size(-1) % 2 == 0 && x.stride(-1) == 1;
  if (fused) return detail::apply_rotary_cpu(x, cos, sin);
  const int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * at::cat({cos, cos}, -1) + rotated * at::cat({sin, sin}, -1);
}

}  // namespace alps::model
