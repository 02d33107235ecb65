#include "alps/pipeline/linear_solve.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <map>

#include "alps/core/device.h"
#include "alps/core/device_streams.h"
#include "alps/core/error.h"
#include "alps/core/log.h"
#include "alps/dist/launch.h"
#include "alps/model/causal_lm.h"
#include "alps/pipeline/layer_stats.h"
#include "alps/pipeline/run_plan.h"
#include "alps/pipeline/run_state.h"
#include "alps/pipeline/schedule.h"
#include "alps/prune/method.h"
#include "alps/prune/problem.h"
#include "alps/prune/row_split.h"
#include "alps/prune/shared_factors.h"
#include "alps/prune/solve.h"

namespace alps::pipeline {

namespace {

// The layer problem of one linear: its weight (or rows of it), and its input's statistics when the run has them.
prune::LayerProblem problem_for(const LayerJob& job, const at::Tensor& W0, const LayerStats* s,
                                const SolveSettings& settings) {
  prune::LayerProblem problem;
  // Uploaded in the checkpoint's dtype and converted where it lands: a conversion on the way converts on the host
  // and moves twice the bytes of an fp16 weight.
  problem.W0 = W0.to(settings.device).to(at::kFloat);
  problem.name = job.name;
  if (s == nullptr) return problem;
  problem.G = s->gram().to(settings.device, at::kFloat);
  problem.mean = s->mean().to(settings.device);
  problem.tokens = s->tokens();
  problem.sequences = s->sequences();
  problem.sequence_mean_sq = s->sequence_mean_sq().to(settings.device);
  problem.shared = s->shared_factors();
  problem.gram_checked = problem.shared->gram_checked;
  return problem;
}

// What prunes an expert that no calibration token reached.
const prune::Method& magnitude() {
  static const std::unique_ptr<prune::Method> m = prune::make_method("magnitude", nlohmann::json::object());
  return *m;
}

void fill_report(report::LayerReport& lr, const prune::LayerResult& res, const LayerJob& job,
                 const prune::RowSplit* split) {
  lr.seconds = res.seconds;
  lr.rel_error = res.rel_error;
  lr.refine_seconds = res.refine_seconds;
  lr.rel_error_refined = res.rel_error_refined;
  lr.sparsity = res.sparsity;
  lr.stats = res.solution.stats;
  if (split != nullptr) lr.stats["parts"] = split->parts;
  lr.method = job.method;
  lr.pattern = job.pattern->str();
  lr.refine = prune::refine_name(job.refine);
}

}  // namespace

SolveWork block_work(const std::vector<LayerJob>& jobs, const model::CausalLM& m,
                     const std::vector<LayerStats*>& inputs) {
  SolveWork w;
  std::map<const LayerStats*, int> first_reader;
  for (size_t li = 0; li < jobs.size(); ++li) {
    const LayerJob& j = jobs[li];
    const at::Tensor W = m.tensor(j.weight);
    const bool has_stats = inputs[li] != nullptr;
    w.in.push_back(W.size(1));
    w.out.push_back(j.skip ? 0 : W.size(0));
    w.splits.push_back(!j.skip && has_stats && j.solver->splits_rows());
    const int own = static_cast<int>(li);
    w.group.push_back(j.skip || !has_stats ? own : first_reader.emplace(inputs[li], own).first->second);
  }
  return w;
}

Outcome solve_linear(int64_t b, const LayerJob& job, const std::string& linear, const at::Tensor& W0,
                     LayerStats* stats, std::shared_ptr<const prune::RowSplit> split, const SolveSettings& settings,
                     Phases& phases) {
  Outcome o{job.weight, linear, {}, {}};
  report::LayerReport& lr = o.report;
  lr.block = b;
  lr.name = job.name;
  lr.shape = W0.sizes().vec();
  const int64_t blocks = settings.blocks_total;
  if (job.skip) {
    lr.skipped = true;
    log_layer(lr, linear, blocks);
    return o;
  }
  const auto p0 = std::chrono::steady_clock::now();
  const bool first_part = split == nullptr || split->part == 0;
  if (!settings.dump_problems.empty() && first_part)  // the whole layer's problem, once
    prune::save_problem(settings.dump_problems / (job.name + ".safetensors"), problem_for(job, W0, stats, settings),
                        settings.replace_dumps ? io::ExistingFile::kReplace : io::ExistingFile::kKeep);
  const auto [first, end] = split ? dist::share_of(W0.size(0), split->part, split->parts)
                                  : std::pair<int64_t, int64_t>{0, W0.size(0)};
  // An expert no calibration token was routed to has no statistics to weigh its weights by: its weights alone
  // decide, by magnitude at its pattern, and no refit (docs/moe.md).
  const bool unreached = job.needs_statistics() && stats != nullptr && stats->tokens() == 0;
  LayerStats* const used = unreached ? nullptr : stats;
  prune::LayerProblem problem = problem_for(job, W0.slice(0, first, end), used, settings);
  problem.split = split;
  const double problem_seconds = seconds_since(p0);
  phases.set_step(fmt::format("solving block {}/{} {} ({}x{})", b + 1, blocks, linear, W0.size(0), W0.size(1)));
  try {
    prune::PcgOptions pcg;
    pcg.iterations = settings.refine_iterations;
    const auto s0 = std::chrono::steady_clock::now();
    const prune::LayerResult res =
        used != nullptr
            ? prune::solve_layer(*job.solver, problem, *job.pattern, job.refine, pcg)
            : prune::solve_layer_without_statistics(unreached ? magnitude() : *job.solver, problem, *job.pattern);
    const double solve_seconds = seconds_since(s0);
    if (used != nullptr) used->shared_factors()->gram_checked = true;
    fill_report(lr, res, job, split.get());
    if (stats != nullptr) lr.stats["tokens"] = stats->tokens();
    if (unreached) {
      lr.method = "magnitude";
      lr.refine = prune::refine_name(prune::Refine::kNone);
      lr.stats["rule"] = "no calibration token was routed to this expert: pruned by magnitude";
    }
    const auto w0 = std::chrono::steady_clock::now();
    o.W = to_host(res.W, W0.scalar_type());  // on this solve's stream, beside the other solves
    if (res.solution.input_order.defined()) o.input_order = res.solution.input_order.to(at::kCPU);
    spdlog::debug("{}: problem {:.3f} s, solve_layer {:.3f} s (method {:.3f} s), weight to the host {:.3f} s",
                  job.name, problem_seconds, solve_seconds, res.seconds, seconds_since(w0));
  } catch (const Error& e) {
    ALPS_FAIL("block ", b + 1, "/", blocks, " ", job.name, ": ", e.what());
  }
  if (first_part) log_layer(lr, linear, blocks);  // the first part speaks for the linear
  return o;
}

std::vector<Outcome> solve_block(int64_t b, const Schedule& s, const std::vector<LayerJob>& jobs,
                                 const std::vector<std::string>& linears, const std::vector<LayerStats*>& inputs,
                                 const model::CausalLM& m, const SplitOf& split_of, const SolveSettings& settings,
                                 Phases& phases) {
  const auto phase = phases.enter("solve", fmt::format("solving block {}/{}", b + 1, settings.blocks_total));
  std::vector<Outcome> outcomes(jobs.size());
  for (size_t li = 0; li < jobs.size(); ++li) outcomes[li] = {jobs[li].weight, linears[li], {}, {}};
  std::atomic<bool> failed{false};
  run_on_streams(settings.device, static_cast<int>(s.lists.size()), [&](int l) {
    for (size_t li : s.lists[static_cast<size_t>(l)]) {
      if (failed) return;
      try {
        const at::Tensor W0 = m.tensor(jobs[li].weight);
        const std::string what = fmt::format("solving block {}/{} {} in {} parts", b + 1, settings.blocks_total,
                                             linears[li], s.ranks[li].size());
        outcomes[li] = solve_linear(b, jobs[li], linears[li], W0, inputs[li], split_of(li, W0.size(0), what),
                                    settings, phases);
      } catch (...) {
        failed = true;
        throw;
      }
    }
  });
  synchronize(settings.device);
  return outcomes;
}

}  // namespace alps::pipeline
