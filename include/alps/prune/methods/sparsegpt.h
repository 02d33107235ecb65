#pragma once
// SparseGPT (docs/algorithms.md): column-wise OBS updates with the upper Cholesky factor of H^-1.
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>

#include "alps/prune/method.h"

namespace alps::prune {

/// SparseGPT's constants; their meaning is declared once, in the option table (sparsegpt_option_list()).
struct SparseGptOptions {
  int64_t blocksize = 128;
  double damp = 0.01;
};
/// Reads an options object (keys: the table's names; anything else is an error).
SparseGptOptions sparsegpt_options_from_json(const nlohmann::json& j);
/// The option table as [{name, type, default, help}].
nlohmann::json sparsegpt_option_list();

class SparseGpt final : public Method {
 public:
  explicit SparseGpt(SparseGptOptions options = {});
  std::string_view name() const override { return "sparsegpt"; }
  Solution solve(const LayerProblem& problem, const Pattern& pattern) const override;
  bool refits_weights() const override { return true; }

 private:
  SparseGptOptions options_;
};

std::unique_ptr<Method> make_sparsegpt(const nlohmann::json& options);

}  // namespace alps::prune
