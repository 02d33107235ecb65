// LAMBADA (OpenAI's test file): predict the passage's last word. The word is what follows the last space character;
// only ' ' separates, so a target may hold newlines ("of\n\nPower") and the context keeps them.
#include "eval/tasks/builders.h"

namespace alps::eval::tasks {

TaskDoc build_lambada_openai(const TaskRow& row) {
  const std::string& text = row.str("text");
  const size_t space = text.rfind(' ');
  TaskDoc doc;
  doc.row = row.row();
  if (space == std::string::npos)
    doc.requests.push_back({"", " " + text});
  else
    doc.requests.push_back({text.substr(0, space), " " + text.substr(space + 1)});
  return doc;
}

}  // namespace alps::eval::tasks
