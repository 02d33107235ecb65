#pragma once
// The solves of a block's linears (docs/pipeline.md): each linear's problem (its dense weight, the statistics of its
// input, this rank's part of its rows) in, its outcome (the pruned weight and its report) out. Nothing here writes
// the model: the exchange hands the outcomes to it. On a GPU a rank's lists of linears run at once, each on a CUDA
// stream of its own (--solve-streams).
#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "alps/pipeline/schedule.h"
#include "alps/report/report.h"

namespace alps::model {
class CausalLM;
}
namespace alps::prune {
struct RowSplit;
}

namespace alps::pipeline {

struct LayerJob;
class LayerStats;
class Phases;

/// One linear of a block, after its solve.
struct Outcome {
  std::string weight;  ///< checkpoint tensor name
  std::string linear;  ///< short name in the block ("mlp.down_proj")
  report::LayerReport report;
  /// The pruned weight, or this rank's rows of it when ranks solve it in parts: on the host in the checkpoint's dtype.
  /// Undefined when left dense or solved by other ranks.
  at::Tensor W;
  /// The method's order of the inputs for its N:M groups (prune::Solution::input_order), on the host; undefined when
  /// it kept the model's.
  at::Tensor input_order{};
};

/// What every solve of a run shares.
struct SolveSettings {
  c10::Device device{c10::kCPU};
  int64_t blocks_total = 0;
  int64_t refine_iterations = 0;  ///< PCG iterations of --refine pcg
  std::filesystem::path dump_problems;  ///< when set, every layer problem is written there
  bool replace_dumps = false;     ///< a resumed run writes again the problems of a block it redoes
};

/// One linear's solve: `W0` its whole dense weight, `stats` the statistics of its input (null: the run collected
/// none), `split` this rank's part of its rows (null: the whole; the statistics are the whole layer's either way).
Outcome solve_linear(int64_t b, const LayerJob& job, const std::string& linear, const at::Tensor& W0,
                     LayerStats* stats, std::shared_ptr<const prune::RowSplit> split, const SolveSettings& settings,
                     Phases& phases);

/// The block's work as the schedule sees it: shapes from the model, groups from the statistics (`inputs[li]`: linear
/// li's, or null when the run collected none; linears that read one input are solved together), left dense as the
/// jobs say.
SolveWork block_work(const std::vector<LayerJob>& jobs, const model::CausalLM& m,
                     const std::vector<LayerStats*>& inputs);

/// How this rank's part of linear li (of `rows` rows) meets the other parts while `what` runs; null when this rank
/// solves it whole (Exchange::split).
using SplitOf = std::function<std::shared_ptr<const prune::RowSplit>(size_t li, int64_t rows, const std::string& what)>;

/// The linears this rank solves in block b, as the schedule lists them, concurrently where it has several lists;
/// after a failure the other lists start no further linear. Every outcome names its linear (`linears[li]`, within
/// the block, beside `jobs[li]`); the others' reports come from the exchange.
std::vector<Outcome> solve_block(int64_t b, const Schedule& s, const std::vector<LayerJob>& jobs,
                                 const std::vector<std::string>& linears, const std::vector<LayerStats*>& inputs,
                                 const model::CausalLM& m, const SplitOf& split_of, const SolveSettings& settings,
                                 Phases& phases);

}  // namespace alps::pipeline
