// PIQA: a goal and two solutions; the solutions are scored as they are stored, trailing spaces included.
#include "eval/tasks/builders.h"

namespace alps::eval::tasks {

TaskDoc build_piqa(const TaskRow& row) {
  return multiple_choice(row, "Question: " + row.str("goal") + "\nAnswer:", {row.str("sol1"), row.str("sol2")},
                         row.integer("label"), "label");
}

}  // namespace alps::eval::tasks
