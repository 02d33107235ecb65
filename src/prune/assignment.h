#pragma once
// Private: the linear sum assignment problem, which RIA's channel permutation solves to move channels between N:M
// groups.
#include <cstdint>
#include <vector>

namespace alps::prune::detail {

/// For an n x n matrix `value` (row-major), the permutation col[r] (each column once) that maximises
/// sum_r value[r * n + col[r]]: shortest augmenting paths with row and column potentials (Jonker and Volgenant),
/// O(n^3), in double.
std::vector<int64_t> max_weight_assignment(const std::vector<double>& value, int64_t n);

}  // namespace alps::prune::detail
