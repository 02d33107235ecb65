#pragma once
// Each subcommand lives in its own file and registers itself on the CLI11 app. Registration stores what to run
// in `runner`; main() runs it after parsing, inside the one try/catch that turns errors into exit codes.
#include <CLI/CLI.hpp>

#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

namespace alps::cli {

using Runner = std::function<int()>;

/// Flags every subcommand takes.
struct CommonOptions {
  bool json = false;            ///< print one JSON document on stdout (logs stay on stderr)
  std::string device = "auto";  ///< auto|cpu|cuda[:i]
};

/// Adds --json and --device to `cmd`.
void add_common_flags(CLI::App* cmd, CommonOptions& common, bool with_device = true);
/// Prints `doc` on stdout, pretty, newline-terminated.
void print_json(const nlohmann::json& doc);
/// "key=value" flags (--option) -> JSON object; values are parsed as JSON when they can be (numbers, true,
/// arrays), else kept as strings. A flag without '=' is an error.
nlohmann::json parse_option_assignments(const std::vector<std::string>& assignments);
/// "a,b,,c" -> {"a", "b", "c"}: the dataset lists of --ppl / --eval.
std::vector<std::string> split_list(const std::string& text);

void add_solve_layer_command(CLI::App& app, Runner& runner);
void add_make_problem_command(CLI::App& app, Runner& runner);
void add_eval_command(CLI::App& app, Runner& runner);
void add_inspect_command(CLI::App& app, Runner& runner);
void add_generate_command(CLI::App& app, Runner& runner);
void add_prune_command(CLI::App& app, Runner& runner);

}  // namespace alps::cli
