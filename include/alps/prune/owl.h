#pragma once
// OWL, outlier-weighted layer-wise sparsity (Yin et al., ICML 2024; docs/algorithms.md): blocks whose Wanda scores
// have more outliers keep more weights, and the blocks' sparsities average to the requested one. What is measured per
// block and how it becomes sparsities; the pipeline measures it on the dense model (pipeline/sparsity_profile.cc).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

namespace alps::prune {

struct OwlOptions {
  double m = 5;         ///< an entry is an outlier above m times the mean score of its block (OWL's M)
  double lambda = 0.08; ///< the block sparsities span 2 lambda around the target (OWL's lambda)
};

/// What is wrong with OWL's constants for target sparsity s, "" if nothing: m > 0, 0 <= lambda, s +- lambda inside
/// (0, 1) (the allocation's range is 2 lambda wide around s, so no block could leave it).
std::string owl_options_problem(const OwlOptions& o, double sparsity);
/// The same for OWL's mixed N:M variant around n kept of every m (lambda counts entries of a group here): m > 0,
/// lambda > 0.5 (below it no block's count would change), n - lambda >= 1 and n + lambda <= m (no block may keep
/// none, nor more than the group).
std::string owl_nm_options_problem(const OwlOptions& o, int64_t n, int64_t m);

/// OWL's statistic of one block: the fraction of the scores of all its linears, pooled, above m times their mean
/// (the scores: Wanda's, prune/methods/wanda.h, with OWL's scaler_row, the sums of squares over the windows).
double outlier_fraction(const std::vector<at::Tensor>& block_scores, double m);

/// Each block's sparsity from the blocks' outlier fractions D_b (OWL's allocation, in fp64): r = (D - min D) 2 lambda
/// / (max D - min D), shifted so that mean(r) = 1 - s; block b's sparsity is 1 - r_b. Blocks with equal D (or
/// lambda = 0) all get s.
std::vector<double> owl_block_sparsities(const std::vector<double>& outlier_fractions, double sparsity,
                                         double lambda);

/// OWL's mixed N:M variant (the one its authors document; docs/algorithms.md):
/// block b keeps n + round(r_b - mean(r)) of every m, r = (D - min D) lambda / (max D - min D), rounded half to even
/// as numpy does. lambda is the width of the range in kept entries per group (OWL's README runs 2). The blocks' mean
/// is n only up to that rounding, as in OWL.
std::vector<int64_t> owl_block_kept(const std::vector<double>& outlier_fractions, int64_t n, double lambda);

/// The zeros of each linear under a profile, so that they total round(s N) over the linears' N weights exactly
/// (per-block or per-layer roundings would drift): linear l's quota is its block's sparsity times its size,
/// scaled to that total; each gets its quota's floor and the largest remainders one more (ties: the earlier
/// linear). sparsity[l]: linear l's block's sparsity; numel[l]: its size.
std::vector<int64_t> apportion_zeros(const std::vector<double>& sparsity, const std::vector<int64_t>& numel,
                                     double s);

}  // namespace alps::prune
