#pragma once
// Private: the elementwise half of an ALPS ADMM iteration (docs/algorithms.md), everything around the B-update product
//   B = (Hn + rho I)^-1 R:
//   R = Y - V + rho D
//   Z = B + V / rho,   D = P(Z),   V = V + rho (B - D)
// One interface, two implementations: ATen operations that read like the spec and run on any device, and a fused
// CPU one that does the same arithmetic in four passes over [in, out] instead of about twenty (the projection and
// the dual update were a third of the ADMM time, bound by memory traffic, not arithmetic). "The reference" below is
// the authors' code, github.com/mazumder-lab/ALPS at commit 8af9e6b5c8b1b06a028bde6065e5c38829df3a19.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

#include "alps/prune/pattern.h"

namespace alps::prune {
struct RowSplit;
}

namespace alps::prune::detail {

class AdmmIterates {
 public:
  virtual ~AdmmIterates() = default;
  /// R = Y - V + rho D, the right-hand side of the next B-update ([in, out], valid until the next call).
  virtual const at::Tensor& rhs(double rho) = 0;
  /// D = P(B + V / rho), V = V + rho (B - D).
  virtual void project_and_update_dual(const at::Tensor& B, double rho) = 0;
  /// s_t of the rho schedule: entries whose kept/pruned status in D changed since the previous call.
  virtual int64_t support_changes() = 0;
  /// The reference's restart: D = D0 = P(B0), V = 0.
  virtual void restart() = 0;
};

/// Y = Hn B0 and B0 are [in, out]; the pattern applies to the [out, in] weights, so decisions are across the
/// whole layer (unstructured) or per group of M consecutive inputs of each output (N:M). `fused` picks the CPU
/// kernels when the tensors allow them (CPU, fp32); otherwise the ATen implementation. With `split` (alive as long
/// as the iterates), B0's columns are one part of a layer's: an unstructured projection selects across the parts;
/// support_changes() stays this part's count.
std::unique_ptr<AdmmIterates> make_admm_iterates(const at::Tensor& Y, const at::Tensor& B0, const Pattern& pattern,
                                                 bool fused = true, const RowSplit* split = nullptr);

/// P's support for a [in, out] iterate Z: the kept mask [in, out] (bool); across the parts of `split` when given.
at::Tensor project_keep(const at::Tensor& Z, const Pattern& pattern, const RowSplit* split = nullptr);

}  // namespace alps::prune::detail
