#include "pcg.h"

#include <ATen/ATen.h>

namespace alps::prune::detail {

PcgResult pcg_masked(const at::Tensor& Hn, const at::Tensor& Y, const at::Tensor& keep, const at::Tensor& B_init,
                     int64_t iterations, double tolerance) {
  at::Tensor B = B_init * keep;                   // [in, out]
  at::Tensor R = (Y - Hn.matmul(B)) * keep;       // [in, out], masked residual
  const double target = tolerance * (Y * keep).norm().item<double>();
  PcgResult result;
  if (R.norm().item<double>() <= target) return {B, 0};
  at::Tensor P = R.clone();
  at::Tensor rz = (R * R).sum(0);                 // [out]
  for (int64_t k = 0; k < iterations; ++k) {
    at::Tensor AP = Hn.matmul(P);                 // the one [in,in] x [in,out] product per iteration
    at::Tensor pAp = (P * AP).sum(0);
    // A converged column has P = 0 and pAp = 0: give it alpha = 0 instead of 0/0.
    at::Tensor alpha = at::where(pAp > 0, rz / pAp.clamp_min(1e-30), at::zeros_like(pAp));
    B.add_(P * alpha);
    R.sub_(AP * alpha).mul_(keep);
    at::Tensor rz_next = (R * R).sum(0);
    result.iterations = k + 1;
    if (rz_next.sum().sqrt().item<double>() <= target) break;
    at::Tensor beta = at::where(rz > 0, rz_next / rz.clamp_min(1e-30), at::zeros_like(rz));
    P = R + P * beta;
    rz = rz_next;
  }
  result.B = B;
  return result;
}

}  // namespace alps::prune::detail
