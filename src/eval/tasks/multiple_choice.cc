#include "eval/tasks/builders.h"

#include <algorithm>

namespace alps::eval::tasks {

TaskDoc multiple_choice(const TaskRow& row, std::string query, std::vector<std::string> choices, int64_t gold,
                        const char* gold_field) {
  if (gold < 0 || gold >= static_cast<int64_t>(choices.size()))
    row.fail(gold_field, "answer index " + std::to_string(gold) + " is not one of the " +
                             std::to_string(choices.size()) + " choices");
  TaskDoc doc;
  doc.row = row.row();
  doc.gold = gold;
  for (const std::string& c : choices) doc.requests.push_back({query, kTargetDelimiter + c});
  doc.choices = std::move(choices);
  return doc;
}

int64_t answer_index(const TaskRow& row, const std::vector<std::string>& labels, const std::string& key,
                     const char* key_field) {
  for (size_t i = 0; i < labels.size(); ++i)
    if (labels[i] == key) return static_cast<int64_t>(i);
  std::string list;
  for (const auto& l : labels) list += (list.empty() ? "" : ", ") + l;
  row.fail(key_field, "answer key \"" + key + "\" is not one of the choice labels (" + list + ")");
}

TaskDoc question_with_choices(const TaskRow& row, std::string query, bool lstrip_key) {
  const nlohmann::json& choices = row.at("choices");
  if (choices.is_object()) {
    if (!choices.contains("text")) row.fail("choices", "expected a \"text\" list");
    if (!choices.contains("label")) row.fail("choices", "expected a \"label\" list");
    std::vector<std::string> text = row.strings(choices.at("text"), "choices.text");
    const std::vector<std::string> labels = row.strings(choices.at("label"), "choices.label");
    if (labels.size() != text.size()) row.fail("choices", "choices.text and choices.label differ in length");
    std::string key = row.str("answerKey");
    if (lstrip_key) key.erase(0, std::min(key.size(), key.find_first_not_of(" \t\n\r\f\v")));
    const int64_t gold = answer_index(row, labels, key, "answerKey");
    return multiple_choice(row, std::move(query), std::move(text), gold, "answerKey");
  }
  return multiple_choice(row, std::move(query), row.strings("choices"), row.integer("gold"), "gold");
}

}  // namespace alps::eval::tasks
