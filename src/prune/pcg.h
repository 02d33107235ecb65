#pragma once
// Private: the vectorised masked CG of paper Algorithm 2, shared by refit() and ALPS.
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "alps/core/products.h"

namespace alps::prune {
struct RowSplit;
}

namespace alps::prune::detail {

// One CG step per column j of the [in, out] iterates, given AP = Hn P:
//   alpha_j = rz_j / (p_j . Ap_j);  b_j += alpha_j p_j;  r_j = (r_j - alpha_j Ap_j) on the support
//   rz'_j = r_j . r_j;  beta_j = rz'_j / rz_j;  p_j = r_j + beta_j p_j
// Column j of a row-major [in, out] matrix is strided, so each dot product is accumulated row by row into
// per-column sums.
class CgVectors {
 public:
  virtual ~CgVectors() = default;
  /// Updates B and R with alpha from AP; returns sum_j rz'_j.
  virtual double step(at::Tensor& B, at::Tensor& R, const at::Tensor& P, const at::Tensor& AP) = 0;
  /// P = R + beta P.
  virtual void next_direction(at::Tensor& P, const at::Tensor& R) = 0;
};

struct PcgResult {
  at::Tensor B;            ///< [in, out]
  int64_t iterations = 0;  ///< CG iterations run
};

/// Solves Hn B = Y restricted to the support `keep` ([in, out], 1 = kept, 0 = pruned), every column at once:
/// per-column alpha/beta from column sums, residual masked to the support each iteration. Hn has a unit diagonal
/// (or zero rows for dead inputs), so the diagonal preconditioner is the identity. Starts from `B` projected onto the
/// support; stops after `iterations` or once ||masked residual||_F <= tolerance * ||masked Y||_F.
/// `fused`: on the CPU in fp32, the per-iteration vector work runs as three fused passes (ATen ops otherwise).
/// `products`: how the products with Hn run (core/products.h; Hn is split once). With `split`, B's columns are one
/// part of a layer's (alps/prune/row_split.h): the norms of the stopping test are summed over the parts, so every
/// part stops at the same iteration; the columns' own arithmetic is unchanged.
PcgResult pcg_masked(const at::Tensor& Hn, const at::Tensor& Y, const at::Tensor& keep, const at::Tensor& B,
                     int64_t iterations, double tolerance, bool fused = true,
                     Fp32Products products = Fp32Products::kNative, const RowSplit* split = nullptr);

}  // namespace alps::prune::detail
