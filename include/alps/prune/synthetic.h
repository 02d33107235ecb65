#pragma once
// Synthetic layer problems whose inputs look like LLM activations: correlated features, a few outlier
// features tens of times larger than the rest, non-zero means, heavy-tailed weights.
#include <cstdint>

#include "alps/core/tensor_fwd.h"
#include "alps/prune/problem.h"

namespace alps::prune {

struct SyntheticOptions {
  int64_t out = 256;               ///< rows of W0
  int64_t in = 256;                ///< inputs
  int64_t tokens = 1024;           ///< T, rows of X
  int64_t factors = 16;            ///< rank of the shared low-rank component that correlates the features
  double correlation = 0.7;        ///< share of each feature's variance coming from the shared factors
  double outlier_fraction = 0.02;  ///< fraction of inputs that are outlier features (at least one when > 0)
  double outlier_scale = 30.0;     ///< outlier features are this many times larger than the rest
  double mean_scale = 0.5;         ///< per-feature means ~ N(0, mean_scale^2) before outlier scaling
  double weight_dof = 3.0;         ///< Student-t degrees of freedom of W0 entries (heavy tails)
  uint64_t seed = 0;
};

/// X [tokens, in] (fp32, CPU), deterministic in options.seed; make_synthetic_problem() uses exactly these inputs.
at::Tensor make_synthetic_inputs(const SyntheticOptions& options);
/// (W0, G = X^T X, mean, T) from make_synthetic_inputs(); fp32 on CPU, name "synthetic".
LayerProblem make_synthetic_problem(const SyntheticOptions& options);

}  // namespace alps::prune
