#include "alps/prune/methods/magnitude.h"

#include <ATen/ATen.h>

#include "prune/mask.h"
#include "alps/io/json_fields.h"
#include "alps/prune/pattern.h"
#include "alps/prune/problem.h"

namespace alps::prune {

MagnitudeOptions magnitude_options_from_json(const nlohmann::json& j) {
  io::JsonFields(j, "method \'magnitude\' options", "option").finish();
  return {};
}

Solution Magnitude::solve(const LayerProblem& problem, const Pattern& pattern) const {
  // W0 is all it reads; statistics, when a problem carries them, must still be valid ones.
  if (problem.G.defined())
    check_problem(problem, "magnitude");
  else
    check_weight(problem, "magnitude");
  pattern.check_shape(problem.rows(), problem.cols());
  at::Tensor W0 = problem.W0.to(at::kFloat);
  if (pattern.is_dense()) return {W0.clone()};
  return {W0 * detail::keep_mask_layer(W0.abs(), pattern)};
}

std::unique_ptr<Method> make_magnitude(const nlohmann::json& options) {
  return std::make_unique<Magnitude>(magnitude_options_from_json(options));
}

}  // namespace alps::prune
