#pragma once
// The whole-model pipeline (docs/pipeline.md): calibration windows -> block 0 inputs -> for each block: statistics
// pass, prune every linear, pruned pass for the next inputs; resumable after every block.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "alps/dist/launch.h"
#include "alps/pipeline/prune_job.h"
#include "alps/report/report.h"

namespace alps::pipeline {

/// Runs the job after checking everything that can be checked before any work (recipe, pattern against every
/// layer's shape, methods and their options, calibration file, output directory: see output_dir.h); throws
/// alps::Error naming what is wrong. The pruned checkpoint and alps-report.json replace out_dir in one step when the
/// run completes; until then out_dir holds what it held plus the resume state. Returns the report ("complete" false
/// when stopped early by stop_after). Started by a launcher (torchrun, srun, --nproc: `launch`), it is one rank of a
/// distributed run (docs/distributed.md): the ranks first agree on the job, then rank 0 writes the output and returns
/// the run's report; the others return theirs (their blocks' share of the work) and write nothing but their shards of
/// the resume state.
report::RunReport run_prune(const PruneJob& job, const dist::Launch& launch = {});

}  // namespace alps::pipeline
