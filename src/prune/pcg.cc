#include "pcg.h"

#include <ATen/ATen.h>

namespace alps::prune::detail {

PcgResult pcg_masked(const at::Tensor& Hn, const at::Tensor& Y, const at::Tensor& keep, const at::Tensor& B_init,
                     int64_t iterations, double tolerance) {
  // Every iterate lives in a buffer allocated once and is updated in place: apart from the product, an iteration
  // is a handful of passes over [in, out], and fresh temporaries per operation cost more than the arithmetic.
  at::Tensor B = (B_init * keep).contiguous();    // [in, out]
  at::Tensor R = at::empty_like(B);               // masked residual
  at::mm_out(R, Hn, B);
  R.sub_(Y).neg_().mul_(keep);
  const double target = tolerance * (Y * keep).norm().item<double>();
  PcgResult result;
  if (R.norm().item<double>() <= target) return {B, 0};
  at::Tensor P = R.clone();
  at::Tensor AP = at::empty_like(B);
  at::Tensor T = at::empty_like(B);
  const int64_t out = B.size(1);
  at::Tensor rz = at::empty({out}, B.options()), rz_next = at::empty({out}, B.options());
  at::Tensor pAp = at::empty({out}, B.options());
  at::sum_out(rz, at::mul_out(T, R, R), 0);
  for (int64_t k = 0; k < iterations; ++k) {
    at::mm_out(AP, Hn, P);                        // the one [in,in] x [in,out] product per iteration
    at::sum_out(pAp, at::mul_out(T, P, AP), 0);
    // A converged column has P = 0 and pAp = 0: give it alpha = 0 instead of 0/0.
    const at::Tensor alpha = at::where(pAp > 0, rz / pAp.clamp_min(1e-30), at::zeros_like(pAp)).unsqueeze(0);
    B.addcmul_(P, alpha);
    R.addcmul_(AP, alpha, -1).mul_(keep);
    at::sum_out(rz_next, at::mul_out(T, R, R), 0);
    result.iterations = k + 1;
    if (rz_next.sum().sqrt().item<double>() <= target) break;
    const at::Tensor beta = at::where(rz > 0, rz_next / rz.clamp_min(1e-30), at::zeros_like(rz)).unsqueeze(0);
    P.mul_(beta).add_(R);
    std::swap(rz, rz_next);
  }
  result.B = B;
  return result;
}

}  // namespace alps::prune::detail
