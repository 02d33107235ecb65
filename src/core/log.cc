#include "alps/core/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <cmath>
#include <cstdio>

#include "alps/core/error.h"

namespace alps {

void init_logging(LogLevel level) {
  // spdlog's default logger writes to stdout; replace it so `alps ... --json | jq` sees only the document.
  auto logger = spdlog::stderr_color_mt("alps");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("[%H:%M:%S] [%^%l%$] %v");
  spdlog::set_level(static_cast<spdlog::level::level_enum>(static_cast<int>(level)));
}

LogLevel parse_log_level(std::string_view name) {
  if (name == "trace") return LogLevel::kTrace;
  if (name == "debug") return LogLevel::kDebug;
  if (name == "info") return LogLevel::kInfo;
  if (name == "warn") return LogLevel::kWarn;
  if (name == "error") return LogLevel::kError;
  if (name == "off") return LogLevel::kOff;
  ALPS_FAIL("unknown log level '", name, "' (expected trace, debug, info, warn, error or off)");
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  if (seconds < 60) return fmt::format("{:.1f}s", seconds);
  auto s = static_cast<int64_t>(std::llround(seconds));
  if (s < 3600) return fmt::format("{}m{:02d}s", s / 60, s % 60);
  return fmt::format("{}h{:02d}m", s / 3600, (s % 3600) / 60);
}

Progress::Progress(std::string what, int64_t total, double min_interval, int64_t already_done)
    : what_(std::move(what)),
      total_(total),
      min_interval_(min_interval),
      already_done_(already_done),
      start_(std::chrono::steady_clock::now()) {}

double Progress::elapsed_seconds() const { return seconds_since(start_); }

namespace {
std::atomic<bool> progress_when_quiet{false};
}  // namespace

void set_progress_when_quiet(bool on) { progress_when_quiet = on; }

void Progress::step(int64_t done, std::string_view label) {
  const double elapsed = elapsed_seconds();
  if (done != total_ && last_log_ >= 0 && elapsed - last_log_ < min_interval_) return;
  last_log_ = elapsed;
  const int64_t done_here = done - already_done_;
  const double eta =
      done_here > 0 ? elapsed / static_cast<double>(done_here) * static_cast<double>(total_ - done) : NAN;
  const std::string line = fmt::format("{} {}/{} {} | elapsed {} | ETA {}", what_, done, total_, label,
                                       format_duration(elapsed), format_duration(eta));
  if (spdlog::should_log(spdlog::level::info))
    spdlog::info("{}", line);
  else if (progress_when_quiet)
    std::fprintf(stderr, "%s\n", line.c_str());
}

}  // namespace alps
