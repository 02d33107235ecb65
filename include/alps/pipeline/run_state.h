#pragma once
// The progress of one `alps prune` run, typed: where it stands (the next block), what it did (one report per
// linear), where its time went and what it is doing now. The report (alps-report.json) and the resume state are both
// written from it; neither serves as the other's store.
#include <ATen/core/Tensor.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alps/report/report.h"

namespace alps::pipeline {

/// Where a run's wall time goes, by phase ("statistics", "solve", ...), and the step it is in now, which an error
/// that interrupts the run names. Concurrent solves share it.
class Phases {
 public:
  /// Counts the wall time from its start to its end into one phase.
  class Scope {
   public:
    Scope(Phases& phases, std::string key) : phases_(phases), key_(std::move(key)) {}
    ~Scope() { phases_.add(key_, seconds()); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
    double seconds() const;

   private:
    Phases& phases_;
    std::string key_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  };

  /// Enters phase `key` doing `step`; the phase lasts as long as the returned scope.
  [[nodiscard]] Scope enter(std::string key, std::string step);
  void add(const std::string& key, double seconds);
  void set_step(std::string what);
  std::string step() const;
  std::map<std::string, double> seconds() const;
  /// The phases of the run that an interrupted one continues.
  void restore(const nlohmann::json& seconds);

 private:
  mutable std::mutex mutex_;
  std::map<std::string, double> seconds_;
  std::string step_;
};

struct RunState {
  nlohmann::json key;  ///< the job's fingerprint (resume_key): what a continuation must share
  int64_t next_block = 0;
  int64_t blocks_total = 0;
  std::vector<report::LayerReport> layers;  ///< of the finished blocks, in block order
  nlohmann::json calibration = nlohmann::json::object();  ///< where the windows came from
  nlohmann::json units = nlohmann::json::array();  ///< the structured steps of the finished blocks (unit_removal.h)
  /// The processes that ran the blocks: one entry per start or --resume (first_block, end_block, world_size, device,
  /// alps version and source revision).
  nlohmann::json legs = nlohmann::json::array();
  /// The finished linears whose N:M groups read their inputs in another order (Outcome::input_order), by weight
  /// name: the output's channel_orders.safetensors.
  std::map<std::string, at::Tensor> input_orders;
  Phases phases;

  bool finished() const { return next_block >= blocks_total; }
  /// "block 3/32", as every message of the run counts blocks.
  std::string block_name(int64_t b) const;
  /// Its layers, blocks, phases and calibration into `r`.
  void write_into(report::RunReport& r) const;
};

/// Logs one linear's outcome as the run lists every linear.
void log_layer(const report::LayerReport& lr, const std::string& linear, int64_t blocks_total);

}  // namespace alps::pipeline
