#include "prune/pcg.h"

#include <ATen/ATen.h>

#include <cmath>
#include <memory>

#include "alps/prune/row_split.h"
#include "prune/kernels/cpu_kernels.h"

namespace alps::prune::detail {

namespace {

// A converged column has P = 0 and pAp = 0 (or rz = 0): it gets alpha = 0 (beta = 0) instead of 0/0.
class AtenCg final : public CgVectors {
 public:
  AtenCg(const at::Tensor& R, const at::Tensor& keep) : keep_(keep), T_(at::empty_like(R)) {
    const int64_t out = R.size(1);
    rz_ = at::empty({out}, R.options());
    rz_next_ = at::empty({out}, R.options());
    pAp_ = at::empty({out}, R.options());
    at::sum_out(rz_, at::mul_out(T_, R, R), 0);
  }
  double step(at::Tensor& B, at::Tensor& R, const at::Tensor& P, const at::Tensor& AP) override {
    at::sum_out(pAp_, at::mul_out(T_, P, AP), 0);
    const at::Tensor alpha = at::where(pAp_ > 0, rz_ / pAp_.clamp_min(1e-30), at::zeros_like(pAp_)).unsqueeze(0);
    B.addcmul_(P, alpha);
    R.addcmul_(AP, alpha, -1).mul_(keep_);
    at::sum_out(rz_next_, at::mul_out(T_, R, R), 0);
    return rz_next_.sum().item<double>();
  }
  void next_direction(at::Tensor& P, const at::Tensor& R) override {
    const at::Tensor beta = at::where(rz_ > 0, rz_next_ / rz_.clamp_min(1e-30), at::zeros_like(rz_)).unsqueeze(0);
    P.mul_(beta).add_(R);
    std::swap(rz_, rz_next_);
  }

 private:
  at::Tensor keep_, T_, rz_, rz_next_, pAp_;
};

}  // namespace

PcgResult pcg_masked(const at::Tensor& Hn, const at::Tensor& Y, const at::Tensor& keep, const at::Tensor& B_init,
                     int64_t iterations, double tolerance, bool fused, Fp32Products products,
                     const RowSplit* split) {
  // Every iterate lives in a buffer allocated once and is updated in place.
  at::Tensor B = (B_init * keep).contiguous();    // [in, out]
  at::Tensor R = at::empty_like(B);               // masked residual
  const Fp32Matrix H(Hn, products);
  H.mm_out(R, B);
  R.sub_(Y).neg_().mul_(keep);
  // ||.||_F of the whole layer: a split problem's parts add their squares.
  auto norm = [split](const at::Tensor& t) {
    return split == nullptr ? t.norm().item<double>() : std::sqrt(sum_over_parts(split, t.pow(2).sum().item<double>()));
  };
  const double target = tolerance * norm(Y * keep);
  PcgResult result{B, 0};
  if (norm(R) <= target) return result;
  at::Tensor P = R.clone();
  at::Tensor AP = at::empty_like(B);
  const bool cpu_fp32 = B.device().is_cpu() && B.scalar_type() == at::kFloat;
  std::unique_ptr<CgVectors> cg;
  if (fused && cpu_fp32) {
    cg = make_fused_cpu_cg(R, keep);
  } else {
    cg = std::make_unique<AtenCg>(R, keep);
  }
  for (int64_t k = 0; k < iterations; ++k) {
    H.mm_out(AP, P);  // the one [in,in] x [in,out] product per iteration
    const double rz_next = sum_over_parts(split, cg->step(B, R, P, AP));
    result.iterations = k + 1;
    if (std::sqrt(rz_next) <= target) break;
    cg->next_direction(P, R);
  }
  return result;
}

}  // namespace alps::prune::detail
