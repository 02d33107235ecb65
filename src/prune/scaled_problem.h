#pragma once
// Private: the scaled least-squares problem that ALPS and the PCG refit both solve (docs/algorithms.md). With
// H = G + lambda I (lambda = damp * mean(diag G)) and D = diag(sqrt(diag H)), the variable B = D W^T turns
// ||X (W0 - W)^T||^2 into (B0 - B)^T Hn (B0 - B) with Hn = D^-1 H D^-1, whose unit diagonal makes the same rho and
// the identity preconditioner right for every layer.
#include <ATen/core/Tensor.h>

namespace alps::prune {
struct LayerProblem;
}

namespace alps::prune::detail {

/// H = G + lambda I in fp64, lambda = damp * mean(diag G).
at::Tensor damped_gram(const LayerProblem& p, double damp);

struct ScaledProblem {
  at::Tensor Hn64;  ///< Hn [in, in] in fp64 (only when asked for: it is as large as G in fp64)
  at::Tensor Hn;    ///< Hn [in, in] in fp32
  at::Tensor d;     ///< diag(D) + 1e-8 as [in, 1], fp32 (the 1e-8 keeps dead inputs finite)
  at::Tensor B0;    ///< D W0^T [in, out], fp32, contiguous
  at::Tensor Y;     ///< Hn B0 [in, out]: the right-hand side of Hn B = Y

  /// D W^T as a contiguous [in, out] fp32 matrix: transposed views would make every pass over it strided.
  at::Tensor scaled(const at::Tensor& W) const;
  /// W = (D^-1 B)^T as a contiguous [out, in] matrix.
  at::Tensor unscaled(const at::Tensor& B) const;
};

ScaledProblem scale_problem(const LayerProblem& p, double damp, bool keep_fp64 = false);
/// The same for another weight of a problem whose Hn and d are known (linears that read one input share them).
ScaledProblem scale_problem(const LayerProblem& p, at::Tensor Hn, at::Tensor d);

}  // namespace alps::prune::detail
