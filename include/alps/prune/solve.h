#pragma once
// One layer, one method, optional refit: the timed solve that `alps solve-layer`, `alps prune` and the layer
// benchmark all report in the same terms.
#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "alps/prune/method.h"
#include "alps/prune/refit.h"

namespace alps::prune {

struct LayerResult {
  Solution solution;                        ///< the method's own output
  at::Tensor W;                             ///< after the refit (solution.W when none)
  double seconds = 0;                       ///< method solve, device work finished
  double refine_seconds = 0;
  std::optional<double> rel_error;          ///< of solution.W (docs/algorithms.md); unset without statistics
  std::optional<double> rel_error_refined;  ///< of W, when a refit ran
  double sparsity = 0;                      ///< achieved fraction of zeros in W
};

/// Checks the problem (shapes, finiteness, a gram that is a Gram matrix: check_gram; `source`, e.g. the problem
/// file, goes into its messages), solves, refits (keeping the support), checks W against `pattern` (alps::Error if
/// violated) and measures. Negative or non-finite errors are alps::Error (relative_error).
LayerResult solve_layer(const Method& method, const LayerProblem& problem, const Pattern& pattern, Refine refine,
                        const PcgOptions& pcg = {}, const std::string& source = "");
/// A method that reads only the weight (Method::needs_statistics() false) on a problem that holds no statistics:
/// solves, checks W against `pattern` and measures its sparsity; no error can be measured without them.
LayerResult solve_layer_without_statistics(const Method& method, const LayerProblem& problem, const Pattern& pattern);

}  // namespace alps::prune
