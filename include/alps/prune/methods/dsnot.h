#pragma once
// DSnoT (docs/algorithms.md): training-free regrow/prune cycles on top of Wanda's mask that drive each row's expected
// output change e = sum_{pruned j} W0_ij mu_j toward zero, keeping the row sparsity.
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "alps/prune/method.h"

namespace alps::prune {

struct DsnotOptions {
  int64_t max_cycles = 50;          ///< swap cycles per row at most
  double update_threshold = 0.1;    ///< a row stops once |e| <= this (absolute, as in the reference)
  std::string skip_layer = "mlp";   ///< "mlp": MLP linears (mlp., fc1, fc2) keep Wanda's result; "none": refine all
};
/// Keys: max_cycles, update_threshold, skip_layer ("mlp" | "none"); anything else is an error.
DsnotOptions dsnot_options_from_json(const nlohmann::json& j);

/// True for names of MLP linears (containing "mlp.", "fc1" or "fc2").
bool is_mlp_layer(const std::string& name);

class Dsnot final : public Method {
 public:
  explicit Dsnot(DsnotOptions options = {});
  std::string_view name() const override { return "dsnot"; }
  Solution solve(const LayerProblem& problem, const Pattern& pattern) const override;

 private:
  DsnotOptions options_;
};

std::unique_ptr<Method> make_dsnot(const nlohmann::json& options);

}  // namespace alps::prune
