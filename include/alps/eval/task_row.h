#pragma once
// Typed access to one row of a task file; every error names the file, the row and the field.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace alps::eval {

class TaskRow {
 public:
  /// `row`: 0-based among the file's rows; `line`: its 1-based line in the file (0: not known), for errors.
  TaskRow(const nlohmann::json& j, std::string file, int64_t row, int64_t line = 0)
      : j_(j), file_(std::move(file)), row_(row), line_(line) {}

  int64_t row() const { return row_; }
  bool has(const char* field) const { return j_.is_object() && j_.contains(field); }
  /// The field's value; a missing field is an error.
  const nlohmann::json& at(const char* field) const;
  const std::string& str(const char* field) const;
  /// An integer, or a string holding one (Hugging Face stores some labels as "3").
  int64_t integer(const char* field) const;
  /// A list of strings (`list` is the field's JSON value, `field` its name for errors).
  std::vector<std::string> strings(const nlohmann::json& list, const std::string& field) const;
  std::vector<std::string> strings(const char* field) const { return strings(at(field), field); }
  /// Throws "FILE row R: field F: WHAT".
  [[noreturn]] void fail(const std::string& field, const std::string& what) const;

 private:
  const nlohmann::json& j_;
  std::string file_;
  int64_t row_;
  int64_t line_;
};

}  // namespace alps::eval
