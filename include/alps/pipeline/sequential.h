#pragma once
// The whole-model pipeline (SPEC §5): calibration windows -> block 0 inputs -> for each block: statistics pass,
// prune every linear, pruned pass for the next inputs; resumable after every block.
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
  bool overwrite = false;                ///< replace an existing output directory
  bool resume = false;                   ///< continue from the state saved in out_dir
  int64_t stop_after = -1;               ///< prune at most this many blocks in this run, then stop resumably
  std::filesystem::path dump_problems;   ///< when set, every layer problem is written there (solve-layer format)
};

/// Checks everything that can be checked before work starts (recipe, pattern vs every layer's shape, methods and
/// their options, calibration file, output directory); throws alps::Error naming what is wrong.
void validate_job(const PruneJob& job);

/// Runs the job. The pruned checkpoint and alps-report.json appear in out_dir only when the run completes; until
/// then out_dir holds only the resume state. Returns the report ("complete" false when stopped early).
report::RunReport run_prune(const PruneJob& job);

/// Name of the resume-state subdirectory inside the output directory.
inline constexpr const char* kStateDir = ".alps-state";

}  // namespace alps::pipeline
