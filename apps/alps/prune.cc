// `alps prune`: the end-to-end command (docs/pipeline.md). Flags override the --config recipe; the library does the work.

#include <iostream>

#include "alps/core/paths.h"
#include "alps/pipeline/sequential.h"
#include "alps/prune/method.h"
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
  std::vector<std::string> options, skip;
  bool overwrite = false, resume = false;
};

int run_prune_command(const PruneArgs& a, const CLI::App& cmd) {
  pipeline::Recipe r = a.config.empty() ? pipeline::Recipe{} : pipeline::load_recipe(a.config);
  auto given = [&cmd](const char* flag) { return cmd.get_option(flag)->count() > 0; };
  const pipeline::Recipe& f = a.flags;
  if (given("--method")) {
    if (f.method != r.method) r.options = nlohmann::json::object();  // the recipe's constants belong to its method
    r.method = f.method;
  }
  if (given("--sparsity")) r.pattern = nlohmann::json(a.sparsity).dump();
  if (given("--pattern")) r.pattern = a.pattern;
  if (given("--refine")) r.refine = f.refine;
  if (given("--refine-iterations")) r.refine_iterations = f.refine_iterations;
  r.options.update(parse_option_assignments(a.options));
  if (given("--calib")) r.calib = f.calib;
  if (given("--nsamples")) r.nsamples = f.nsamples;
  if (given("--seqlen")) r.seqlen = f.seqlen;
  if (given("--seed")) r.seed = f.seed;
  for (const auto& s : a.skip) r.skip.push_back(s);
  if (given("--device")) r.device = a.common.device;
  if (given("--dtype")) r.dtype = f.dtype;
  if (given("--batch-size")) r.batch_size = f.batch_size;
  if (given("--stats-dtype")) r.stats_dtype = f.stats_dtype;
  if (given("--stats-device")) r.stats_device = f.stats_device;
  if (given("--eval")) r.eval = split_list(a.eval);
  if (given("--eval-seqlen")) r.eval_seqlen = f.eval_seqlen;
  if (given("--eval-max-windows")) r.eval_max_windows = f.eval_max_windows;
  if (given("--eval-limit")) r.eval_limit = f.eval_limit;

  pipeline::PruneJob job;
  job.model_dir = a.model;
  job.out_dir = a.out;
  job.data_dir = data_dir(a.data_dir);
  job.recipe = r;
  job.overwrite = a.overwrite;
  job.resume = a.resume;
  job.stop_after = a.stop_after;
  job.dump_problems = a.dump_problems;

  const report::RunReport rep = pipeline::run_prune(job);
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

void add_prune_command(CLI::App& app, Runner& runner) {
  auto a = std::make_shared<PruneArgs>();
  CLI::App* cmd = app.add_subcommand("prune", "Prune every linear layer of a checkpoint, block by block");
  // Batch scripts append overrides to a base command line: a repeated flag takes its last value.
  cmd->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  cmd->add_option("--model", a->model, "Hugging Face checkpoint directory (OPT or LLaMA)")->required();
  cmd->add_option("--out", a->out, "Output directory: pruned checkpoint + alps-report.json")->required();
  cmd->add_option("--config", a->config, "JSON recipe (configs/*.json); flags override it");
  pipeline::Recipe& f = a->flags;
  cmd->add_option("--method", f.method, "Pruning method (`alps methods` lists them with their options)")
      ->check(CLI::IsMember(prune::method_names()))
      ->capture_default_str();
  auto* sp = cmd->add_option("--sparsity", a->sparsity, "Unstructured sparsity in [0, 1)")
                 ->check(real_range(0, 1, /*hi_open=*/true));
  auto* pt = cmd->add_option("--pattern", a->pattern, "N:M sparsity, e.g. 2:4")->check(pattern_text());
  sp->excludes(pt);
  cmd->add_option("--refine", f.refine,
                  "Refit after the method: none, pcg or exact (ALPS ends with its own PCG refit; this adds another)")
      ->check(CLI::IsMember({"none", "pcg", "exact"}))
      ->capture_default_str();
  cmd->add_option("--refine-iterations", f.refine_iterations, "PCG iterations of --refine pcg")
      ->check(int_at_least(0))
      ->capture_default_str();
  cmd->add_option("--option", a->options, "Method constant key=value (repeatable), e.g. --option rho0=0.05")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--calib", f.calib, "Calibration text: c4 (data dir) or a .txt / .jsonl[.gz] file")
      ->capture_default_str();
  cmd->add_option("--nsamples", f.nsamples, "Calibration windows")->check(int_at_least(1))->capture_default_str();
  cmd->add_option("--seqlen", f.seqlen, "Tokens per calibration window")->check(int_at_least(2))->capture_default_str();
  cmd->add_option("--seed", f.seed, "Calibration sampling seed")->capture_default_str();
  cmd->add_option("--skip", a->skip, "Glob of linear names left dense (repeatable), e.g. '*.mlp.down_proj'")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--dtype", f.dtype, "Compute dtype of the forward passes: fp32, or fp16/bf16 on CUDA")
      ->capture_default_str();
  cmd->add_option("--batch-size", f.batch_size, "Calibration windows per forward call")
      ->check(int_at_least(1))
      ->capture_default_str();
  cmd->add_option("--stats-dtype", f.stats_dtype, "Accumulation dtype of the Gram matrices: fp32 or fp64")
      ->check(CLI::IsMember({"fp32", "fp64"}))
      ->capture_default_str();
  cmd->add_option("--stats-device", f.stats_device,
                  "Where the Gram matrices accumulate: compute (the --device) or cpu (saves GPU memory; every linear "
                  "input then crosses to the host)")
      ->check(CLI::IsMember({"compute", "cpu"}))
      ->capture_default_str();
  cmd->add_option("--eval", a->eval, "Datasets and zero-shot tasks to evaluate after pruning, e.g. wikitext2,ptb,piqa");
  cmd->add_option("--eval-seqlen", f.eval_seqlen, "Window of --eval (0: min(2048, max positions))")
      ->check(seqlen_or_default())
      ->capture_default_str();
  cmd->add_option("--eval-max-windows", f.eval_max_windows, "Perplexity of --eval over at most N windows per dataset (0: all)")
      ->check(int_at_least(0))
      ->capture_default_str();
  cmd->add_option("--eval-limit", f.eval_limit, "Zero-shot tasks of --eval over their first N documents (0: all)")
      ->check(int_at_least(0))
      ->capture_default_str();
  cmd->add_option("--data-dir", a->data_dir, "Data directory (default $ALPS_DATA_DIR, else ../shared/data)");
  auto* ow = cmd->add_flag("--overwrite", a->overwrite,
                           "Replace an existing alps output directory (kept until the new one is complete)");
  cmd->add_flag("--resume", a->resume, "Continue the interrupted run in --out (starts afresh if it saved nothing)")
      ->excludes(ow);
  cmd->add_option("--stop-after", a->stop_after, "Prune at most N blocks in this run, then stop (resumable)")
      ->check(int_at_least(0));
  cmd->add_option("--dump-problems", a->dump_problems, "Write every layer problem (solve-layer format) to DIR");
  add_common_flags(cmd, a->common);
  cmd->callback([a, cmd, &runner] { runner = [a, cmd] { return run_prune_command(*a, *cmd); }; });
}

}  // namespace alps::cli
