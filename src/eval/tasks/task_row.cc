#include "alps/eval/task_row.h"

#include "alps/core/error.h"
#include "alps/core/parse.h"

namespace alps::eval {

void TaskRow::fail(const std::string& field, const std::string& what) const {
  const std::string line = line_ > 0 ? " (line " + std::to_string(line_) + ")" : "";
  ALPS_FAIL(file_, " row ", row_, line, ": field \"", field, "\": ", what);
}

const nlohmann::json& TaskRow::at(const char* field) const {
  if (!has(field)) fail(field, "missing");
  return j_.at(field);
}

const std::string& TaskRow::str(const char* field) const {
  const nlohmann::json& v = at(field);
  if (!v.is_string()) fail(field, "expected a string, got " + v.dump());
  return v.get_ref<const std::string&>();
}

int64_t TaskRow::integer(const char* field) const {
  const nlohmann::json& v = at(field);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_string())
    if (const auto x = parse_integer(v.get_ref<const std::string&>())) return *x;
  fail(field, "expected an integer, got " + v.dump());
}

std::vector<std::string> TaskRow::strings(const nlohmann::json& list, const std::string& field) const {
  if (!list.is_array() || list.empty()) fail(field, "expected a non-empty list of strings, got " + list.dump());
  std::vector<std::string> out;
  for (const auto& v : list) {
    if (!v.is_string()) fail(field, "expected a list of strings, got the element " + v.dump());
    out.push_back(v.get<std::string>());
  }
  return out;
}

}  // namespace alps::eval
