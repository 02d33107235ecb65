#pragma once
// DSnoT (docs/algorithms.md): training-free regrow/prune cycles on top of Wanda's mask that drive each row's expected
// output change e = sum_{pruned j} W0_ij mu_j toward zero, keeping the row sparsity.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "alps/prune/method.h"

namespace alps::prune {

/// DSnoT's constants; their meaning is declared once, in the option table (dsnot_option_list()).
struct DsnotOptions {
  int64_t max_cycles = 50;
  double update_threshold = 0.1;
  std::string skip_layer = "mlp";
  std::string variance = "tokens";
};
/// Reads an options object (keys: the table's names; anything else is an error).
DsnotOptions dsnot_options_from_json(const nlohmann::json& j);
/// The option table as [{name, type, default, help}].
nlohmann::json dsnot_option_list();

/// True for names of MLP linears (containing "mlp.", "fc1" or "fc2").
bool is_mlp_layer(const std::string& name);

/// var_j of the layer's inputs, fp32 [in] on W0's device, as the option `variance` names it: "tokens", over all T
/// tokens (G_jj / T - mu_j^2); "sequences", the token-weighted mean of the variances within the calibration
/// sequences (G_jj / T - sequence_mean_sq_j), needing the problem's sequence_mean_sq.
at::Tensor dsnot_input_variance(const LayerProblem& problem, const std::string& variance);

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
