// ARC-Easy and ARC-Challenge: a science question and its answer texts (see question_with_choices for the answer key).
#include "eval/tasks/builders.h"

namespace alps::eval::tasks {

TaskDoc build_arc(const TaskRow& row) {
  return question_with_choices(row, "Question: " + row.str("question") + "\nAnswer:", false);
}

}  // namespace alps::eval::tasks
