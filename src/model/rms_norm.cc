#include "model/rms_norm.h"

#include <ATen/ATen.h>

#include "model/kernels/cpu_kernels.h"

namespace alps::model {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (x.is_cpu() && x.scalar_type() == at::kFloat && weight.is_cpu() && weight.scalar_type() == at::kFloat &&
      x.dim() >= 1 && weight.dim() == 1 && weight.size(0) == x.size(-1))
    return detail::rms_norm_cpu(x, weight, eps);
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, true) + eps);
  return weight * normed.to(x.scalar_type());
}

}  // namespace alps::model
