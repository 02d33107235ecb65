// WinoGrande, scored by partial evaluation: each option fills the blank and becomes the end of the context; the
// compared request is the rest of the sentence after the blank given each filled-in prefix.
#include "alps/core/py_text.h"
#include "eval/tasks/builders.h"

namespace alps::eval::tasks {

TaskDoc build_winogrande(const TaskRow& row) {
  const std::string& sentence = row.str("sentence");
  const size_t blank = sentence.find('_');
  if (blank == std::string::npos) row.fail("sentence", "no blank '_' in \"" + sentence + "\"");
  const std::string& answer = row.str("answer");
  if (answer != "1" && answer != "2") row.fail("answer", "expected \"1\" or \"2\", got \"" + answer + "\"");
  const std::string prefix = sentence.substr(0, blank);
  const std::string target = " " + std::string(py_strip(std::string_view(sentence).substr(blank + 1)));
  TaskDoc doc;
  doc.row = row.row();
  doc.gold = answer == "1" ? 0 : 1;
  for (const char* option : {"option1", "option2"}) {
    doc.choices.push_back(prefix + row.str(option));
    doc.requests.push_back({doc.choices.back(), target});
  }
  return doc;
}

}  // namespace alps::eval::tasks
