#pragma once
// The checks of an `alps prune` job before any work (pipeline/sequential.cc): the plan built from the recipe
// against the model, the output and calibration paths, the resume state's inputs against the command's, and the
// fingerprint that every rank of a distributed run must share.
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "alps/dist/group.h"
#include "alps/dist/launch.h"
#include "alps/eval/evaluate.h"
#include "alps/pipeline/output_dir.h"
#include "alps/pipeline/resume_state.h"
#include "alps/pipeline/run_plan.h"
#include "alps/pipeline/prune_job.h"

namespace alps::tokenizer {
class Tokenizer;
}

namespace alps::pipeline {

OutputRequest output_request(const PruneJob& job);
/// How `--eval` scores: perplexity over the plan's windows, zero-shot tasks with lm-eval's defaults and the
/// recipe's document limit.
eval::PerplexityOptions perplexity_options(const Recipe& r, const RunPlan& plan);
eval::ZeroShotOptions zeroshot_options(const Recipe& r);

/// Everything about the job that can be checked before any work, given the loaded (memory-mapped) model and its
/// tokenizer (loading checked both); returns the plan it built. `first`: rank 0 of a distributed run (or the one
/// process), which alone checks (and tidies) the output path and evaluates.
std::unique_ptr<RunPlan> validate_with(const PruneJob& job, const model::CausalLM& m, const tokenizer::Tokenizer& tok,
                                       bool first);

/// Where the calibration text is, when the run reads one; empty otherwise.
std::filesystem::path calibration_source(const PruneJob& job, const RunPlan& plan);

/// The interrupted run's state, trusted only for the same recipe, model files and calibration text; `tidy`: remove
/// what a run that died while saving left (one rank does it).
ResumeState load_resume_state(const PruneJob& job, const RunPlan& plan, const StateDir& dir, bool tidy);

/// What the ranks of a distributed run must agree on before any work (Exchange::agree_on_job): the resume key, with
/// the model's files compared by their whole content instead of their time (node-local copies are made at different
/// times, and may hold other versions), the alps source revision, and what every rank must do alike
/// (--dist-split, --dist-backend, --stop-after).
nlohmann::json job_key(const PruneJob& job, const RunPlan& plan);

/// A rank of a distributed run computes on its own GPU: --device auto or cuda means cuda:LOCAL_RANK there, or cuda:0
/// where the process sees one GPU (the launcher bound it).
std::string rank_device(const std::string& device, const dist::Launch& launch);
/// The recipe's --dist-backend and --dist-timeout.
dist::GroupOptions group_options(const Recipe& r);

}  // namespace alps::pipeline
