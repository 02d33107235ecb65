#pragma once
// Wanda (docs/algorithms.md): score |W0_ij| sqrt(G_jj / T), prune the lowest per output row (or per group for N:M).
#include <memory>
#include <nlohmann/json_fwd.hpp>

#include "alps/core/tensor_fwd.h"
#include "alps/prune/method.h"

namespace alps::prune {

/// Wanda has no options; the JSON object must be empty.
struct WandaOptions {};
WandaOptions wanda_options_from_json(const nlohmann::json& j);

/// Wanda's score |W0_ij| * sqrt(G_jj / T) ([out, in], fp32).
at::Tensor wanda_score(const LayerProblem& problem);
/// The same score from the sums of squares of the input's columns (sum_sq [in], G's diagonal) over `count` rows of
/// inputs: |W_ij| sqrt(sum_sq_j / count), fp32. The count only rescales (OWL divides by windows, Wanda by tokens).
at::Tensor wanda_score(const at::Tensor& W, const at::Tensor& sum_sq, double count);
/// Wanda's kept mask ([out, in], bool): per-row floor(s * in) lowest scores pruned, or per group for N:M.
at::Tensor wanda_mask(const LayerProblem& problem, const Pattern& pattern);

class Wanda final : public Method {
 public:
  explicit Wanda(WandaOptions options = {}) {}
  std::string_view name() const override { return "wanda"; }
  Solution solve(const LayerProblem& problem, const Pattern& pattern) const override;
};

std::unique_ptr<Method> make_wanda(const nlohmann::json& options);

}  // namespace alps::prune
