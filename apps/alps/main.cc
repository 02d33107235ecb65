// alps command line: parses flags, dispatches to one subcommand, and is the only place that turns errors into
// exit codes (0 ok, 1 failure, 2 usage error).
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "alps/core/build_info.h"
#include "alps/core/device.h"
#include "alps/core/host_allocator.h"
#include "alps/core/interrupt.h"
#include "alps/core/threads.h"
#include "alps/core/error.h"
#include "alps/core/log.h"
#include "alps/core/parse.h"
#include "alps/core/suggest.h"
#include "alps/model/config.h"
#include "alps/prune/pattern.h"
#include "commands.h"

namespace alps::cli {

void add_common_flags(CLI::App* cmd, CommonOptions& common, bool with_device) {
  cmd->add_flag("--json", common.json, "Print one JSON document on stdout (logs go to stderr)");
  if (with_device)
    cmd->add_option("--device", common.device, "Compute device: auto, cpu or cuda[:index]")
        ->capture_default_str()
        ->check(known_name(device_name_problem, "DEVICE"));
}

void print_json(const nlohmann::json& doc) { std::cout << doc.dump(2) << std::endl; }

nlohmann::json parse_option_assignments(const std::vector<std::string>& assignments) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& a : assignments) {
    const auto eq = a.find('=');
    ALPS_USAGE_CHECK(eq != std::string::npos && eq > 0, "--option expects key=value, got '", a, "'");
    const std::string value = a.substr(eq + 1);
    nlohmann::json parsed = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
    out[a.substr(0, eq)] = parsed.is_discarded() ? nlohmann::json(value) : parsed;
  }
  return out;
}

void check_output_file(const std::string& flag, const std::string& path, bool overwrite) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  ALPS_CHECK(!fs::is_directory(p), flag, " ", path, " is a directory, expected a file name");
  ALPS_CHECK(overwrite || !fs::exists(fs::symlink_status(p)), flag, " ", path,
             " already exists; alps does not replace files unless told to: pass --overwrite or choose another name");
  const fs::path dir = p.parent_path().empty() ? fs::path(".") : p.parent_path();
  ALPS_CHECK(fs::is_directory(dir), flag, " ", path, ": directory ", dir.string(), " does not exist");
  // The file is written at the end, after the work: a directory that refuses it must be found now. access() says
  // yes to root on read-only mounts and pseudo file systems, so a file of alps's own is created and removed.
  const fs::path probe = dir / fmt::format(".{}.alps-probe-{}", p.filename().string(), ::getpid());
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ALPS_CHECK(fd >= 0, flag, " ", path, ": cannot write in ", dir.string(), ": ", std::strerror(errno));
  ::close(fd);
  ::unlink(probe.c_str());
}

void add_overwrite_flag(CLI::App* cmd, bool& overwrite, const std::string& what) {
  cmd->add_flag("--overwrite", overwrite, "Replace an existing " + what);
}

std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(',', start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

CLI::Validator int_range(int64_t lo, int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        if (const auto v = parse_integer(text); v && *v >= lo && *v <= hi) return "";
        return fmt::format("expected an integer in [{}, {}], got '{}'", lo, hi, text);
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

CLI::Validator int_at_least(int64_t lo) {
  return CLI::Validator(
      [lo](std::string& text) -> std::string {
        if (const auto v = parse_integer(text); v && *v >= lo) return "";
        return fmt::format("expected an integer >= {}, got '{}'", lo, text);
      },
      fmt::format("INT >= {}", lo));
}

CLI::Validator real_range(double lo, double hi, bool hi_open) {
  const std::string range = fmt::format("[{}, {}{}", lo, hi, hi_open ? ")" : "]");
  return CLI::Validator(
      [lo, hi, hi_open, range](std::string& text) -> std::string {
        if (const auto v = parse_real(text); v && std::isfinite(*v) && *v >= lo && (hi_open ? *v < hi : *v <= hi))
          return "";
        return "expected a number in " + range + ", got '" + text + "'";
      },
      "NUMBER in " + range);
}

CLI::Validator positive_real() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (const auto v = parse_real(text); v && std::isfinite(*v) && *v > 0) return "";
        return "expected a finite number > 0, got '" + text + "'";
      },
      "NUMBER > 0");
}

CLI::Validator zero_or_at_least(int64_t lo, const std::string& zero_means) {
  return CLI::Validator(
      [lo, zero_means](std::string& text) -> std::string {
        if (const auto v = parse_integer(text); v && (*v == 0 || *v >= lo)) return "";
        return fmt::format("expected 0 ({}) or an integer >= {}, got '{}'", zero_means, lo, text);
      },
      fmt::format("0 or INT >= {}", lo));
}

CLI::Validator uint64_text() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        // strtoull would take "-1" (as 2^64 - 1) and clamp what overflows: digits only, and in range.
        const bool digits = !text.empty() && text.size() <= 20 &&
                            std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
        errno = 0;
        if (digits && (std::strtoull(text.c_str(), nullptr, 10), errno != ERANGE)) return "";
        return fmt::format("expected an integer in [0, {}], got '{}'", UINT64_MAX, text);
      },
      "UINT64");
}

CLI::Validator non_empty_list(std::string (*each_problem)(std::string_view)) {
  return CLI::Validator(
      [each_problem](std::string& text) -> std::string {
        const std::vector<std::string> items = split_list(text);
        if (items.empty()) return "expected a comma-separated list, got '" + text + "'";
        for (const std::string& item : items)
          if (each_problem != nullptr && !each_problem(item).empty()) return each_problem(item);
        return "";
      },
      "LIST");
}

std::string model_flag_help() {
  return "Hugging Face checkpoint directory (" + model::supported_architectures() +
         "), or the name of a model in the data directory's models/";
}

std::string data_dir_flag_help() {
  return "Data directory: models/, text/, eval/ (default: $ALPS_DATA_DIR, else the one alps was built or installed "
         "with; `alps --version` shows it)";
}

CLI::Validator sparsity_fraction() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const auto v = parse_real(text);
        if (v && std::isfinite(*v) && *v >= 0 && *v < 1) return "";
        if (v && std::isfinite(*v) && *v >= 1 && *v < 100)
          return fmt::format("expected the fraction of zeros in [0, 1), got '{}' (for {}% write --sparsity {})", text,
                             text, *v / 100);
        return "expected the fraction of zeros in [0, 1), got '" + text + "'";
      },
      "FRACTION in [0, 1)");
}

CLI::Validator n_m_text() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        if (text.find(':') == std::string::npos)
          return "expected N:M such as 2:4, got '" + text + "' (unstructured sparsity is --sparsity " + text + ")";
        try {
          (void)prune::Pattern::parse(text);
        } catch (const Error& e) {
          return e.what();
        }
        return "";
      },
      "N:M");
}

CLI::Validator one_of(const std::vector<std::string>& choices) {
  std::string braced;  // as CLI11 writes a set in --help
  for (const auto& c : choices) braced += (braced.empty() ? "" : ",") + c;
  return CLI::Validator(
      [choices](std::string& text) -> std::string {
        if (std::find(choices.begin(), choices.end(), text) != choices.end()) return "";
        return "'" + text + "' is not one of " + join_names(choices) + did_you_mean(text, choices);
      },
      "{" + braced + "}");
}

CLI::Validator known_name(std::string (*problem)(std::string_view), const std::string& description) {
  return CLI::Validator([problem](std::string& text) { return problem(text); }, description);
}

namespace {

// Where in the source an error was raised helps whoever debugs alps, not whoever runs it.
void log_error(const alps::Error& e) {
  if (spdlog::should_log(spdlog::level::debug))
    spdlog::error("{} ({})", e.what(), e.where());
  else
    spdlog::error("{}", e.what());
}

}  // namespace

}  // namespace alps::cli

namespace {

// For a command line CLI11 refused: the closest subcommand to an unknown first word, or the closest flag of the
// command to the first unknown flag, as "did you mean ..."; empty when nothing is close.
std::string closest_command_line_name(const CLI::App& app, int argc, char** argv) {
  std::vector<std::string> commands;
  for (const CLI::App* sub : app.get_subcommands({})) commands.push_back(sub->get_name());
  const CLI::App* command = &app;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.rfind("-", 0) == 0) continue;
    if (std::find(commands.begin(), commands.end(), word) != commands.end()) {
      command = app.get_subcommand(word);
      break;
    }
    // A first bare word that is no subcommand (a flag's value comes after its flag, which has a dash).
    if (i == 1 || std::string(argv[i - 1]).rfind("-", 0) != 0) {
      const std::string near = alps::closest_name(word, commands);
      return near.empty() ? "" : fmt::format("'{}' is not a subcommand: did you mean `alps {}`?", word, near);
    }
  }
  std::vector<std::string> flags;
  for (const CLI::App* a : {&app, command})
    for (const CLI::Option* o : a->get_options())
      for (const std::string& name : o->get_lnames()) flags.push_back("--" + name);
  for (int i = 1; i < argc; ++i) {
    std::string word = argv[i];
    if (word.rfind("--", 0) != 0) continue;
    word = word.substr(0, word.find('='));
    if (std::find(flags.begin(), flags.end(), word) != flags.end()) continue;
    const std::string near = alps::closest_name(word, flags);
    return near.empty() ? "" : fmt::format("{} is not a flag of this command: did you mean {}?", word, near);
  }
  return "";
}

// The flags before (or after) any subcommand.
struct GlobalFlags {
  bool version = false;
  std::string log_level = "info";
  bool quiet = false;
  int threads = 0;
};

void add_global_flags(CLI::App& app, GlobalFlags& g) {
  app.add_flag("--version", g.version, "Print version, libtorch, CUDA, BLAS and thread count");
  app.add_option("--log-level", g.log_level, "trace, debug, info, warn, error or off")
      ->capture_default_str()
      ->check(alps::cli::one_of({"trace", "debug", "info", "warn", "error", "off"}));
  app.add_flag("-q,--quiet", g.quiet, "Only warnings, errors and progress lines (position, elapsed, ETA) on stderr");
  const int64_t cap = alps::max_threads();
  app.add_option("--threads", g.threads,
                 fmt::format("Cores alps may use, given to every thread pool: BLAS, libtorch's, alps's own passes "
                             "(1 to 4x the cores; default: $OMP_NUM_THREADS if set, else the cores available, "
                             "here {})",
                             alps::default_threads()))
      ->check(CLI::Validator(
          [cap](std::string& text) -> std::string {
            if (alps::cli::int_range(0, cap)(text).empty()) return "";
            return fmt::format("expected 0 (the default) or 1 to {} (4x the {} cores), got '{}'", cap, cap / 4, text);
          },
          "0 or 1..4x cores"));
}

}  // namespace

int main(int argc, char** argv) {
  alps::init_logging(alps::LogLevel::kInfo);
  CLI::App app{"alps: one-shot pruning of large language models (ALPS, SparseGPT, Wanda, DSnoT, magnitude)"};
  app.require_subcommand(0, 1);
  app.fallthrough();  // global flags (--quiet, --log-level) may follow the subcommand
  GlobalFlags g;
  add_global_flags(app, g);

  alps::cli::Runner runner;
  alps::cli::add_solve_layer_command(app, runner);
  alps::cli::add_make_problem_command(app, runner);
  alps::cli::add_prune_command(app, runner, std::vector<std::string>(argv, argv + argc));
  alps::cli::add_eval_command(app, runner);
  alps::cli::add_inspect_command(app, runner);
  alps::cli::add_generate_command(app, runner);
  alps::cli::add_tasks_command(app, runner);
  alps::cli::add_methods_command(app, runner);

  try {
    app.parse(argc, argv);
    spdlog::set_level(static_cast<spdlog::level::level_enum>(
        static_cast<int>(g.quiet ? alps::LogLevel::kWarn : alps::parse_log_level(g.log_level))));
    alps::set_progress_when_quiet(g.quiet);
    alps::configure_threads(g.threads);
    alps::install_host_buffer_cache();
    alps::install_interrupt_notice();
    if (g.version) {
      std::cout << alps::build_info_text(alps::build_info());
      return 0;
    }
    if (!runner) {
      std::vector<std::string> names;
      for (const CLI::App* sub : app.get_subcommands({})) names.push_back(sub->get_name());
      std::cerr << app.help() << "\nalps: a subcommand is required (" << alps::join_names(names)
                << "); `alps SUBCOMMAND --help` describes one\n";
      return 2;
    }
    return runner();
  } catch (const CLI::ParseError& e) {
    if (app.exit(e) == 0) return 0;
    if (const std::string hint = closest_command_line_name(app, argc, argv); !hint.empty())
      std::cerr << "alps: " << hint << "\n";
    return 2;
  } catch (const alps::UsageError& e) {
    alps::cli::log_error(e);
    return 2;
  } catch (const alps::Error& e) {
    alps::cli::log_error(e);
    return 1;
  } catch (const c10::Error& e) {
    // `prune` says more (what it was doing, which blocks are kept); every other command can at least say what to try.
    spdlog::error(
        "libtorch: {}{}", e.what_without_backtrace(),
        alps::is_device_out_of_memory(e) ? "\nto fit, lower --batch-size or --dtype, or use --device cpu" : "");
    return 1;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}
