#include "job_checks.h"

#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include "alps/core/build_info.h"
#include "alps/core/device.h"
#include "alps/core/error.h"
#include "alps/eval/datasets.h"
#include "alps/io/fingerprint.h"
#include "alps/model/causal_lm.h"
#include "alps/pipeline/calibration.h"
#include "alps/tokenizer/tokenizer.h"

namespace alps::pipeline {

namespace fs = std::filesystem;
using json = nlohmann::json;

OutputRequest output_request(const PruneJob& job) {
  return {job.out_dir, job.model_dir, job.dump_problems, job.overwrite, job.resume};
}

eval::PerplexityOptions perplexity_options(const Recipe& r, const RunPlan& plan) {
  eval::PerplexityOptions popt;
  popt.seqlen = plan.eval_seqlen;
  popt.batch_size = 1;
  popt.max_windows = r.eval_max_windows;
  return popt;
}

eval::ZeroShotOptions zeroshot_options(const Recipe& r) {
  eval::ZeroShotOptions z;
  z.limit = r.eval_limit;
  return z;
}

namespace {

// Problem files are written as blocks finish: a clash found hours in would either stop the run or lose a file. A
// resumed run finds the problem files its interrupted run wrote (and writes those of a block it redoes again).
void check_dump_problems(const PruneJob& job, const model::CausalLM& m, const RunPlan& plan) {
  if (job.dump_problems.empty()) return;
  ALPS_USAGE_CHECK(plan.needs_calibration, "--dump-problems writes layer problems (G, mean, tokens), which need "
                   "calibration data; no method of this run reads any");
  if (!fs::exists(job.dump_problems) || job.resume) return;
  for (int64_t b = 0; b < m.num_blocks(); ++b)
    for (const auto& j : plan.block(b))
      ALPS_CHECK(j.skip || !fs::exists(job.dump_problems / (j.name + ".safetensors")), "--dump-problems ",
                 job.dump_problems.string(), " already holds ", j.name, ".safetensors; choose an empty directory");
}

// Below this many calibration tokens per input of the widest linear whose weights a method refits (ALPS, SparseGPT,
// --refine), the refit fits the calibration sample more than text in general, and Wanda, which only chooses a mask,
// does better on held-out text (README, "Choosing a method and a calibration size": measured on SmolLM2-135M).
constexpr double kTokensPerInput = 2;

// Says so, once, when the run is below that: the widest refitted linear, its method, the tokens it has and needs.
void warn_small_calibration(const model::CausalLM& m, const Recipe& r, const RunPlan& plan) {
  if (!plan.needs_calibration) return;
  const LayerJob* widest = nullptr;
  int64_t width = 0;
  for (int64_t b = 0; b < plan.num_blocks(); ++b)
    for (const LayerJob& j : plan.block(b)) {
      // An expert sees its routed share of the tokens: the report's tokens per expert speak for it.
      if (j.skip || j.name.find(".experts.") != std::string::npos) continue;
      if (!j.solver->refits_weights() && j.refine == prune::Refine::kNone) continue;
      if (const int64_t in = m.tensor(j.weight).size(1); in > width) {
        width = in;
        widest = &j;
      }
    }
  const int64_t tokens = r.nsamples * plan.seqlen;
  if (widest == nullptr || static_cast<double>(tokens) >= kTokensPerInput * static_cast<double>(width)) return;
  spdlog::warn(
      "calibration: {} tokens ({} x {}) for {}'s refit of inputs up to {} wide ({}): below about {:.0f} "
      "tokens per input ({:.1f} here) a refit fits the calibration sample more than text in general, and "
      "wanda may do better; give more --nsamples or --seqlen (README: choosing a method)",
      tokens, r.nsamples, plan.seqlen,
      widest->solver->refits_weights() ? widest->method : "--refine " + std::string(prune::refine_name(widest->refine)),
      width, widest->name, kTokensPerInput, static_cast<double>(tokens) / static_cast<double>(width));
}

}  // namespace

std::unique_ptr<RunPlan> validate_with(const PruneJob& job, const model::CausalLM& m, const tokenizer::Tokenizer& tok,
                                       bool first) {
  const Recipe& r = job.recipe;
  ALPS_CHECK(job.stop_after >= -1, "--stop-after must be >= 0, got ", job.stop_after);
  ALPS_USAGE_CHECK(!job.eval_dense || !r.eval.empty(), "--eval-dense evaluates the input model on the datasets and "
                   "tasks of --eval: give --eval too");
  auto plan = std::make_unique<RunPlan>(m, r);
  if (first) check_output_request(output_request(job));
  warn_unmatched_globs(m, r);
  check_dump_problems(job, m, *plan);
  if (!job.resume && plan->needs_calibration) resolve_calibration_source(r.calib, job.data_dir);
  if (first) warn_small_calibration(m, r, *plan);
  if (!plan->needs_calibration && r.calib != Recipe{}.calib)
    spdlog::warn("--calib {} is not read: no method of this run reads calibration data", r.calib);
  // A text too short for one evaluation window, or a bad row of a task file, would stop the run after its pruning.
  // Read and tokenised again then (seconds, against the pruning's minutes to hours).
  if (first)
    (void)eval::prepare_evaluation(m, tok, eval::plan_evaluation(r.eval, job.data_dir), plan->eval_seqlen,
                                   zeroshot_options(r));
  if (r.seqlen == 0 && plan->needs_calibration && plan->seqlen < model::ModelConfig::kProtocolWindow)
    spdlog::info("calibration windows of {} tokens, the model's {} positions (--seqlen sets another length)",
                 plan->seqlen, m.config().max_positions);
  return plan;
}

fs::path calibration_source(const PruneJob& job, const RunPlan& plan) {
  return plan.needs_calibration ? resolve_calibration_source(job.recipe.calib, job.data_dir) : fs::path();
}

ResumeState load_resume_state(const PruneJob& job, const RunPlan& plan, const StateDir& dir, bool tidy) {
  ResumeState s = dir.load(tidy);
  fs::path calibration;
  try {
    calibration = calibration_source(job, plan);
  } catch (const Error&) {
    spdlog::warn("calibration source '{}' cannot be found any more; resuming from the saved block inputs",
                 job.recipe.calib);
  }
  json now = resume_key(job.recipe, job.model_dir, calibration, plan.pruned_routers);
  if (calibration.empty() && plan.needs_calibration) now["calibration"] = s.key.value("calibration", json());
  const auto diffs = resume_key_differences(s.key, now);
  if (!diffs.empty()) {
    std::string lines;
    for (const auto& d : diffs) lines += "\n  " + d;
    ALPS_FAIL("--resume: the interrupted run in ", job.out_dir.string(), " had other inputs:", lines,
              "\nrerun with the original inputs, or pass --overwrite instead of --resume to start over");
  }
  return s;
}

json job_key(const PruneJob& job, const RunPlan& plan) {
  json key =
      resume_key(job.recipe, job.model_dir, calibration_source(job, plan), plan.pruned_routers, io::Hashed::kWhole);
  key["run"] = {{"alps", build_info().source_revision},
                {"dist_split", job.recipe.dist_split},
                {"dist_backend", job.recipe.dist_backend},
                {"stop_after", job.stop_after}};
  return key;
}

std::string rank_device(const std::string& device, const dist::Launch& launch) {
  if (!launch.launched()) return device;
  if (device == "cuda" || (device == "auto" && resolve_device("auto").is_cuda())) {
    // A launcher that binds one GPU to each rank (Slurm's --gpus-per-task, CUDA_VISIBLE_DEVICES per rank) leaves each
    // process one device, its cuda:0, whatever its local rank.
    if (torch::cuda::device_count() == 1) return "cuda:0";
    return "cuda:" + std::to_string(launch.local_rank);
  }
  return device;
}

dist::GroupOptions group_options(const Recipe& r) {
  dist::GroupOptions o;
  o.backend = r.dist_backend;
  o.timeout = std::chrono::seconds(r.dist_timeout);
  return o;
}

}  // namespace alps::pipeline
