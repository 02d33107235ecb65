#pragma once
#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace alps {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

/// Sends spdlog's default logger to stderr (stdout is reserved for --json documents) at `level`.
void init_logging(LogLevel level);
/// "trace|debug|info|warn|error|off" -> LogLevel.
LogLevel parse_log_level(std::string_view name);

/// Progress of a long loop: step() logs "<what> i/n <label> | elapsed | ETA" at info level, at most once per
/// `min_interval` seconds (the first and last steps always).
/// --quiet: the info log is off, but Progress lines (position, elapsed, ETA) still go to stderr, bare.
void set_progress_when_quiet(bool on);

class Progress {
 public:
  /// `already_done`: items finished before this process started (a resumed run); the ETA uses this run's rate.
  Progress(std::string what, int64_t total, double min_interval = 0, int64_t already_done = 0);
  /// Marks item `done` (1-based count of finished items) and logs with `label`.
  void step(int64_t done, std::string_view label);
  double elapsed_seconds() const;

 private:
  std::string what_;
  int64_t total_;
  double min_interval_;
  int64_t already_done_;
  std::chrono::steady_clock::time_point start_;
  double last_log_ = -1;
};

/// Seconds since `start` (steady clock).
double seconds_since(std::chrono::steady_clock::time_point start);

/// "1m05s", "3.2s", "1h02m": for progress lines.
std::string format_duration(double seconds);

}  // namespace alps
