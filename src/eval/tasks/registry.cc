// The task table: name, default file under the data directory's eval/, output type, metrics as lm-eval reports
// them, lm-eval's task version, and the row -> document rule. Adding a task is one file here and one row below.
#include <sstream>

#include "alps/core/error.h"
#include "alps/core/suggest.h"
#include "alps/io/text_files.h"
#include "eval/tasks/builders.h"

namespace alps::eval {

const std::vector<TaskSpec>& task_registry() {
  static const std::vector<TaskSpec> table = {
      {"lambada_openai", "lambada_openai/lambada_test.jsonl.gz", TaskOutput::kLoglikelihood, {"perplexity", "acc"}, 1,
       tasks::build_lambada_openai},
      {"piqa", "piqa/piqa_validation.jsonl.gz", TaskOutput::kMultipleChoice, {"acc", "acc_norm"}, 1, tasks::build_piqa},
      {"arc_easy", "arc_easy/arc_easy_test.jsonl.gz", TaskOutput::kMultipleChoice, {"acc", "acc_norm"}, 1,
       tasks::build_arc},
      {"arc_challenge", "arc_challenge/arc_challenge_test.jsonl.gz", TaskOutput::kMultipleChoice, {"acc", "acc_norm"},
       1, tasks::build_arc},
      {"hellaswag", "hellaswag/hellaswag_validation.jsonl.gz", TaskOutput::kMultipleChoice, {"acc", "acc_norm"}, 1,
       tasks::build_hellaswag},
      {"winogrande", "winogrande/winogrande_xl_validation.jsonl.gz", TaskOutput::kMultipleChoice, {"acc"}, 1,
       tasks::build_winogrande},
      {"boolq", "boolq/boolq_validation.jsonl.gz", TaskOutput::kMultipleChoice, {"acc"}, 2, tasks::build_boolq},
      {"rte", "rte/rte_validation.jsonl.gz", TaskOutput::kMultipleChoice, {"acc"}, 1, tasks::build_rte},
      {"openbookqa", "openbookqa/openbookqa_test.jsonl.gz", TaskOutput::kMultipleChoice, {"acc", "acc_norm"}, 1,
       tasks::build_openbookqa},
  };
  return table;
}

const TaskSpec* find_task(const std::string& name) {
  for (const TaskSpec& t : task_registry())
    if (t.name == name) return &t;
  return nullptr;
}

std::string task_names() {
  std::string out;
  for (const TaskSpec& t : task_registry()) out += (out.empty() ? "" : ", ") + t.name;
  return out;
}

std::string task_name_problem(std::string_view name) {
  if (name == "all" || find_task(std::string(name)) != nullptr) return "";
  std::vector<std::string> names;
  for (const TaskSpec& t : task_registry()) names.push_back(t.name);
  return "unknown task '" + std::string(name) + "' (known: " + task_names() + ", or all)" + did_you_mean(name, names);
}

std::vector<TaskDoc> load_task_docs(const TaskSpec& task, const std::filesystem::path& file, int64_t limit) {
  ALPS_CHECK(std::filesystem::is_regular_file(file), "task ", task.name, ": expected file ", file.string(),
             " does not exist; the zero-shot task sets do not ship with alps (README.md, the optional data "
             "directory): --data-dir DIR or $ALPS_DATA_DIR names a data directory holding eval/, `alps eval "
             "--task-data DIR` a directory of task files");
  std::istringstream in(io::read_text_file(file));
  std::vector<TaskDoc> docs;
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line) && (limit <= 0 || static_cast<int64_t>(docs.size()) < limit);
       ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      ALPS_FAIL(file.string(), " row ", docs.size(), " (line ", line_no, "): not valid JSON (", e.what(), ")");
    }
    ALPS_CHECK(j.is_object(), file.string(), " row ", docs.size(), " (line ", line_no, "): expected a JSON object");
    docs.push_back(task.build(TaskRow(j, file.string(), static_cast<int64_t>(docs.size()), line_no)));
  }
  ALPS_CHECK(!docs.empty(), "task ", task.name, ": ", file.string(), " holds no rows");
  return docs;
}

}  // namespace alps::eval
