#pragma once
// A structured run (alps-report.json's extra.structured) in words, for the summary and `alps inspect`.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "alps/report/report.h"

namespace alps::report {

/// Where a structured step (one of extra.structured.steps) kept its count, from the blocks it was applied to among
/// the `blocks` the run went through: "every block", "8 of 24 blocks, the dense MLPs", "every expert", "every shared
/// expert", "every mixture layer".
std::string structured_scope(const nlohmann::json& structured, const nlohmann::json& step, int64_t blocks);
/// A structured run's steps (extra.structured) in words: "1075 of 1536 neurons in every block; 6 of 9 heads in every
/// block".
std::string kept_units_text(const nlohmann::json& structured, int64_t blocks);
/// The summary's section: each step's kept count, where, and the mean error of its choice; parameters and weight
/// files before and after.
std::string structured_table(const RunReport& r);

}  // namespace alps::report
