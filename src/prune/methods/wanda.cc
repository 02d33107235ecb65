#include "alps/prune/methods/wanda.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "prune/mask.h"
#include "alps/core/error.h"
#include "alps/io/json_fields.h"
#include "alps/prune/pattern.h"
#include "alps/prune/problem.h"

namespace alps::prune {

WandaOptions wanda_options_from_json(const nlohmann::json& j) {
  io::JsonFields(j, "method \'wanda\' options", "option").finish();
  return {};
}

at::Tensor wanda_score(const at::Tensor& W, const at::Tensor& sum_sq, double count) {
  ALPS_CHECK(W.dim() == 2 && sum_sq.dim() == 1 && sum_sq.size(0) == W.size(1) && count > 0,
             "wanda_score: W [out, in], sum_sq [in] and count > 0 expected, got ", W.sizes(), ", ", sum_sq.sizes(),
             " and ", count);
  const at::Tensor rms = (sum_sq.to(at::kFloat) / count).clamp_min(0).sqrt();  // [in]
  return W.to(at::kFloat).abs() * rms.unsqueeze(0);
}

at::Tensor wanda_score(const LayerProblem& problem) {
  // sqrt(G_jj / T) is the input feature's RMS ||X_j||_2 / sqrt(T); T only rescales, so T = 0 is read as 1.
  return wanda_score(problem.W0, problem.G.diagonal(), static_cast<double>(std::max<int64_t>(problem.tokens, 1)));
}

at::Tensor wanda_mask(const LayerProblem& problem, const Pattern& pattern) {
  return detail::keep_mask_rows(wanda_score(problem), pattern);
}

Solution Wanda::solve(const LayerProblem& problem, const Pattern& pattern) const {
  check_problem(problem, "wanda");
  pattern.check_shape(problem.rows(), problem.cols());
  at::Tensor W0 = problem.W0.to(at::kFloat);
  if (pattern.is_dense()) return {W0.clone()};
  return {W0 * wanda_mask(problem, pattern)};
}

std::unique_ptr<Method> make_wanda(const nlohmann::json& options) {
  return std::make_unique<Wanda>(wanda_options_from_json(options));
}

}  // namespace alps::prune
