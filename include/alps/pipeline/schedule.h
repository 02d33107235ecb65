#pragma once
// Who solves which of a block's linears, and when (docs/distributed.md, docs/gpu.md): a pure function of the
// linears' shapes and the world, with one cost model. A group of linears that read one input (q/k/v, gate/up; they
// share G and its factorizations) goes to one rank, or, when its method solves parts of a layer's rows together
// (Method::splits_rows: ALPS) and that shortens the block, to several ranks that each solve a share of every linear's
// rows. On a rank, its linears are split into lists that run at once, each on a CUDA stream of its own
// (--solve-streams). Every rank computes the same schedule from the shapes alone.
#include <cstdint>
#include <string_view>
#include <vector>

namespace alps::pipeline {

/// --dist-split: auto splits a group over ranks where the cost model says the block's solves end sooner (on GPUs
/// only: RunPlan resolves it); off never splits; all splits every group whose method can over every rank (or as many
/// as it has rows).
enum class SplitRule { kAuto, kOff, kAll };
SplitRule parse_split_rule(std::string_view text);

/// A block's linears, by index.
struct SolveWork {
  std::vector<int64_t> in, out;  ///< each linear's weight shape [out, in]; out = 0 for a linear left dense
  std::vector<int> group;        ///< linears of one group share an id: the index of its first linear
  std::vector<bool> splits;      ///< the linear's method solves parts of its rows
};

/// The cost model, in the units of one product: one part (of `parts`) of a group whose linears' products sum to
/// `products` (in^2 out each: an ADMM or PCG iteration, which dominates every method's solve) and whose widest
/// input is `in`. The products divide among the parts; the factorizations do not: every part makes them again,
/// taken as in^3 / 10 (on an H100 a LLaMA-70B down_proj's factorizations took 2.2 s beside 10.3 s of products,
/// 0.06 in^3; an eigendecomposition costs more).
double part_cost(double products, double in, int parts);

/// For each linear, the ranks that solve it in part order: one rank solves it whole; several each solve their part
/// (dist::share_of the rows, the larger parts first). The linears of one group get the same ranks. Groups and parts
/// go longest first (part_cost) to the least loaded rank that holds no other part of the group (longest processing
/// time). auto then gives one more part to the group with the costliest part, as long as the largest rank's load
/// goes down.
std::vector<std::vector<int>> plan_ranks(const SolveWork& work, int world, SplitRule rule);

/// Splits the linears 0 .. n - 1 (n = cost.size()) into at most `streams` non-empty lists. Linears of one `group`
/// stay in one list, because they share factorizations made on its stream; groups go, the costliest first (a
/// group's cost: its linears' summed), to the list with the least cost so far (the first list gets the costliest
/// group: run_on_streams runs it at the lower priority), and each list keeps block order.
std::vector<std::vector<size_t>> split_among_streams(const std::vector<double>& cost, const std::vector<int>& group,
                                                     int streams);

/// The processes of a run as a schedule sees them.
struct World {
  int rank = 0;
  int size = 1;
  int streams = 1;  ///< concurrent solve lists on this rank
  SplitRule split = SplitRule::kOff;
};

struct Schedule {
  int rank = 0;                          ///< the rank this schedule was made for
  std::vector<std::vector<int>> ranks;   ///< per linear, plan_ranks's
  std::vector<int> group;                ///< per linear, SolveWork's
  std::vector<bool> solved;              ///< per linear: not left dense
  /// This rank's linears (whole or its part of them) in concurrent lists; the parts first in each list, in block
  /// order: a part waits for the other ranks' parts at every iteration, and every rank reaches them in one order.
  std::vector<std::vector<size_t>> lists;

  /// Whether several ranks solve linear li, each a part of its rows.
  bool in_parts(size_t li) const { return ranks[li].size() > 1; }
  /// This rank's part of linear li (its index in ranks[li]), or -1 when it solves none of it.
  int part_of(size_t li) const;
};

/// The block's schedule on `world.rank`.
Schedule schedule_block(const SolveWork& work, const World& world);

}  // namespace alps::pipeline
