#pragma once
// Zero-shot tasks as lm-evaluation-harness 0.4.9 defines them: each task file row (JSON lines, optionally gzip)
// becomes one document of log-likelihood requests built from the row's raw dataset fields. A task is one file in
// src/eval/tasks/ (its row -> document rule) plus one row of the table in src/eval/tasks/registry.cc.
#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace alps::eval {

class TaskRow;

/// One log-likelihood request: the score is log p(continuation | context).
struct Request {
  std::string context, continuation;
};

/// One task row, ready to score.
struct TaskDoc {
  int64_t row = 0;                   ///< 0-based row of the task file
  std::vector<Request> requests;     ///< one per choice (multiple choice), or one (log-likelihood tasks)
  std::vector<std::string> choices;  ///< multiple choice: acc_norm divides each log-likelihood by len(choice)
  int64_t gold = -1;                 ///< multiple choice: index of the right request
};

enum class TaskOutput {
  kMultipleChoice,  ///< acc = argmax of the log-likelihoods is gold; acc_norm = the same per character
  kLoglikelihood,   ///< acc = the continuation is the greedy one; perplexity = exp(-mean log-likelihood)
};

struct TaskSpec {
  std::string name;                  ///< lm-eval's task name
  std::string file;                  ///< default file, relative to the data directory's eval/
  TaskOutput output = TaskOutput::kMultipleChoice;
  std::vector<std::string> metrics;  ///< as lm-eval reports them, in its order
  int version = 1;                   ///< lm-eval's task version (its table shows it)
  TaskDoc (*build)(const TaskRow& row) = nullptr;
};

/// Every task, in the order `--tasks all` runs them.
const std::vector<TaskSpec>& task_registry();
/// The task called `name`, or nullptr.
const TaskSpec* find_task(const std::string& name);
/// "lambada_openai, piqa, ...": for error messages.
std::string task_names();
/// What is wrong with a name of `--tasks`, "" when it is a task or "all".
std::string task_name_problem(std::string_view name);

/// Builds the documents of the first `limit` rows (limit <= 0: all) of `file`. Errors name the file, the row and
/// the field.
std::vector<TaskDoc> load_task_docs(const TaskSpec& task, const std::filesystem::path& file, int64_t limit = 0);

}  // namespace alps::eval
