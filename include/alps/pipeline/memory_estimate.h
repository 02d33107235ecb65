#pragma once
// Host and device memory of an `alps prune` run: estimated before it starts (printed, so that a user can stop a
// run that cannot fit) and measured when it ends, both kept in the report so that the estimate can be checked.
#include <nlohmann/json.hpp>

#include "alps/pipeline/run_plan.h"

namespace alps::model {
class CausalLM;
}

namespace alps::pipeline {

/// The estimate, in GiB per part, with the formula it follows, for a process that holds `windows` calibration windows
/// and runs `batch_size` of them at a time.
nlohmann::json memory_estimate(const model::CausalLM& m, const RunPlan& plan, int64_t windows, int64_t batch_size);
/// Logs the estimate on one line.
void log_memory_estimate(const nlohmann::json& estimate, const c10::Device& device);
/// Adds the peak resident set size and the device's peak to `estimate`'s report entry (`extra`), logging the latter.
void record_peak_memory(nlohmann::json& extra, const c10::Device& device);

}  // namespace alps::pipeline
