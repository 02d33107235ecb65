#include "model/rotary.h"

#include <ATen/ATen.h>

#include "model/kernels/cpu_kernels.h"

namespace alps::model {

at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  // The fused form takes the tables the forwards make: one row of angles per position, for every sequence or
  // shared by all. Any other shape ATen broadcasts goes through the ATen form.
  const bool fused = x.is_cpu() && x.scalar_type() == at::kFloat && x.dim() == 4 && x.size(-1) % 2 == 0 &&
                     x.stride(-1) == 1 && cos.is_cpu() && cos.scalar_type() == at::kFloat && cos.dim() == 4 &&
                     (cos.size(0) == 1 || cos.size(0) == x.size(0)) && cos.size(1) == 1 &&
                     cos.size(2) == x.size(2) && cos.size(3) == x.size(3) / 2 && sin.is_cpu() &&
                     sin.scalar_type() == at::kFloat && sin.sizes() == cos.sizes();
  if (fused) return detail::apply_rotary_cpu(x, cos, sin);
  const int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * at::cat({cos, cos}, -1) + rotated * at::cat({sin, sin}, -1);
}

}  // namespace alps::model
