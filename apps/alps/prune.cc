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
  std::string method, pattern, refine, calib, dtype, stats_dtype, stats_device, eval;
  double sparsity = -1;
  int64_t pcg_iterations = 0, nsamples = 0, seqlen = 0, batch_size = 0, stop_after = -1, eval_seqlen = 0;
  int64_t eval_max_windows = 0, eval_limit = 0;
  uint64_t seed = 0;
  std::vector<std::string> options, skip;
  bool overwrite = false, resume = false;
};

int run_prune_command(const PruneArgs& a, const CLI::App& cmd) {
  pipeline::Recipe r = a.config.empty() ? pipeline::Recipe{} : pipeline::load_recipe(a.config);
  auto given = [&cmd](const char* flag) { return cmd.get_option(flag)->count() > 0; };
  if (given("--method")) {
    if (a.method != r.method) r.options = nlohmann::json::object();  // the recipe's constants belong to its method
    r.method = a.method;
  }
  if (given("--sparsity")) r.pattern = nlohmann::json(a.sparsity).dump();
  if (given("--pattern")) r.pattern = a.pattern;
  if (given("--refine")) r.refine = a.refine;
  if (given("--refine-iterations")) r.pcg_iterations = a.pcg_iterations;
  r.options.update(parse_option_assignments(a.options));
  if (given("--calib")) r.calib = a.calib;
  if (given("--nsamples")) r.nsamples = a.nsamples;
  if (given("--seqlen")) r.seqlen = a.seqlen;
  if (given("--seed")) r.seed = a.seed;
  for (const auto& s : a.skip) r.skip.push_back(s);
  if (given("--device")) r.device = a.common.device;
  if (given("--dtype")) r.dtype = a.dtype;
  if (given("--batch-size")) r.batch_size = a.batch_size;
  if (given("--stats-dtype")) r.stats_dtype = a.stats_dtype;
  if (given("--stats-device")) r.stats_device = a.stats_device;
  if (given("--eval")) r.eval = split_list(a.eval);
  if (given("--eval-seqlen")) r.eval_seqlen = a.eval_seqlen;
  if (given("--eval-max-windows")) r.eval_max_windows = a.eval_max_windows;
  if (given("--eval-limit")) r.eval_limit = a.eval_limit;

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
  cmd->add_option("--method", a->method, "alps, sparsegpt, wanda, dsnot or magnitude (default alps)")
      ->check(CLI::IsMember(prune::method_names()));
  auto* sp = cmd->add_option("--sparsity", a->sparsity, "Unstructured sparsity in [0, 1)")
                 ->check(real_range(0, 1, /*hi_open=*/true));
  auto* pt = cmd->add_option("--pattern", a->pattern, "N:M sparsity, e.g. 2:4")->check(pattern_text());
  sp->excludes(pt);
  cmd->add_option("--refine", a->refine, "Refit after the method: none, pcg or exact (default none)")
      ->check(CLI::IsMember({"none", "pcg", "exact"}));
  cmd->add_option("--refine-iterations", a->pcg_iterations, "PCG iterations of --refine pcg (default 10)")
      ->check(int_at_least(0));
  cmd->add_option("--option", a->options, "Method constant key=value (repeatable), e.g. --option rho0=0.05")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--calib", a->calib, "Calibration text: c4 (data dir) or a .txt / .jsonl[.gz] file (default c4)");
  cmd->add_option("--nsamples", a->nsamples, "Calibration windows (default 128)")->check(int_at_least(1));
  cmd->add_option("--seqlen", a->seqlen, "Tokens per calibration window (default 2048)")->check(int_at_least(2));
  cmd->add_option("--seed", a->seed, "Calibration sampling seed (default 0)");
  cmd->add_option("--skip", a->skip, "Glob of linear names left dense (repeatable), e.g. '*.mlp.down_proj'")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  cmd->add_option("--dtype", a->dtype, "Compute dtype of the forward passes: fp32 (default), fp16/bf16 on CUDA");
  cmd->add_option("--batch-size", a->batch_size, "Calibration windows per forward call (default 8)")
      ->check(int_at_least(1));
  cmd->add_option("--stats-dtype", a->stats_dtype, "Accumulation dtype of the Gram matrices: fp32 (default) or fp64")
      ->check(CLI::IsMember({"fp32", "fp64"}));
  cmd->add_option("--stats-device", a->stats_device,
                  "Where the Gram matrices accumulate: compute (the --device, default) or cpu (saves GPU memory; "
                  "every linear input then crosses to the host)")
      ->check(CLI::IsMember({"compute", "cpu"}));
  cmd->add_option("--eval", a->eval, "Datasets and zero-shot tasks to evaluate after pruning, e.g. wikitext2,ptb,piqa");
  cmd->add_option("--eval-seqlen", a->eval_seqlen, "Window of --eval (default min(2048, max positions))")
      ->check(seqlen_or_default());
  cmd->add_option("--eval-max-windows", a->eval_max_windows,
                  "Perplexity of --eval over at most N windows per dataset (default 0: all)")
      ->check(int_at_least(0));
  cmd->add_option("--eval-limit", a->eval_limit, "Zero-shot tasks of --eval over their first N documents (default 0: all)")
      ->check(int_at_least(0));
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
