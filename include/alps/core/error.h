#pragma once
// One error type for the whole library. Messages name the object, what was expected and what was found;
// `where()` is the throwing site ("file:line") so a user report points at the check that fired.
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace alps {

class Error : public std::runtime_error {
 public:
  Error(std::string message, std::string where) : std::runtime_error(std::move(message)), where_(std::move(where)) {}
  /// "file:line" of the check that raised the error.
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

/// A command line that cannot work whatever the inputs: a flag value outside its range, contradicting or missing
/// flags. The CLI exits with 2 for it and with 1 for every other Error (files, data, the environment).
class UsageError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename... Args>
std::string concat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}
std::string where(const char* file, int line);
}  // namespace detail

}  // namespace alps

/// Throws alps::Error with the concatenation of the arguments.
#define ALPS_FAIL(...) \
  throw ::alps::Error(::alps::detail::concat(__VA_ARGS__), ::alps::detail::where(__FILE__, __LINE__))
/// Throws alps::UsageError with the concatenation of the arguments (name the flag).
#define ALPS_USAGE_FAIL(...) \
  throw ::alps::UsageError(::alps::detail::concat(__VA_ARGS__), ::alps::detail::where(__FILE__, __LINE__))
/// Throws alps::UsageError unless `cond` holds.
#define ALPS_USAGE_CHECK(cond, ...) \
  do {                              \
    if (!(cond)) ALPS_USAGE_FAIL(__VA_ARGS__); \
  } while (0)
/// Throws alps::Error unless `cond` holds.
#define ALPS_CHECK(cond, ...) \
  do {                        \
    if (!(cond)) ALPS_FAIL(__VA_ARGS__); \
  } while (0)
