#pragma once
// One document builder per task file in this directory; registry.cc puts them in the task table.
#include <string>
#include <vector>

#include "alps/eval/task.h"
#include "alps/eval/task_row.h"

namespace alps::eval::tasks {

/// lm-eval's target delimiter between a multiple-choice query and each choice.
inline constexpr const char* kTargetDelimiter = " ";

/// A multiple-choice document: one request (query, delimiter + choice) per choice; `gold` must index a choice.
TaskDoc multiple_choice(const TaskRow& row, std::string query, std::vector<std::string> choices, int64_t gold,
                        const char* gold_field);
/// The index of `key` among `labels` (ARC / OpenBookQA answer keys: "A".."E" or "1".."5").
int64_t answer_index(const TaskRow& row, const std::vector<std::string>& labels, const std::string& key,
                     const char* key_field);

/// ARC / OpenBookQA: choices {"text": [...], "label": [...]} with the "answerKey" among the labels (letters, or
/// digits 1-5 on some ARC questions; OpenBookQA's key may carry leading spaces: `lstrip_key`), or choices already a
/// list of texts with the answer index in "gold".
TaskDoc question_with_choices(const TaskRow& row, std::string query, bool lstrip_key);

TaskDoc build_lambada_openai(const TaskRow& row);
TaskDoc build_piqa(const TaskRow& row);
TaskDoc build_arc(const TaskRow& row);
TaskDoc build_hellaswag(const TaskRow& row);
TaskDoc build_winogrande(const TaskRow& row);
TaskDoc build_boolq(const TaskRow& row);
TaskDoc build_rte(const TaskRow& row);
TaskDoc build_openbookqa(const TaskRow& row);

}  // namespace alps::eval::tasks
