#pragma once
// Each subcommand lives in its own file and registers itself on the CLI11 app. Registration stores what to run
// in `runner`; main() runs it after parsing, inside the one try/catch that turns errors into exit codes.
#include <CLI/CLI.hpp>

#include <cstdint>
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
/// Refuses, before any work, an output file that would replace something or could not be written: `path` exists
/// (unless `overwrite`), is a directory, or its directory is missing or not writable. Outputs are written through a
/// temporary name and renamed, so they appear complete or not at all.
void check_output_file(const std::string& flag, const std::string& path, bool overwrite);
/// Adds --overwrite ("replace an existing <what>") to `cmd`.
void add_overwrite_flag(CLI::App* cmd, bool& overwrite, const std::string& what);
/// "a,b,,c" -> {"a", "b", "c"}: the dataset lists of --ppl / --eval.
std::vector<std::string> split_list(const std::string& text);

// Flag value rules as CLI11 validators: a value outside its range is a usage error (exit 2) reported before
// anything runs, with the flag's name. Floating-point rules refuse NaN and infinities.
/// An integer in [lo, hi].
CLI::Validator int_range(int64_t lo, int64_t hi);
/// An integer >= lo.
CLI::Validator int_at_least(int64_t lo);
/// A finite number in [lo, hi], or [lo, hi) with `hi_open`.
CLI::Validator real_range(double lo, double hi, bool hi_open = false);
/// A finite number > 0.
CLI::Validator positive_real();
/// 0 (meaning `zero_means`: the command's default unless said otherwise) or an integer >= lo (a window of one token
/// predicts nothing: lo = 2 for windows; one bootstrap resample has no spread).
CLI::Validator zero_or_at_least(int64_t lo, const std::string& zero_means = "the default");
/// An unsigned 64-bit integer written in decimal digits (no sign, no overflow).
CLI::Validator uint64_text();
/// A comma-separated list with at least one item: an empty --tasks or --eval would silently do another job. With
/// `each_problem`, every item must be a name it finds nothing wrong with.
CLI::Validator non_empty_list(std::string (*each_problem)(std::string_view) = nullptr);
/// The help of every --model flag: the architectures it takes, read from their table.
std::string model_flag_help();
/// The help of every --data-dir flag.
std::string data_dir_flag_help();
/// An unstructured sparsity in [0, 1); a percentage (70) is refused with the fraction it likely meant.
CLI::Validator sparsity_fraction();
/// An N:M pattern with 1 <= N <= M; a fraction (0.7) is refused, pointing at --sparsity.
CLI::Validator n_m_text();
/// One of `choices`, else an error listing them with the closest one as a suggestion.
CLI::Validator one_of(const std::vector<std::string>& choices);
/// A name that `problem` (device_name_problem, dtype_name_problem, ...) finds nothing wrong with.
CLI::Validator known_name(std::string (*problem)(std::string_view), const std::string& description);

void add_solve_layer_command(CLI::App& app, Runner& runner);
void add_make_problem_command(CLI::App& app, Runner& runner);
void add_eval_command(CLI::App& app, Runner& runner);
void add_inspect_command(CLI::App& app, Runner& runner);
void add_generate_command(CLI::App& app, Runner& runner);
void add_tasks_command(CLI::App& app, Runner& runner);
void add_methods_command(CLI::App& app, Runner& runner);
/// `argv`: the command line, which `prune --nproc` runs again in each worker.
void add_prune_command(CLI::App& app, Runner& runner, std::vector<std::string> argv);

}  // namespace alps::cli
