#include "alps/pipeline/run_state.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "alps/core/log.h"
#include "alps/prune/method.h"

namespace alps::pipeline {

double Phases::Scope::seconds() const { return seconds_since(start_); }

Phases::Scope Phases::enter(std::string key, std::string step) {
  set_step(std::move(step));
  return Scope(*this, std::move(key));
}

void Phases::add(const std::string& key, double seconds) {
  const std::lock_guard<std::mutex> lock(mutex_);
  seconds_[key] += seconds;
}

void Phases::set_step(std::string what) {
  const std::lock_guard<std::mutex> lock(mutex_);
  step_ = std::move(what);
}

std::string Phases::step() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return step_;
}

std::map<std::string, double> Phases::seconds() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return seconds_;
}

void Phases::restore(const nlohmann::json& seconds) {
  const std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& [k, v] : seconds.items()) seconds_[k] = v.get<double>();
}

std::string RunState::block_name(int64_t b) const { return fmt::format("block {}/{}", b + 1, blocks_total); }

void RunState::write_into(report::RunReport& r) const {
  r.blocks_total = blocks_total;
  r.blocks_done = next_block;
  r.layers = layers;
  r.phase_seconds = phases.seconds();
  r.extra["calibration"] = calibration;
  if (!units.empty()) r.extra["structured"]["blocks"] = units;
  r.extra["legs"] = legs;
}

void log_layer(const report::LayerReport& lr, const std::string& linear, int64_t blocks_total) {
  if (lr.skipped) {
    spdlog::info("block {}/{} {}: skipped (left dense)", lr.block + 1, blocks_total, linear);
    return;
  }
  spdlog::info("block {}/{} {}: {} {} sparsity {:.3f}{}{} ({:.2f}s{})", lr.block + 1, blocks_total, linear, lr.method,
               lr.pattern, lr.sparsity, lr.rel_error ? fmt::format(" err {:.4e}", *lr.rel_error) : "",
               lr.rel_error_refined ? fmt::format(" -> {:.4e} after {}", *lr.rel_error_refined, lr.refine) : "",
               lr.seconds, lr.stats.empty() ? "" : ", " + prune::stats_text(lr.stats));
}

}  // namespace alps::pipeline
