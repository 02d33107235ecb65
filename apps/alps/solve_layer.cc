// alps solve-layer: one layer problem file, one method, one pattern; optional refit; report error and timings.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <optional>

#include "alps/core/device.h"
#include "alps/core/error.h"
#include "alps/prune/method.h"
#include "alps/prune/pattern.h"
#include "alps/prune/problem.h"
#include "alps/prune/refit.h"
#include "alps/prune/solve.h"
#include "commands.h"

namespace alps::cli {

namespace {
struct SolveLayerArgs {
  CommonOptions common;
  std::string problem, method, pattern, refine = "none", out;
  std::optional<double> sparsity;
  std::vector<std::string> options;
  int64_t refine_iterations = 10;
  bool overwrite = false;
};

int run_solve_layer(const SolveLayerArgs& a) {
  ALPS_USAGE_CHECK(a.sparsity.has_value() != !a.pattern.empty(), "give exactly one of --sparsity S or --pattern N:M");
  const prune::Pattern pattern =
      a.sparsity ? prune::Pattern::unstructured(*a.sparsity) : prune::Pattern::parse(a.pattern);
  const prune::Refine refine = prune::parse_refine(a.refine);
  auto method = prune::make_method(a.method, parse_option_assignments(a.options));
  if (!a.out.empty()) check_output_file("--out", a.out, a.overwrite);
  const c10::Device device = resolve_device(a.common.device);

  prune::LayerProblem problem = prune::load_problem(a.problem);
  pattern.check_shape(problem.rows(), problem.cols());
  problem.W0 = problem.W0.to(device);
  problem.G = problem.G.to(device);
  if (problem.mean.defined()) problem.mean = problem.mean.to(device);

  prune::PcgOptions pcg;
  pcg.iterations = a.refine_iterations;
  const prune::LayerResult res = prune::solve_layer(*method, problem, pattern, refine, pcg, a.problem);
  const prune::Solution& sol = res.solution;
  const at::Tensor& W = res.W;
  const double seconds = res.seconds;
  const double err = *res.rel_error;

  nlohmann::json doc = {{"problem", a.problem},
                        {"rows", problem.rows()},
                        {"cols", problem.cols()},
                        {"method", std::string(method->name())},
                        {"pattern", pattern.str()},
                        {"device", device.str()},
                        {"seconds", seconds}};
  doc.update(sol.stats);  // the method's own numbers (ALPS: iterations, rho, ...; DSnoT: cycles)
  if (sol.input_order.defined()) {  // W[:, order] is N:M (RIA's channel permutation)
    const at::Tensor order = sol.input_order.to(at::kCPU).contiguous();
    doc["input_order"] = std::vector<int64_t>(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + order.numel());
  }
  doc["refine"] = std::string(prune::refine_name(refine));
  if (refine != prune::Refine::kNone) {
    doc["refine_seconds"] = res.refine_seconds;
    doc["rel_error_before_refine"] = err;
  }
  doc["rel_error"] = res.rel_error_refined.value_or(err);
  doc["sparsity"] = res.sparsity;
  doc["target_sparsity"] = pattern.sparsity();
  if (!a.out.empty()) {
    prune::LayerProblem solved = problem;
    solved.W0 = W;
    prune::save_problem(a.out, solved, a.overwrite ? io::ExistingFile::kReplace : io::ExistingFile::kKeep);
    doc["out"] = a.out;
  }
  if (a.common.json) {
    print_json(doc);
  } else {
    // The result is what the command is for: stdout, as every command's results (logs stay on stderr).
    std::cout << fmt::format("{} {} on {} [{} x {}]: sparsity {:.4f}, rel_error {:.6g}, {:.3f} s\n",
                             doc["method"].get<std::string>(), pattern.str(), a.problem, problem.rows(),
                             problem.cols(), doc["sparsity"].get<double>(), doc["rel_error"].get<double>(), seconds);
    if (!sol.stats.empty()) std::cout << prune::stats_text(sol.stats) << "\n";
    if (sol.input_order.defined())
      std::cout << "N:M with the inputs in another order: --json prints it as input_order\n";
    if (refine != prune::Refine::kNone)
      std::cout << fmt::format("refine {}: rel_error {:.6g} -> {:.6g}, {:.3f} s\n", a.refine, err,
                               doc["rel_error"].get<double>(), doc["refine_seconds"].get<double>());
    std::cout << std::flush;
  }
  return 0;
}
}  // namespace

void add_solve_layer_command(CLI::App& app, Runner& runner) {
  auto args = std::make_shared<SolveLayerArgs>();
  CLI::App* cmd = app.add_subcommand("solve-layer", "Prune one layer problem file (weight, gram, mean, tokens)");
  cmd->add_option("--problem", args->problem, "Layer problem (.safetensors: weight, gram, mean?, metadata tokens)")
      ->required();
  cmd->add_option("--method", args->method, "Pruning method")
      ->required()
      ->check(one_of(prune::method_names()));
  auto* s = cmd->add_option("--sparsity", args->sparsity, "Unstructured sparsity: the fraction of zeros, in [0, 1)")
                ->check(sparsity_fraction());
  auto* p = cmd->add_option("--pattern", args->pattern, "N:M pattern, e.g. 2:4 (keep N of every M, 1 <= N <= M)")
                ->check(n_m_text());
  s->excludes(p);
  cmd->add_option("--refine", args->refine, "Refit on the support: none, pcg or exact")
      ->capture_default_str()
      ->check(one_of(prune::refine_names()));
  cmd->add_option("--refine-iterations", args->refine_iterations, "PCG iterations for --refine pcg")
      ->capture_default_str()
      ->check(int_at_least(0));
  cmd->add_option("--option", args->options, "Method option key=value (repeatable), e.g. rho0=0.2");
  cmd->add_option("--out", args->out, "Write the solution in the problem file form (weight = pruned W)");
  add_overwrite_flag(cmd, args->overwrite, "--out file");
  add_common_flags(cmd, args->common);
  cmd->callback([args, &runner] { runner = [args] { return run_solve_layer(*args); }; });
}

}  // namespace alps::cli
