// alps command line: parses flags, dispatches to one subcommand, and is the only place that turns errors into
// exit codes (0 ok, 1 failure, 2 usage error).
#include <c10/util/Exception.h>
#include <spdlog/spdlog.h>

#include <iostream>

#include "alps/core/build_info.h"
#include "alps/core/device.h"
#include "alps/core/error.h"
#include "alps/core/log.h"
#include "commands.h"

namespace alps::cli {

void add_common_flags(CLI::App* cmd, CommonOptions& common, bool with_device) {
  cmd->add_flag("--json", common.json, "Print one JSON document on stdout (logs go to stderr)");
  if (with_device)
    cmd->add_option("--device", common.device, "Compute device: auto, cpu or cuda[:index]")->capture_default_str();
}

void print_json(const nlohmann::json& doc) { std::cout << doc.dump(2) << std::endl; }

nlohmann::json parse_option_assignments(const std::vector<std::string>& assignments) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& a : assignments) {
    const auto eq = a.find('=');
    ALPS_CHECK(eq != std::string::npos && eq > 0, "--option expects key=value, got '", a, "'");
    const std::string value = a.substr(eq + 1);
    nlohmann::json parsed = nlohmann::json::parse(value, nullptr, /*allow_exceptions=*/false);
    out[a.substr(0, eq)] = parsed.is_discarded() ? nlohmann::json(value) : parsed;
  }
  return out;
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

}  // namespace alps::cli

int main(int argc, char** argv) {
  alps::init_logging(alps::LogLevel::kInfo);
  CLI::App app{"alps: one-shot pruning of large language models (ALPS, SparseGPT, Wanda, DSnoT, magnitude)"};
  app.require_subcommand(0, 1);
  app.fallthrough();  // global flags (--quiet, --log-level) may follow the subcommand
  bool version = false;
  std::string log_level = "info";
  bool quiet = false;
  int threads = 0;
  app.add_flag("--version", version, "Print version, libtorch, CUDA, BLAS and thread count");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error or off")->capture_default_str();
  app.add_flag("-q,--quiet", quiet, "Only warnings and errors on stderr");
  app.add_option("--threads", threads, "libtorch intra-op threads (default: libtorch's own; BLAS keeps its threads)");

  alps::cli::Runner runner;
  alps::cli::add_solve_layer_command(app, runner);
  alps::cli::add_make_problem_command(app, runner);
  alps::cli::add_prune_command(app, runner);
  alps::cli::add_eval_command(app, runner);
  alps::cli::add_inspect_command(app, runner);
  alps::cli::add_generate_command(app, runner);

  try {
    app.parse(argc, argv);
    spdlog::set_level(static_cast<spdlog::level::level_enum>(
        static_cast<int>(quiet ? alps::LogLevel::kWarn : alps::parse_log_level(log_level))));
    alps::configure_threads(threads);
    if (version) {
      std::cout << alps::build_info_text(alps::build_info());
      return 0;
    }
    if (!runner) {
      std::cout << app.help();
      return 2;
    }
    return runner();
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const alps::Error& e) {
    spdlog::error("{} ({})", e.what(), e.where());
    return 1;
  } catch (const c10::Error& e) {
    spdlog::error("libtorch: {}", e.what_without_backtrace());
    return 1;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return 1;
  }
}
