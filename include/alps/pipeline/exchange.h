#pragma once
// What the ranks of a distributed run tell each other about a block (docs/distributed.md): the statistics reduced to
// the ranks that solve each linear, the sums that couple the parts of a linear solved on several ranks, the pruned
// weights and reports shared with every rank, and their agreement on the job before any work. Everything that talks
// to c10d goes through here; with one process each step does nothing beyond handing a block's outcomes to the model.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "alps/dist/group.h"
#include "alps/pipeline/schedule.h"

namespace alps::model {
class CausalLM;
}
namespace alps::prune {
struct RowSplit;
}

namespace alps::pipeline {

class LayerStats;
class Phases;
class StateDir;
struct Outcome;

/// f() on every rank of `group`; when it failed on some rank, every rank stops: the failed ones with their own error,
/// the others with one naming the first that failed.
template <typename F>
auto on_every_rank(dist::Group& group, const std::string& what, F&& f) -> decltype(f()) {
  std::string failed;
  std::exception_ptr error;
  using R = decltype(f());
  std::optional<std::conditional_t<std::is_void_v<R>, bool, R>> result;
  try {
    if constexpr (std::is_void_v<R>) {
      f();
      result = true;
    } else {
      result.emplace(f());
    }
  } catch (const std::exception& e) {
    failed = e.what();
    error = std::current_exception();
  }
  group.agree(failed, what);
  if (error) std::rethrow_exception(error);
  if constexpr (!std::is_void_v<R>) return std::move(*result);
}

class Exchange {
 public:
  /// `device`: where this rank computes (its statistics and weights).
  Exchange(dist::Group& group, c10::Device device, Phases& phases) : group_(group), device_(device), phases_(phases) {}

  /// The world a block's schedule is made for.
  World world(int streams, SplitRule split) const { return {group_.rank(), group_.size(), streams, split}; }
  /// Rank 0 writes the output and evaluates; it alone keeps the weights of finished blocks.
  bool writes_output() const { return group_.rank() == 0; }

  int rank() const { return group_.rank(); }
  /// pipeline::on_every_rank over this run's ranks.
  template <typename F>
  auto on_every_rank(const std::string& what, F&& f) -> decltype(f()) {
    return pipeline::on_every_rank(group_, what, std::forward<F>(f));
  }
  /// Every rank's job (`key()`: job_key, computed only where there are other ranks to compare with) must be rank
  /// 0's: otherwise every rank stops before any work, naming each field that differs and the ranks.
  void agree_on_job(const std::function<nlohmann::json()>& key);
  /// Rank 0's decision, on every rank.
  bool rank0_says(bool yes, const std::string& what);

  /// The windows [first, end) of `windows` calibration windows this rank holds (all of them at one process).
  std::pair<int64_t, int64_t> windows(int64_t windows) const;
  /// The window ranges of the resume state's input files, one per rank (none at one process: one file).
  std::vector<std::pair<int64_t, int64_t>> input_shards(int64_t windows) const;
  /// Lets the ranks write one resume state together (StateDir::share): each its shard of the inputs, rank 0 the rest.
  void share_state(StateDir& dir);

  /// `t` becomes its sum over the ranks, the same bits on all.
  void sum(at::Tensor& t, const std::string& what) { group_.all_reduce_sum(t, what); }
  /// `t` (the same shape and dtype on every rank) becomes rank 0's, bit for bit.
  void from_rank0(at::Tensor& t, const std::string& what) { group_.broadcast(t, 0, what); }
  /// One input's statistics summed from every rank's windows into rank 0, where a structured step chooses its units
  /// (reduce() moves them on to the linear's solver afterwards).
  void reduce_to_rank0(LayerStats& s, const std::string& what);
  /// Block b's statistics (`inputs[li]`: linear li's) summed from every rank's windows into the lowest rank that
  /// solves each group of linears, and from it to the others that solve parts of them.
  void reduce(const Schedule& s, const std::vector<LayerStats*>& inputs, const std::string& block);
  /// How this rank's part of linear li meets the other parts: null when it solves the linear whole.
  std::shared_ptr<const prune::RowSplit> split(const Schedule& s, size_t li, int64_t rows, const std::string& what);
  /// The block's pruned weights into every rank's model (each whole from its rank, each part from the rank that
  /// solved it) and every linear's report to every rank (from the first rank that solved it).
  void share(const Schedule& s, std::vector<Outcome>& outcomes, model::CausalLM& m, const std::string& block);
  /// The pruned weights of a finished block: ranks that write no output drop them (the mapped checkpoint's pages
  /// serve again), so that each holds one block's weights, not the pruned model.
  void retire(model::CausalLM& m, const std::vector<std::pair<std::string, at::Tensor>>& pruned);

  /// The report's "distributed" entry after `blocks` blocks: the world, its backend and ranks, and the bytes
  /// exchanged per block; null for a process no launcher started.
  nlohmann::json describe(const dist::Launch& launch, int64_t blocks) const;

 private:
  dist::Group* parts_group(const Schedule& s, size_t li);
  void share_reports(const Schedule& s, std::vector<Outcome>& outcomes, int64_t blocks_total);

  dist::Group& group_;
  c10::Device device_;
  Phases& phases_;
  // The groups of ranks that solve a group of linears in parts, by (name, members); opened once for the run (the plan
  // is the same for blocks of the same shapes), one per group of linears so that concurrent solves never share one.
  std::map<std::pair<std::string, std::vector<int>>, std::unique_ptr<dist::Group>> parts_;
};

}  // namespace alps::pipeline
