#pragma once
// Re-optimising the kept weights on a fixed support (ALPS's PCG refit and the exact backsolve, docs/algorithms.md).
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "alps/core/tensor_fwd.h"

namespace alps::prune {

struct LayerProblem;

enum class Refine { kNone, kPcg, kExact };
/// "none" | "pcg" | "exact".
Refine parse_refine(std::string_view name);
std::string_view refine_name(Refine r);
/// Every refine's name, in declaration order.
std::vector<std::string> refine_names();

/// Options of the masked PCG refit (paper Algorithm 2).
struct PcgOptions {
  int64_t iterations = 10;   ///< at most this many CG iterations
  double tolerance = 1e-6;   ///< stop when ||masked residual||_F <= tolerance * ||masked Hn B0||_F
  double damp = 0.0;         ///< ridge lambda = damp * mean(diag G); 0 = the plain layer objective
};

/// Minimises tr((W - W0) (G + lambda I) (W - W0)^T) over W with supp(W) inside supp(`W`) (kept entries are the
/// non-zeros of `W`, which is also the PCG warm start). kExact solves every row's normal equations on its own
/// support in fp64 (lambda = damp * mean(diag G) as well); kNone returns W unchanged. fp32 [out, in] result on
/// the device of `W`.
at::Tensor refit(const LayerProblem& problem, const at::Tensor& W, Refine refine, const PcgOptions& options = {});

}  // namespace alps::prune
