#pragma once
// The whole-model pipeline (docs/pipeline.md): calibration windows -> block 0 inputs -> for each block: statistics
// pass, prune every linear, pruned pass for the next inputs; resumable after every block.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

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
};

/// Runs the job after checking everything that can be checked before any work (recipe, pattern against every
/// layer's shape, methods and their options, calibration file, output directory: see output_dir.h); throws
/// alps::Error naming what is wrong. The pruned checkpoint and alps-report.json replace out_dir in one step when the
/// run completes; until then out_dir holds what it held plus the resume state. Returns the report ("complete" false
/// when stopped early by stop_after).
report::RunReport run_prune(const PruneJob& job);

}  // namespace alps::pipeline
