#pragma once
// What the structured pruning tests (prune_structured_test.cc, prune_structured_mixtures_test.cc) share: a prune run's
// arguments, the report's structured section and its kept units, and the dense weights with removed units zeroed.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "support.h"

namespace alps::test_structured {

/// `alps prune` of `model` into `out` on 4 windows of 32 tokens of the committed calibration text, on the CPU, with
/// --json; `extra` follows.
std::vector<std::string> args_for(const std::filesystem::path& model, const std::filesystem::path& out,
                                  std::vector<std::string> extra);
/// The report's extra.structured.
nlohmann::json structured_of(const test::CliResult& r);
/// The kept units of `structure` in block b, from the report.
std::vector<int64_t> kept_units(const nlohmann::json& structured, int64_t b, const std::string& structure);
/// `--structured-method score --remove-neurons 0.25` on a fixture into dir/out: the run, and the copy of the fixture
/// it read (with stories260K's tokenizer).
std::pair<test::CliResult, std::filesystem::path> score_a_quarter_of_the_neurons(const std::string& fixture,
                                                                                 const std::filesystem::path& dir);
/// Columns of an [out, units * width] weight not in `kept`, zeroed.
at::Tensor zero_removed(at::Tensor W, const std::vector<int64_t>& kept, int64_t width);

}  // namespace alps::test_structured
