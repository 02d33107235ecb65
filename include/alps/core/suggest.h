#pragma once
// "Did you mean" for unknown names typed by a user: methods, datasets, tasks, choices of a flag.
#include <string>
#include <string_view>
#include <vector>

namespace alps {

/// "a, b, c": how messages list the names they know.
std::string join_names(const std::vector<std::string>& names);
/// The known name closest to `typed` (edit distance with adjacent swaps, ignoring case and treating '-' and '_'
/// alike) when it is close enough to be a typo (at most one edit per three characters, at least one), else "".
std::string closest_name(std::string_view typed, const std::vector<std::string>& known);
/// " (did you mean 'x'?)" for closest_name(typed, known), or "" when nothing is close.
std::string did_you_mean(std::string_view typed, const std::vector<std::string>& known);

}  // namespace alps
