// Issue 2's quality requirements on synthetic outlier-feature problems.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>

#include "alps/prune/method.h"
#include "alps/prune/problem.h"
#include "alps/prune/refit.h"
#include "fixtures.h"

namespace alps::prune {
namespace {

class Quality : public ::testing::TestWithParam<std::string> {};

TEST_P(Quality, AlpsBeatsSparseGptBeatsMagnitudeAndHasTheBestSupport) {
  const Pattern pattern = Pattern::parse(GetParam());
  for (uint64_t seed : {11, 12}) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    LayerProblem p = make_synthetic_problem(test::small_options(seed, 128, 192, 1536));
    p.name = "model.layers.0.self_attn.k_proj";
    std::map<std::string, double> own, support;
    for (const auto& name : method_names()) {
      at::Tensor W = make_method(name, {})->solve(p, pattern).W;
      own[name] = relative_error(p, W);
      support[name] = relative_error(p, refit(p, W, Refine::kExact));
    }
    EXPECT_LT(own["alps"], own["sparsegpt"]);
    EXPECT_LT(own["sparsegpt"], own["magnitude"]);
    for (const auto& [name, err] : support)
      if (name != "alps") EXPECT_LT(support["alps"], err) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Patterns, Quality, ::testing::Values("0.5", "0.7", "0.9", "2:4"),
                         [](const auto& info) { return info.param == "2:4" ? std::string("n2m4")
                                                                           : "s" + info.param.substr(2); });

}  // namespace
}  // namespace alps::prune
