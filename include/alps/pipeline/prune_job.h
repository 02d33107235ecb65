#pragma once
// One `alps prune` job as the command line gives it: the model, the output, the recipe and what to do with an output
// that exists (docs/pipeline.md).
#include <cstdint>
#include <filesystem>

#include "alps/pipeline/recipe.h"

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

}  // namespace alps::pipeline
