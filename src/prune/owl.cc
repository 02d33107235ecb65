#include "alps/prune/owl.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <string>

#include "alps/core/error.h"

namespace alps::prune {

std::string owl_options_problem(const OwlOptions& o, double sparsity) {
  if (!(o.m > 0)) return fmt::format("M must be > 0, got {}", o.m);
  if (!(o.lambda >= 0)) return fmt::format("lambda must be >= 0, got {}", o.lambda);
  if (sparsity - o.lambda <= 0 || sparsity + o.lambda >= 1)
    return fmt::format("lambda {} would put block sparsities outside (0, 1) around {} (they span {} .. {})", o.lambda,
                       sparsity, sparsity - o.lambda, sparsity + o.lambda);
  return "";
}

double outlier_fraction(const std::vector<at::Tensor>& block_scores, double m) {
  ALPS_CHECK(!block_scores.empty(), "outlier_fraction: no scores");
  std::vector<at::Tensor> flat;
  for (const auto& s : block_scores) flat.push_back(s.reshape({-1}).to(at::kFloat));
  const at::Tensor pooled = at::cat(flat);
  // OWL: torch.mean of the pooled fp32 scores, times M, as the threshold; strictly above it counts.
  const at::Tensor threshold = pooled.mean() * m;
  return static_cast<double>(pooled.gt(threshold).sum().item<int64_t>()) / static_cast<double>(pooled.numel());
}

std::vector<double> owl_block_sparsities(const std::vector<double>& outlier_fractions, double sparsity,
                                         double lambda) {
  ALPS_CHECK(!outlier_fractions.empty(), "owl_block_sparsities: no blocks");
  const auto [lo, hi] = std::minmax_element(outlier_fractions.begin(), outlier_fractions.end());
  const size_t n = outlier_fractions.size();
  std::vector<double> r(n, 0.0);
  if (*hi > *lo)
    for (size_t b = 0; b < n; ++b) r[b] = (outlier_fractions[b] - *lo) * (1.0 / (*hi - *lo) * lambda * 2);
  const double mean = std::accumulate(r.begin(), r.end(), 0.0) / static_cast<double>(n);
  std::vector<double> s(n);
  for (size_t b = 0; b < n; ++b) s[b] = 1.0 - (r[b] - mean + (1.0 - sparsity));
  return s;
}

}  // namespace alps::prune
