#pragma once
// What a pruning run reports (alps-report.json): the recipe, software and hardware, one entry per linear layer,
// phase timings and evaluation results; plus the human summary printed at the end.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace alps::report {

struct LayerReport {
  int64_t block = 0;
  std::string name;  ///< full linear name, e.g. "model.layers.3.mlp.down_proj"
  std::vector<int64_t> shape;  ///< [out, in]
  bool skipped = false;
  std::string method;
  std::string pattern;
  std::string refine;
  double sparsity = 0;                       ///< achieved fraction of zeros
  /// Of the method's own weights (docs/algorithms.md); unset when the run had no calibration data to measure it.
  std::optional<double> rel_error;
  std::optional<double> rel_error_refined;   ///< after the refit, when one ran
  double seconds = 0;                        ///< method solve
  double refine_seconds = 0;
  /// The method's own numbers (Solution::stats: ALPS's iterations and rho, DSnoT's cycles, ...), stored beside the
  /// fields above in the layer's JSON.
  nlohmann::json stats = nlohmann::json::object();
};

struct RunReport {
  nlohmann::json recipe;
  std::string model;
  std::string output;
  bool complete = false;
  int64_t blocks_done = 0;
  int64_t blocks_total = 0;
  std::vector<LayerReport> layers;
  std::map<std::string, double> phase_seconds;  ///< calibration, statistics, solve, pruned_forward, save, eval
  nlohmann::json eval = nlohmann::json::array();
  /// The same evaluation of the unpruned input model (--eval-dense), empty when not asked for.
  nlohmann::json eval_dense = nlohmann::json::array();
  nlohmann::json extra = nlohmann::json::object();  ///< memory estimate, calibration details
  /// Every file alps wrote into the output directory besides the report ({"name", "bytes"}): what a later
  /// --overwrite may replace; anything else found there is the user's and stops it.
  nlohmann::json files = nlohmann::json::array();
};

nlohmann::json to_json(const LayerReport& r);
LayerReport layer_from_json(const nlohmann::json& j);
/// The full document, with software (alps, libtorch, BLAS, threads) and hardware (CPU, memory, CUDA) added.
nlohmann::json to_json(const RunReport& r);
/// One line: what the layers were pruned with, how many, and the sparsity over all linear layers.
std::string pruning_description(const RunReport& r);
/// Multi-line summary: overall sparsity, mean error per linear kind, slowest layers, totals, evaluation.
std::string summary_text(const RunReport& r);

/// CPU model, core count and memory of this machine, plus CUDA devices seen by libtorch.
nlohmann::json hardware_json();
/// alps's version and source revision, libtorch, the CUDA toolkit of the build, BLAS and threads: with
/// hardware_json(), what a result was computed with.
nlohmann::json software_json();

}  // namespace alps::report
