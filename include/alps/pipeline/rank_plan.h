#pragma once
// Which ranks of a distributed run solve which of a block's linears (docs/distributed.md). A group of linears that
// read one input (q/k/v, gate/up; they share G and its factorizations) goes to one rank, or, when its method solves
// parts of a layer's rows together (Method::splits_rows: ALPS) and that shortens the block, to several ranks that each
// solve a share of every linear's rows. Every rank computes the same plan from the shapes alone.
#include <cstdint>
#include <string_view>
#include <vector>

namespace alps::pipeline {

/// --dist-split: auto splits a group over ranks where the cost model says the block's solves end sooner (the
/// pipeline asks for it on GPUs only); off never splits; all splits every group whose method can over every rank (or
/// as many as it has rows).
enum class SplitRule { kAuto, kOff, kAll };
SplitRule parse_split_rule(std::string_view text);

/// A block's linears, by index.
struct SolveWork {
  std::vector<int64_t> in, out;  ///< each linear's weight shape [out, in]; out = 0 for a linear left dense
  std::vector<int> group;        ///< linears of one group share an id (split_among_streams' groups)
  std::vector<bool> splits;      ///< the linear's method solves parts of its rows
};

/// For each linear, the ranks that solve it in part order: one rank solves it whole; several each solve their part
/// (dist::share_of the rows, the larger parts first). The linears of one group get the same ranks. Groups and parts
/// go longest first to the least loaded rank that holds no other part of the group (longest processing time). A part
/// of a group costs its products (every linear's in^2 out, divided among the parts) and its factorizations, which
/// every part makes again (taken as in^3 / 10 in the same units: on an H100, a LLaMA-70B down_proj's factorizations
/// took 2.2 s beside 10.3 s of products, 0.06 in^3; an eigendecomposition costs more). auto then gives one more part
/// to the group with the costliest part, as long as the largest rank's load goes down.
std::vector<std::vector<int>> plan_ranks(const SolveWork& work, int world, SplitRule rule);

}  // namespace alps::pipeline
