// `alps prune`: the end-to-end command (docs/pipeline.md). Flags override the --config recipe; the library does
// the work.

#include <iostream>
#include <variant>

#include "alps/core/error.h"
#include "alps/core/paths.h"
#include "alps/dist/launch.h"
#include "alps/dist/local_workers.h"
#include "alps/pipeline/sequential.h"
#include "alps/prune/method.h"
#include "alps/prune/pattern.h"
#include "alps/report/report.h"
#include "commands.h"

namespace alps::cli {

namespace {

struct PruneArgs {
  CommonOptions common;
  std::string model, out, config, data_dir, dump_problems;
  // The recipe knobs' flags write here; they start at the recipe's defaults, which --help shows as they are.
  pipeline::Recipe flags;
  std::string pattern, eval;
  double sparsity = -1;
  int64_t stop_after = -1;
  int nproc = 0;
  std::vector<std::string> options, structured_options, skip;
  bool overwrite = false, resume = false, eval_dense = false;
};

int run_prune_command(const PruneArgs& a, const CLI::App& cmd, const std::vector<std::string>& argv) {
  pipeline::Recipe r = a.config.empty() ? pipeline::Recipe{} : pipeline::load_recipe(a.config);
  auto given = [&cmd](const std::string& flag) { return cmd.get_option(flag)->count() > 0; };
  for (const pipeline::RecipeKnob& k : pipeline::recipe_knobs())
    if (given(k.flag) && k.flag != "--method" && k.flag != "--structured-method")
      std::visit([&](auto field) { r.*field = a.flags.*field; }, k.field);
  if (given("--method")) pipeline::set_method(r, a.flags.method);
  // A structured method's constants are that method's, as --method's are.
  if (given("--structured-method") && a.flags.structured_method != r.structured_method) {
    r.structured_method = a.flags.structured_method;
    r.structured_options = nlohmann::json::object();
  }
  if (given("--sparsity")) r.pattern = prune::Pattern::unstructured(a.sparsity);
  if (given("--pattern")) r.pattern = prune::Pattern::parse(a.pattern);
  r.options.update(parse_option_assignments(a.options));
  r.structured_options.update(parse_option_assignments(a.structured_options));
  for (const auto& s : a.skip) r.skip.push_back(s);
  if (given("--eval")) r.eval = split_list(a.eval);
  if (a.nproc > 0) {
    // Said once, here, rather than by every worker after they start.
    const bool reads_calibration = prune::make_method(r.method, r.options)->needs_statistics() || r.refine != "none" ||
                                   r.sparsity_profile == "owl" || r.removes_units();
    ALPS_USAGE_CHECK(!reads_calibration || r.nsamples >= a.nproc, "--nproc ", a.nproc, " processes share --nsamples ",
                     r.nsamples, " calibration windows: give at least one window per process");
    return dist::run_local_workers(dist::without_nproc_flag(argv), a.nproc);
  }
  const dist::Launch launch = dist::launch_from_environment(dist::process_environment());
  dist::log_as_rank(launch);

  pipeline::PruneJob job;
  job.data_dir = data_dir(a.data_dir);
  job.model_dir = resolve_model_dir(a.model, job.data_dir);
  job.out_dir = a.out;
  job.recipe = r;
  job.overwrite = a.overwrite;
  job.resume = a.resume;
  job.stop_after = a.stop_after;
  job.dump_problems = a.dump_problems;
  job.eval_dense = a.eval_dense;

  const report::RunReport rep = pipeline::run_prune(job, launch);
  // One run, one result: rank 0's.
  if (launch.rank != 0) return 0;
  // The result on stdout (the report itself with --json); progress and logs went to stderr.
  if (a.common.json)
    print_json(report::to_json(rep));
  else if (rep.complete)
    std::cout << report::summary_text(rep) << std::flush;
  else
    std::cout << "stopped after " << rep.blocks_done << "/" << rep.blocks_total << " blocks; continue with --resume\n";
  return 0;
}

}  // namespace

void add_prune_command(CLI::App& app, Runner& runner, std::vector<std::string> argv) {
  auto a = std::make_shared<PruneArgs>();
  CLI::App* cmd = app.add_subcommand("prune", "Prune every linear layer of a checkpoint, block by block");
  // Batch scripts append overrides to a base command line: a repeated flag takes its last value.
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("--model", a->model, model_flag_help())->required();
  cmd->add_option("--out", a->out, "Output directory: pruned checkpoint + alps-report.json")->required();
  cmd->add_option("--config", a->config, "JSON recipe (configs/*.json); flags override it");
  auto* sp = cmd->add_option("--sparsity", a->sparsity, "Unstructured sparsity: the fraction of zeros, in [0, 1)")
                 ->check(sparsity_fraction());
  auto* pt = cmd->add_option("--pattern", a->pattern, "N:M sparsity, e.g. 2:4 (unstructured: --sparsity)")
                 ->check(n_m_text());
  sp->excludes(pt);
  // The recipe's scalar knobs, from their table: each flag writes a->flags, whose fields start at the recipe's
  // defaults, so --help shows them as they are.
  for (const pipeline::RecipeKnob& k : pipeline::recipe_knobs()) {
    CLI::Option* o =
        std::visit([&](auto field) { return cmd->add_option(k.flag, a->flags.*field, k.help); }, k.field);
    o->capture_default_str();
    if (!k.choices.empty()) o->check(one_of(k.choices));
    if (k.problem != nullptr) o->check(known_name(k.problem, "NAME"));
    if (k.min) o->check(k.zero_means_default ? zero_or_at_least(*k.min) : int_at_least(*k.min));
    if (k.fraction) o->check(sparsity_fraction());
    if (std::holds_alternative<uint64_t pipeline::Recipe::*>(k.field)) o->check(uint64_text());
  }
  cmd->add_option("--option", a->options, "Method constant key=value (repeatable), e.g. --option rho0=0.05")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--structured-option", a->structured_options,
                  "Structured method constant key=value (repeatable), e.g. --structured-option refit=true")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--skip", a->skip, "Glob of linear names left dense (repeatable), e.g. '*.mlp.down_proj'")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--eval", a->eval, "Datasets and zero-shot tasks to evaluate after pruning, e.g. wikitext2,ptb,piqa")
      ->check(non_empty_list());
  cmd->add_flag("--eval-dense", a->eval_dense,
                "Evaluate the input model too, as --eval evaluates the pruned one, and show both side by side (kept in "
                "the cache directory, $ALPS_CACHE_DIR or ~/.cache/alps, for later runs)");
  cmd->add_option("--data-dir", a->data_dir, data_dir_flag_help());
  auto* ow = cmd->add_flag("--overwrite", a->overwrite,
                           "Replace an existing alps output directory (kept until the new one is complete)");
  cmd->add_flag("--resume", a->resume, "Continue the interrupted run in --out (starts afresh if it saved nothing)")
      ->excludes(ow);
  cmd->add_option("--stop-after", a->stop_after, "Prune at most N blocks in this run, then stop (resumable)")
      ->check(int_at_least(0));
  cmd->add_option("--dump-problems", a->dump_problems, "Write every layer problem (solve-layer format) to DIR");
  cmd->add_option("--nproc", a->nproc,
                  "Run as N processes on this host, sharing the calibration windows and the solves (torchrun and "
                  "srun start the processes instead: docs/distributed.md)")
      ->check(int_at_least(1));
  add_common_flags(cmd, a->common, /*with_device=*/false);  // --device is a recipe knob here
  cmd->callback([a, cmd, &runner, argv = std::move(argv)] {
    runner = [a, cmd, argv] { return run_prune_command(*a, *cmd, argv); };
  });
}

}  // namespace alps::cli
