#pragma once
// Which of a block's linears are solved together on one CUDA stream (core/device_streams.h) when a run solves several
// at once (--solve-streams).
#include <cstddef>
#include <vector>

namespace alps::pipeline {

/// Splits the linears 0 .. n - 1 (n = cost.size()) into at most `streams` non-empty lists. Linears of one `group`
/// (those that read one input: q/k/v, gate/up) stay in one list, because they share factorizations made on its
/// stream; groups go, the costliest first, to the list with the least cost so far (the first list gets the costliest
/// group: run_on_streams runs it at the lower priority), and each list keeps block order.
/// cost: a linear's in^2 * out, the product of an ADMM or PCG iteration, which dominates every method's solve.
std::vector<std::vector<size_t>> split_among_streams(const std::vector<double>& cost, const std::vector<int>& group,
                                                     int streams);

}  // namespace alps::pipeline
