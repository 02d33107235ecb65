#include <ATen/ATen.h>

#include "alps/core/error.h"
#include "alps/prune/structured.h"
#include "prune/structured/elimination.h"

namespace alps::prune {

void check_unit_problem(const UnitProblem& p, const std::string& what) {
  ALPS_CHECK(p.W0.defined() && p.W0.dim() == 2 && p.W0.numel() > 0, what, ": W0 must be a non-empty [out, in] matrix");
  ALPS_CHECK(p.G.defined() && p.G.dim() == 2 && p.G.size(0) == p.in() && p.G.size(1) == p.in(), what, ": G must be [",
             p.in(), ", ", p.in(), "], got ", p.G.sizes());
  ALPS_CHECK(p.width >= 1 && p.in() % p.width == 0, what, ": ", p.in(), " input columns do not come in units of ",
             p.width);
  ALPS_CHECK(p.parts >= 1 && p.units() % p.parts == 0, what, ": ", p.units(), " units do not split into ", p.parts,
             " equal parts");
  ALPS_CHECK(p.keep >= 1 && p.keep <= p.units_per_part(), what, ": each part keeps between 1 and ", p.units_per_part(),
             " units, got ", p.keep);
  ALPS_CHECK(at::isfinite(p.W0).all().item<bool>() && at::isfinite(p.G).all().item<bool>(), what,
             ": W0 and G must be finite");
}

at::Tensor unit_columns(const std::vector<int64_t>& units, int64_t width, c10::Device device) {
  const at::Tensor u = at::tensor(units, at::kLong).view({-1, 1});
  return (u * width + at::arange(width, at::kLong).view({1, -1})).view({-1}).to(device);
}

at::Tensor refit_columns(const at::Tensor& W0, const at::Tensor& G, const at::Tensor& cols, double damp) {
  const at::Tensor H = detail::damped_unit_gram(G, damp);
  const at::Tensor HS = H.index_select(1, cols);                       // [in, |C|]
  const at::Tensor C = at::matmul(W0.to(at::kDouble), HS);             // (W0 H)[:, C]
  const at::Tensor L = at::linalg_cholesky(HS.index_select(0, cols));  // H_CC = L L^T
  return at::cholesky_solve(C.t(), L).t().to(at::kFloat);              // C H_CC^-1
}

double unit_relative_error(const UnitProblem& p, const UnitSolution& s) {
  const at::Tensor W0 = p.W0.to(at::kDouble), G = p.G.to(at::kDouble);
  at::Tensor D = W0.clone();
  D.index_add_(1, unit_columns(s.kept, p.width, W0.device()), s.W.to(at::kDouble), -1.0);
  const double base = (at::matmul(W0, G) * W0).sum().item<double>();
  const double lost = (at::matmul(D, G) * D).sum().item<double>();
  return base > 0 ? std::max(lost, 0.0) / base : 0.0;
}

}  // namespace alps::prune
