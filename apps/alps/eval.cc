// `alps eval`: perplexity of a checkpoint on standard datasets and zero-shot tasks. The library does the
// work (alps/eval/perplexity.h, datasets.h, zeroshot.h); this file maps flags to options and prints the tables or
// JSON.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <iostream>
#include <utility>
#include <vector>

#include "alps/core/device.h"
#include "alps/core/error.h"
#include "alps/core/paths.h"
#include "alps/eval/datasets.h"
#include "alps/eval/evaluate.h"
#include "alps/eval/perplexity.h"
#include "alps/eval/zeroshot.h"
#include "alps/model/causal_lm.h"
#include "alps/report/report.h"
#include "alps/tokenizer/tokenizer.h"
#include "commands.h"

namespace alps::cli {

namespace {

struct EvalArgs {
  CommonOptions common;
  std::string model, ppl = "wikitext2", data_dir, dtype = "fp32";
  int64_t seqlen = 0, max_windows = 0, batch_size = 1;
  // Zero-shot tasks; perplexity runs with them only when --ppl is given.
  std::string tasks, task_data, log_samples;
  std::vector<std::string> task_files;
  int64_t limit = 0, bootstrap_iters = 100000;
  bool add_bos = false, overwrite = false;
  // Which flags the command line named (a value equal to the default counts too).
  bool ppl_given = false, limit_given = false, seqlen_given = false, max_windows_given = false,
       bootstrap_given = false, log_samples_given = false;
};

// Flags that would be silently ignored together are refused before any model is read. `specs` are the perplexity
// datasets the command runs.
void check_eval_flags(const EvalArgs& a, const std::vector<std::string>& specs) {
  ALPS_USAGE_CHECK(!specs.empty() || !a.tasks.empty(), "--ppl: expected a comma-separated list of datasets, got '",
                   a.ppl, "'");
  // Flags that only change how tasks are scored: without --tasks they would be silently ignored.
  for (const auto& [flag, given] : std::vector<std::pair<std::string, bool>>{{"--task-file", !a.task_files.empty()},
                                                                             {"--log-samples", !a.log_samples.empty()},
                                                                             {"--task-data", !a.task_data.empty()},
                                                                             {"--limit", a.limit_given},
                                                                             {"--add-bos", a.add_bos},
                                                                             {"--bootstrap-iters", a.bootstrap_given}})
    ALPS_USAGE_CHECK(!given || !a.tasks.empty(), flag, " needs --tasks");
  // And the other way round: with --tasks, perplexity runs only when --ppl is given.
  for (const auto& [flag, given] :
       std::vector<std::pair<std::string, bool>>{{"--seqlen", a.seqlen_given}, {"--max-windows", a.max_windows_given}})
    ALPS_USAGE_CHECK(!given || !specs.empty(), flag, " sets perplexity windows: with --tasks it needs --ppl too");
  ALPS_USAGE_CHECK(!a.log_samples_given || !a.log_samples.empty(), "--log-samples expects a file name");
  if (!a.log_samples.empty()) check_output_file("--log-samples", a.log_samples, a.overwrite);
}

// The perplexities and task scores as a table, or every field with the run's software and hardware under --json.
void print_eval_results(const EvalArgs& a, const model::CausalLM& m, int64_t seqlen, const nlohmann::json& results,
                        const std::vector<eval::TaskResult>& task_results) {
  nlohmann::json task_json = nlohmann::json::array();
  for (const eval::TaskResult& r : task_results) task_json.push_back(eval::to_json(r));
  if (a.common.json) {
    print_json({{"model", a.model},
                {"architecture", m.config().architecture},
                {"device", m.compute_device().str()},
                {"dtype", dtype_name(m.compute_dtype())},
                {"seqlen", seqlen},
                {"results", results},
                {"tasks", task_json},
                {"software", report::software_json()},
                {"hardware", report::hardware_json()}});
  } else if (!results.empty()) {
    std::cout << fmt::format("{:<14} {:>8} {:>10} {:>12} {:>9}\n", "dataset", "windows", "tokens", "perplexity",
                             "seconds");
    for (const auto& r : results)
      std::cout << fmt::format("{:<14} {:>8} {:>10} {:>12.4f} {:>9.2f}\n", r["dataset"].get<std::string>(),
                               r["windows"].get<int64_t>(), r["tokens"].get<int64_t>(), r["perplexity"].get<double>(),
                               r["seconds"].get<double>());
  }
  if (!a.common.json && !task_results.empty()) {
    if (!results.empty()) std::cout << "\n";
    std::cout << eval::format_task_table(task_results);
  }
}

int run_eval(const EvalArgs& a) {
  const std::vector<std::string> specs =
      a.tasks.empty() || a.ppl_given ? split_list(a.ppl) : std::vector<std::string>{};
  check_eval_flags(a, specs);
  const auto data = data_dir(a.data_dir);
  const std::filesystem::path model = resolve_model_dir(a.model, data);
  model::CausalLM m = model::CausalLM::load(model);
  const int64_t positions = m.config().max_positions;
  const int64_t seqlen = a.seqlen > 0 ? a.seqlen : m.config().default_window();
  ALPS_CHECK(seqlen <= m.config().max_sequence_length(), "--seqlen ", seqlen, " exceeds the model's ", positions,
             " positions (max_position_embeddings in ", (m.dir() / "config.json").string(), ")");
  // Resolve every dataset and task file, then read, tokenise and check all of them, before the slow part: a typo
  // or a bad row fails at once, not after the datasets and tasks before it were scored.
  eval::EvalPlan plan;
  for (const std::string& s : specs) eval::add_dataset(plan, eval::resolve_dataset(s, data));
  if (!a.tasks.empty())
    plan.tasks = eval::resolve_tasks(split_list(a.tasks),
                                     a.task_data.empty() ? data / "eval" : std::filesystem::path(a.task_data),
                                     a.task_files);
  auto tok = tokenizer::load_tokenizer(model);
  eval::PerplexityOptions opt;
  opt.seqlen = seqlen;
  opt.max_windows = a.max_windows;
  opt.batch_size = a.batch_size;
  eval::ZeroShotOptions zopt;
  zopt.scoring.add_bos = a.add_bos;
  zopt.scoring.batch_size = a.batch_size;
  zopt.limit = a.limit;
  zopt.bootstrap_iters = a.bootstrap_iters;
  zopt.keep_samples = !a.log_samples.empty();
  eval::PreparedEvaluation prepared = eval::prepare_evaluation(m, *tok, plan, seqlen, zopt);

  m.set_compute(resolve_device(a.common.device), parse_dtype(a.dtype));
  m.load_all();
  nlohmann::json results = nlohmann::json::array();
  for (const eval::DatasetResult& r : eval::evaluate(m, prepared.datasets, opt)) results.push_back(eval::to_json(r));
  const std::vector<eval::TaskResult> task_results = eval::evaluate_tasks(m, std::move(prepared.tasks), zopt);
  print_eval_results(a, m, seqlen, results, task_results);
  std::cout.flush();
  // After the results are out: a samples file that cannot be written (its directory removed, a full disk) fails the
  // command without taking the results with it.
  if (!a.log_samples.empty())
    eval::write_log_samples(a.log_samples, task_results,
                            a.overwrite ? io::ExistingFile::kReplace : io::ExistingFile::kKeep);
  return 0;
}

}  // namespace

void add_eval_command(CLI::App& app, Runner& runner) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* cmd = app.add_subcommand(
      "eval", "Perplexity of a checkpoint on wikitext2, ptb, c4 or text files, and zero-shot tasks");
  cmd->add_option("--model", a->model, model_flag_help())->required();
  cmd->add_option("--ppl", a->ppl,
                  "Comma-separated datasets: wikitext2, ptb, c4, tinystories, c4=FILE.jsonl, or a .txt/.jsonl[.gz] "
                  "path")
      ->capture_default_str();
  cmd->add_option("--seqlen", a->seqlen, "Tokens per window, >= 2 (default 0: min(2048, max_position_embeddings))")
      ->check(zero_or_at_least(2));
  cmd->add_option("--data-dir", a->data_dir, data_dir_flag_help());
  cmd->add_option("--dtype", a->dtype, "Compute dtype: fp32 (fp64 for checks), or fp16/bf16 on CUDA")
      ->capture_default_str()
      ->check(known_name(dtype_name_problem, "DTYPE"));
  cmd->add_option("--max-windows", a->max_windows, "Score at most N windows per dataset (0 = all)")
      ->capture_default_str()
      ->check(int_at_least(0));
  cmd->add_option("--batch-size", a->batch_size,
                  "Windows (perplexity), or packed sequences of requests (tasks), per forward pass")
      ->capture_default_str()
      ->check(int_at_least(1));
  cmd->add_option("--tasks", a->tasks,
                  "Comma-separated zero-shot tasks, scored as lm-evaluation-harness 0.4.9 scores them: " +
                      eval::task_names() + ", or all")
      ->check(non_empty_list(eval::task_name_problem));
  cmd->add_option("--limit", a->limit, "Score the first N documents of each task (0 = all)")->check(int_at_least(0));
  cmd->add_option("--task-data", a->task_data, "Directory of the task files (default DATA_DIR/eval)");
  cmd->add_option("--task-file", a->task_files, "TASK=FILE: one task's file (repeatable)");
  cmd->add_flag("--add-bos", a->add_bos, "Prefix every request with the tokenizer's special tokens (BOS)");
  cmd->add_option("--log-samples", a->log_samples, "Write every request's log-likelihood and is-greedy as JSON lines");
  add_overwrite_flag(cmd, a->overwrite, "--log-samples file");
  cmd->add_option("--bootstrap-iters", a->bootstrap_iters,
                  "Bootstrap resamples of LAMBADA's perplexity stderr (lm-eval's default; 0 = none, else at least 2)")
      ->capture_default_str()
      ->check(zero_or_at_least(2, "no stderr"));
  add_common_flags(cmd, a->common);
  cmd->callback([a, cmd, &runner] {
    a->ppl_given = cmd->count("--ppl") > 0;
    a->limit_given = cmd->count("--limit") > 0;
    a->seqlen_given = cmd->count("--seqlen") > 0;
    a->max_windows_given = cmd->count("--max-windows") > 0;
    a->bootstrap_given = cmd->count("--bootstrap-iters") > 0;
    a->log_samples_given = cmd->count("--log-samples") > 0;
    runner = [a] { return run_eval(*a); };
  });
}

}  // namespace alps::cli
