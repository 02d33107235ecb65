// RTE (GLUE): does sentence1 entail sentence2? Label 0 is entailment, so "True" comes first.
#include "eval/tasks/builders.h"

namespace alps::eval::tasks {

TaskDoc build_rte(const TaskRow& row) {
  return multiple_choice(row,
                         row.str("sentence1") + "\nQuestion: " + row.str("sentence2") + " True or False?\nAnswer:",
                         {"True", "False"}, row.integer("label"), "label");
}

}  // namespace alps::eval::tasks
