#pragma once
// Magnitude pruning (docs/algorithms.md): zero the smallest |W0| across the whole layer, or per group for N:M.
#include <memory>
#include <nlohmann/json_fwd.hpp>

#include "alps/prune/method.h"

namespace alps::prune {

/// Magnitude pruning has no options; the JSON object must be empty.
struct MagnitudeOptions {};
MagnitudeOptions magnitude_options_from_json(const nlohmann::json& j);

class Magnitude final : public Method {
 public:
  explicit Magnitude(MagnitudeOptions options = {}) {}
  std::string_view name() const override { return "magnitude"; }
  Solution solve(const LayerProblem& problem, const Pattern& pattern) const override;
  bool needs_statistics() const override { return false; }
};

std::unique_ptr<Method> make_magnitude(const nlohmann::json& options);

}  // namespace alps::prune
