#pragma once
// The whole-model pipeline (docs/pipeline.md): calibration windows -> block 0 inputs -> for each block: statistics
// pass, prune every linear, pruned pass for the next inputs; resumable after every block.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "alps/dist/group.h"
#include "alps/pipeline/rank_plan.h"
#include "alps/pipeline/recipe.h"
#include "alps/report/report.h"

namespace alps::pipeline {

struct PruneJob {
  std::filesystem::path model_dir;
  std::filesystem::path out_dir;
  std::filesystem::path data_dir;        ///< for "c4" calibration and evaluation datasets
  Recipe recipe;
  bool overwrite = false;                ///< replace an existing alps output directory
  bool resume = false;                   ///< continue from the state saved in out_dir
  int64_t stop_after = -1;               ///< prune at most this many blocks in this run, then stop resumably
  std::filesystem::path dump_problems;   ///< when set, every layer problem is written there (solve-layer format)
  bool eval_dense = false;               ///< evaluate the input model as --eval evaluates the pruned one (cached)
  /// A distributed run's backend and timeout (--dist-backend, --dist-timeout); whether the run is one is read from
  /// the launch variables (dist/launch.h).
  dist::GroupOptions dist;
  /// Whether a distributed run solves a linear's rows on several ranks (--dist-split; rank_plan.h).
  SplitRule dist_split = SplitRule::kAuto;
};

/// Runs the job after checking everything that can be checked before any work (recipe, pattern against every
/// layer's shape, methods and their options, calibration file, output directory: see output_dir.h); throws
/// alps::Error naming what is wrong. The pruned checkpoint and alps-report.json replace out_dir in one step when the
/// run completes; until then out_dir holds what it held plus the resume state. Returns the report ("complete" false
/// when stopped early by stop_after). Started by a launcher (torchrun, srun, --nproc), it is one rank of a
/// distributed run (docs/distributed.md): rank 0 writes the output and returns the run's report; the others return
/// theirs (their blocks' share of the work) and write nothing but their shards of the resume state.
report::RunReport run_prune(const PruneJob& job);

}  // namespace alps::pipeline
