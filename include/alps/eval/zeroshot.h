#pragma once
// Zero-shot evaluation of one model on lm-evaluation-harness tasks: documents built from the task files
// (alps/eval/task.h), requests scored as lm-eval's Hugging Face backend scores them (alps/eval/loglikelihood.h),
// metrics and standard errors aggregated as lm-eval aggregates them (alps/eval/task_metrics.h).
#include <cstdint>
#include <filesystem>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "alps/eval/loglikelihood.h"
#include "alps/eval/task.h"
#include "alps/io/staged_path.h"

namespace alps::eval {

/// A task and the file its rows come from.
struct TaskInput {
  const TaskSpec* spec = nullptr;
  std::filesystem::path file;
};

/// Resolves task names ("all" = every task) to files: `overrides` entries "task=FILE" first, else the task's
/// default file under `task_data_dir`. Unknown names, overrides of tasks not asked for and missing files are
/// errors, raised before any work.
std::vector<TaskInput> resolve_tasks(const std::vector<std::string>& names, const std::filesystem::path& task_data_dir,
                                     const std::vector<std::string>& overrides = {});

struct ZeroShotOptions {
  LoglikelihoodOptions scoring;
  int64_t limit = 0;                ///< score the first `limit` documents of each task (0: all), as lm-eval's --limit
  int64_t bootstrap_iters = 100000;  ///< lm-eval's default; perplexity's stderr (0: not computed)
  bool keep_samples = false;        ///< keep documents and per-request scores (--log-samples)
};

struct MetricValue {
  std::string name;
  double value = 0;
  std::optional<double> stderr_value;  ///< absent when n < 2 or bootstrap_iters is 0 (lm-eval prints "N/A")
  bool higher_is_better = true;
};

struct TaskResult {
  TaskInput input;
  int64_t docs = 0, requests = 0;
  std::vector<MetricValue> metrics;
  double seconds = 0;
  // With keep_samples: the documents, their encoded requests and scores (flattened in document order).
  std::vector<TaskDoc> samples;
  std::vector<EncodedRequest> encoded;
  std::vector<RequestScore> scores;
};

/// A task's documents (the first `limit`) and their requests encoded for one model, flattened in document order.
struct PreparedTask {
  TaskInput input;
  std::vector<TaskDoc> docs;
  std::vector<EncodedRequest> encoded;
  double seconds = 0;  ///< reading and encoding, counted in the task's seconds
};

/// Reads every task's rows and builds and encodes their requests: a bad row of any task is an error naming its file
/// and row here, before the first task is scored, not after hours of scoring the others.
std::vector<PreparedTask> prepare_tasks(const model::CausalLM& model, const tokenizer::Tokenizer& tokenizer,
                                        const std::vector<TaskInput>& tasks, const ZeroShotOptions& options);

/// Scores every prepared task in turn (progress on stderr: task i/n, requests done, elapsed, ETA).
std::vector<TaskResult> evaluate_tasks(const model::CausalLM& model, std::vector<PreparedTask> tasks,
                                       const ZeroShotOptions& options);
/// prepare_tasks, then the above.
std::vector<TaskResult> evaluate_tasks(const model::CausalLM& model, const tokenizer::Tokenizer& tokenizer,
                                       const std::vector<TaskInput>& tasks, const ZeroShotOptions& options);

/// {"task", "file", "version", "docs", "requests", "seconds", "metrics": {"acc": x, "acc_stderr": s, ...}}
nlohmann::json to_json(const TaskResult& r);
/// lm-eval's results table (Tasks, Version, Filter, n-shot, Metric, direction, Value, ±, Stderr), markdown.
std::string format_task_table(const std::vector<TaskResult>& results);
/// One JSON line per request: task, doc (row), request index, context, continuation, token counts, loglikelihood,
/// is_greedy and (multiple choice) gold. Needs results evaluated with keep_samples.
void write_log_samples(const std::filesystem::path& path, const std::vector<TaskResult>& results,
                       io::ExistingFile existing = io::ExistingFile::kKeep);

}  // namespace alps::eval
