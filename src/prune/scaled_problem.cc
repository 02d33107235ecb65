#include "prune/scaled_problem.h"

#include <ATen/ATen.h>

#include "alps/prune/problem.h"

namespace alps::prune::detail {

at::Tensor damped_gram(const LayerProblem& p, double damp) {
  at::Tensor H = p.G.to(at::kDouble).clone();
  if (damp > 0) H.diagonal().add_(damp * H.diagonal().mean().item<double>());
  return H;
}

ScaledProblem scale_problem(const LayerProblem& p, double damp, bool keep_fp64) {
  // The scaling in fp64; the iterations run in fp32. (The reference, github.com/mazumder-lab/ALPS at commit
  // 8af9e6b5c8b1b06a028bde6065e5c38829df3a19, scales in fp32 and eigendecomposes the scaled matrix in fp64.)
  const at::Tensor H = damped_gram(p, damp);                                // [in, in]
  const at::Tensor d64 = H.diagonal().sqrt() + 1e-8;                         // [in]
  at::Tensor Hn64 = H / d64.unsqueeze(1) / d64.unsqueeze(0);
  ScaledProblem s = scale_problem(p, Hn64.to(at::kFloat), d64.to(at::kFloat).unsqueeze(1));
  if (keep_fp64) s.Hn64 = std::move(Hn64);
  return s;
}

ScaledProblem scale_problem(const LayerProblem& p, at::Tensor Hn, at::Tensor d) {
  ScaledProblem s;
  s.Hn = std::move(Hn);
  s.d = std::move(d);
  s.B0 = s.scaled(p.W0);
  s.Y = s.Hn.matmul(s.B0);
  return s;
}

at::Tensor ScaledProblem::scaled(const at::Tensor& W) const { return (W.to(at::kFloat).t() * d).contiguous(); }

at::Tensor ScaledProblem::unscaled(const at::Tensor& B) const { return (B / d).t().contiguous(); }

}  // namespace alps::prune::detail
