#pragma once
// A block's structured steps (docs/structured.md): the units (MLP neurons, attention heads) each step's method keeps,
// chosen from the statistics of the input of the linear that reads them; the model keeps them, and those statistics
// keep their columns, so that any unstructured solve of the block after works on what is left.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alps/model/causal_lm.h"

namespace alps::pipeline {

class BlockStats;
class Exchange;
class Phases;
class RunPlan;

/// Runs the plan's steps on block b; returns the names of the tensors they changed. Each step's report (block,
/// linear, kind of unit, units kept, error, seconds, the method's numbers) joins `reports`. With several ranks, rank 0
/// chooses on the statistics of every rank's windows and the others take its choice.
std::vector<std::string> remove_units(int64_t b, const RunPlan& plan, model::CausalLM& m, BlockStats& stats,
                                      Exchange& exchange, Phases& phases, nlohmann::json& reports);

/// The run's structured figures beside the blocks' reports: the method and its constants, each step as planned, and
/// the parameters and weight-file bytes of the input, the parameters after.
void describe_unit_steps(const RunPlan& plan, const nlohmann::json& options, int64_t parameters_before,
                         int64_t parameters_after, int64_t weight_bytes_before, nlohmann::json& structured);

/// "neurons", "heads", "kv_groups".
std::string structure_name(model::Structure s);

}  // namespace alps::pipeline
