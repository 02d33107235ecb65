#pragma once
// Small string tests that C++17's std::string lacks.
#include <string_view>

namespace alps {

/// Whether `s` ends with `suffix` (std::string::ends_with from C++20).
inline bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace alps
