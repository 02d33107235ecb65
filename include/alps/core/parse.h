#pragma once
// Numbers read from text that must be nothing but the number: flag values, patterns, metadata, dataset fields.
#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

namespace alps {

namespace detail {
// `convert` (std::stoll or std::stod with their `used` count) applied to the whole of `text`.
template <class T, class Convert>
std::optional<T> parse_whole(std::string_view text, Convert convert) {
  const std::string s(text);
  size_t used = 0;
  try {
    const T value = convert(s, &used);
    if (used == s.size()) return value;
  } catch (const std::exception&) {
  }
  return std::nullopt;
}
}  // namespace detail

/// `text` as an int64 in std::stoll's syntax, or nullopt when it is empty, out of range or has anything after the
/// number.
inline std::optional<int64_t> parse_integer(std::string_view text) {
  return detail::parse_whole<int64_t>(text, [](const std::string& s, size_t* used) { return std::stoll(s, used); });
}

/// `text` as a double in std::stod's syntax (which takes "inf" and "nan": check finiteness where it matters), or
/// nullopt when it is empty, out of range or has anything after the number.
inline std::optional<double> parse_real(std::string_view text) {
  return detail::parse_whole<double>(text, [](const std::string& s, size_t* used) { return std::stod(s, used); });
}

}  // namespace alps
