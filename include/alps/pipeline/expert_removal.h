#pragma once
// The experts --remove-experts takes from each mixture block (docs/moe.md): every expert scored on the calibration
// tokens routed to it, REAP's saliency (the mean over those tokens of the routing probability times the norm of the
// expert's output) or how often it is routed, the lowest removed from the model and the others renumbered, before the
// block's statistics are collected for the solves.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alps/model/causal_lm.h"
#include "alps/pipeline/run_plan.h"

namespace alps::pipeline {

class Activations;
class Exchange;
class Phases;

/// Removes block b's experts as the plan's experts step says (nothing where the plan has no such step or the block
/// no mixture); its report (block, router, experts kept, every expert's score and tokens, the share of the routed
/// output removed) joins `reports`. Returns what changed in the model (CausalLM::keep_experts; empty: nothing). The
/// scores sum every rank's windows, so that every rank keeps the same experts.
model::KeptExperts remove_experts(int64_t b, const RunPlan& plan, model::CausalLM& m, Activations& windows,
                                  Exchange& exchange, Phases& phases, nlohmann::json& reports);

/// Removes from `m` again the experts that the finished blocks' reports (those remove_experts added) say were
/// removed: a resumed run's model before its saved blocks are read.
void replay_expert_removal(model::CausalLM& m, const nlohmann::json& reports);

/// `jobs` after `renamed` (KeptExperts::renamed): the removed experts' linears dropped, each kept one under its new
/// name with the job its input name was given (recipe rules name the input's experts).
std::vector<LayerJob> renamed_jobs(const std::vector<LayerJob>& jobs,
                                   const std::map<std::string, std::string>& renamed);

}  // namespace alps::pipeline
