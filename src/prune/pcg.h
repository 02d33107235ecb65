#pragma once
// Private: the vectorised masked CG of paper Algorithm 2, shared by refit() and ALPS.
#include <ATen/core/Tensor.h>

#include <cstdint>

namespace alps::prune::detail {

struct PcgResult {
  at::Tensor B;            ///< [in, out]
  int64_t iterations = 0;  ///< CG iterations run
};

/// Solves Hn B = Y restricted to the support `keep` ([in, out], 1 = kept, 0 = pruned), every column at once:
/// per-column alpha/beta from column sums, residual masked to the support each iteration. Hn has a unit diagonal
/// (or zero rows for dead inputs), so the diagonal preconditioner is the identity. Starts from `B` projected onto the
/// support; stops after `iterations` or once ||masked residual||_F <= tolerance * ||masked Y||_F.
/// `fused`: on the CPU in fp32, the per-iteration vector work runs as three fused passes (ATen ops otherwise).
PcgResult pcg_masked(const at::Tensor& Hn, const at::Tensor& Y, const at::Tensor& keep, const at::Tensor& B,
                     int64_t iterations, double tolerance, bool fused = true);

}  // namespace alps::prune::detail
