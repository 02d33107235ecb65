#pragma once
// How the recipe's sparsity is spread over the blocks, resolved before the first block is pruned: uniform (every
// linear keeps the pattern its recipe gives it), or OWL (--sparsity-profile owl; prune/owl.h): each block's sparsity
// from its outlier fraction, measured on the dense model. The profile is part of the resume state, so that a resumed
// run prunes each block as an uninterrupted one does.
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alps/pipeline/run_plan.h"

namespace alps::model {
class CausalLM;
}

namespace alps::pipeline {

class Activations;
class Exchange;
class Phases;

class SparsityProfile {
 public:
  /// Uniform until measure() or restore() says otherwise.
  SparsityProfile(const RunPlan& plan, const model::CausalLM& m, const prune::Pattern* target);

  /// OWL's outlier fraction of every block, as OWL measures it on the dense model (each block run on the dense blocks'
  /// outputs: one pass over a copy of `inputs` before any block is pruned; the ranks' sums of squares added up), and
  /// the blocks' sparsities from them. `windows`: every rank's windows together.
  void measure(model::CausalLM& m, const Activations& inputs, int64_t windows, Exchange& exchange, Phases& phases);
  /// The profile an interrupted run measured (to_json's form; null: uniform).
  void restore(const nlohmann::json& saved);

  /// Block b's jobs, each linear that follows the profile with its share of the model's zeros.
  std::vector<LayerJob> jobs(int64_t b) const;
  /// What was measured and allocated (null when uniform), for the report and the resume state.
  const nlohmann::json& to_json() const { return json_; }

 private:
  void allocate(const std::vector<double>& fractions, double m, double lambda);
  std::pair<int64_t, int64_t> apportion();

  const RunPlan& plan_;
  const model::CausalLM& m_;
  const prune::Pattern* target_;  // the recipe's pattern (null: none; OWL needs one)
  std::vector<double> block_sparsity_;  // per block (empty: uniform)
  std::vector<int64_t> block_kept_;     // per block, OWL's mixed N:M variant: entries kept of every M
  std::map<std::string, int64_t> zeros_;  // per weight following the profile: its zeros
  nlohmann::json json_;
};

}  // namespace alps::pipeline
