// OpenBookQA (main): the question stem alone is the context, the answer texts the choices.
#include "eval/tasks/builders.h"

namespace alps::eval::tasks {

TaskDoc build_openbookqa(const TaskRow& row) { return question_with_choices(row, row.str("question_stem"), true); }

}  // namespace alps::eval::tasks
