#include "alps/prune/owl.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
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

std::string owl_nm_options_problem(const OwlOptions& o, int64_t n, int64_t m) {
  if (!(o.m > 0)) return fmt::format("M must be > 0, got {}", o.m);
  if (!(o.lambda > 0.5))  // |r_b - mean| < lambda rounds to 0 for every block: the profile would change nothing
    return fmt::format("lambda {} would change no block's count: with an N:M pattern lambda counts kept entries of a "
                       "group (OWL's README runs 2)", o.lambda);
  if (static_cast<double>(n) - o.lambda < 1 || static_cast<double>(n) + o.lambda > static_cast<double>(m))
    return fmt::format("lambda {} would let a block keep {} .. {} of every {} around {}:{} (N:M lambda counts "
                       "entries of a group: it must leave 1 .. {})", o.lambda, static_cast<double>(n) - o.lambda,
                       static_cast<double>(n) + o.lambda, m, n, m, m);
  return "";
}

namespace {
// r_b - mean(r) with r_b = (D_b - min D) (1 / (max D - min D) width) in fp64, in OWL's order of operations; all 0
// when the blocks' statistics are equal.
std::vector<double> centred_spread(const std::vector<double>& outlier_fractions, double width) {
  ALPS_CHECK(!outlier_fractions.empty(), "OWL: no blocks");
  const auto [lo, hi] = std::minmax_element(outlier_fractions.begin(), outlier_fractions.end());
  const size_t n = outlier_fractions.size();
  std::vector<double> r(n, 0.0);
  if (*hi > *lo)
    for (size_t b = 0; b < n; ++b) r[b] = (outlier_fractions[b] - *lo) * (1.0 / (*hi - *lo) * width);
  const double mean = std::accumulate(r.begin(), r.end(), 0.0) / static_cast<double>(n);
  for (double& x : r) x -= mean;
  return r;
}
}  // namespace

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
  // OWL scales by (1 / (max - min) * lambda) * 2; scaling by 2 is exact, so lambda * 2 as the width is the same.
  const std::vector<double> r = centred_spread(outlier_fractions, lambda * 2);
  std::vector<double> s(r.size());
  for (size_t b = 0; b < r.size(); ++b) s[b] = 1.0 - (r[b] + (1.0 - sparsity));
  return s;
}

std::vector<int64_t> owl_block_kept(const std::vector<double>& outlier_fractions, int64_t n, double lambda) {
  const std::vector<double> r = centred_spread(outlier_fractions, lambda);
  std::vector<int64_t> kept(r.size());
  for (size_t b = 0; b < r.size(); ++b) kept[b] = n + static_cast<int64_t>(std::nearbyint(r[b]));  // half to even
  return kept;
}

std::vector<int64_t> apportion_zeros(const std::vector<double>& sparsity, const std::vector<int64_t>& numel,
                                     double s) {
  ALPS_CHECK(sparsity.size() == numel.size(), "apportion_zeros: ", sparsity.size(), " sparsities for ",
             numel.size(), " linears");
  const size_t n = numel.size();
  if (n == 0) return {};
  const int64_t weights = std::accumulate(numel.begin(), numel.end(), int64_t{0});
  const auto total = static_cast<int64_t>(std::llround(s * static_cast<double>(weights)));
  double quota_sum = 0;
  for (size_t l = 0; l < n; ++l) quota_sum += sparsity[l] * static_cast<double>(numel[l]);
  ALPS_CHECK(quota_sum > 0 || total == 0, "apportion_zeros: no zeros to share, yet ", total, " wanted");
  std::vector<int64_t> zeros(n);
  std::vector<double> remainder(n);
  int64_t given = 0;
  for (size_t l = 0; l < n; ++l) {
    const double quota =
        quota_sum > 0 ? sparsity[l] * static_cast<double>(numel[l]) * static_cast<double>(total) / quota_sum : 0.0;
    zeros[l] = std::min(static_cast<int64_t>(std::floor(quota)), numel[l] - 1);
    remainder[l] = quota - static_cast<double>(zeros[l]);
    given += zeros[l];
  }
  ALPS_CHECK(total <= weights - static_cast<int64_t>(n), "apportion_zeros: ", total, " zeros in ", weights,
             " weights would leave a linear empty");
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return remainder[a] > remainder[b]; });
  for (size_t i = 0; given < total; i = (i + 1) % n) {
    const size_t l = order[i];
    if (zeros[l] + 1 < numel[l]) {
      ++zeros[l];
      ++given;
    }
  }
  return zeros;
}

}  // namespace alps::prune
