#pragma once
// Numbers read from text that must be nothing but the number: flag values, patterns, metadata, dataset fields.
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

namespace alps {

/// `text` as an int64 in std::stoll's syntax, or nullopt when it is empty, out of range or has anything after the
/// number.
inline std::optional<int64_t> parse_integer(std::string_view text) {
  const std::string s(text);
  size_t used = 0;
  try {
    const int64_t value = std::stoll(s, &used);
    if (used == s.size()) return value;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}

}  // namespace alps
