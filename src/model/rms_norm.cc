#include "model/rms_norm.h"

#include <ATen/ATen.h>

#include "model/kernels/cpu_kernels.h"

namespace alps::model {

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, NormScale scale) {
  // Gemma's factor 1 + w is formed in fp32 from the stored weight.
  const at::Tensor w = scale == NormScale::one_plus_weight ? weight.to(at::kFloat) + 1.0 : weight;
  // In fp32 the three scalings are one computation.
  if (x.is_cpu() && x.scalar_type() == at::kFloat && w.is_cpu() && w.scalar_type() == at::kFloat && x.dim() >= 1 &&
      w.dim() == 1 && w.size(0) == x.size(-1))
    return detail::rms_norm_cpu(x, w, eps);
  const at::Tensor xf = x.to(at::kFloat);
  const at::Tensor normed = xf * at::rsqrt(xf.pow(2).mean(-1, true) + eps);
  if (scale == NormScale::weight) return w * normed.to(x.scalar_type());
  return (normed * w.to(at::kFloat)).to(x.scalar_type());
}

}  // namespace alps::model
