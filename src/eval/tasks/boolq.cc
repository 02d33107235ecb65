// BoolQ (SuperGLUE): a passage (with its "Title -- " prefix) and a yes/no question.
#include "eval/tasks/builders.h"

namespace alps::eval::tasks {

TaskDoc build_boolq(const TaskRow& row) {
  return multiple_choice(row, row.str("passage") + "\nQuestion: " + row.str("question") + "?\nAnswer:",
                         {"no", "yes"}, row.integer("label"), "label");
}

}  // namespace alps::eval::tasks
