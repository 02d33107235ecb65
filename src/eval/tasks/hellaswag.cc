// HellaSwag: activity label, context and four endings, cleaned of WikiHow's bracket artefacts. Endings that keep a
// leading space after cleaning are scored with it (two spaces after the delimiter).
#include <string>

#include "alps/core/py_text.h"
#include "eval/tasks/builders.h"

namespace alps::eval::tasks {

namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

// Drops every shortest "[...]" that holds no newline (the regex \[.*?\], where '.' stops at '\n').
std::string drop_brackets(const std::string& s) {
  std::string out;
  size_t i = 0;
  while (i < s.size()) {
    if (s[i] == '[') {
      const size_t close = s.find_first_of("]\n", i + 1);
      if (close != std::string::npos && s[close] == ']') {
        i = close + 1;
        continue;
      }
    }
    out += s[i++];
  }
  return out;
}

std::string preprocess(std::string_view text) {
  std::string s(py_strip(text));
  replace_all(s, " [title]", ". ");
  s = drop_brackets(s);
  replace_all(s, "  ", " ");
  return s;
}

}  // namespace

TaskDoc build_hellaswag(const TaskRow& row) {
  const std::string ctx = row.str("ctx_a") + " " + py_capitalize(row.str("ctx_b"));
  std::vector<std::string> endings;
  for (const std::string& e : row.strings("endings")) endings.push_back(preprocess(e));
  return multiple_choice(row, preprocess(row.str("activity_label") + ": " + ctx), std::move(endings),
                         row.integer("label"), "label");
}

}  // namespace alps::eval::tasks
