#include "alps/prune/refit.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "alps/prune/method.h"
#include "alps/prune/problem.h"
#include "fixtures.h"
#include "support.h"

namespace alps::prune {
namespace {

TEST(Refit, ExactSatisfiesTheOptimalityConditionsOnItsSupport) {
  LayerProblem p = make_synthetic_problem(test::small_options(0, 48, 96, 800));
  at::Tensor W = make_method("magnitude", {})->solve(p, Pattern::unstructured(0.7)).W;
  at::Tensor E = refit(p, W, Refine::kExact);
  EXPECT_TRUE(E.ne(0).le(W.ne(0)).all().item<bool>());  // support kept
  // Gradient of tr((W - W0) G (W - W0)^T) is 2 (W - W0) G: zero on the support, relative to its scale at W0-masked.
  at::Tensor G = p.G.to(at::kDouble);
  at::Tensor keep = W.ne(0);
  auto grad_on_support = [&](const at::Tensor& V) {
    return ((V.to(at::kDouble) - p.W0.to(at::kDouble)).matmul(G) * keep).norm().item<double>();
  };
  // The fp64 solve is exact to ~kappa 2^-53; rounding its result to fp32 moves each weight by <= 2^-24 |E|, the
  // gradient on the support by <= 2 * 2^-24 (|E| |G|) there.
  const double rounding =
      2 * std::ldexp(1.0, -24) * (E.to(at::kDouble).abs().matmul(G.abs()) * keep).norm().item<double>();
  EXPECT_LT(grad_on_support(E), 2 * rounding);
  EXPECT_GT(grad_on_support(W), 1e3 * rounding);  // the magnitude mask alone is far from optimal
}

TEST(Refit, ExactMatchesAnIndependentLeastSquaresSolve) {
  // Second formulation: min ||X w^T - X w0^T|| over w on the support, by QR least squares on the explicit X.
  SyntheticOptions o = test::small_options(2, 6, 10, 50);
  LayerProblem p = make_synthetic_problem(o);
  at::Tensor X = make_synthetic_inputs(o).to(at::kDouble);
  at::Tensor W = make_method("magnitude", {})->solve(p, Pattern::unstructured(0.5)).W;
  at::Tensor E = refit(p, W, Refine::kExact).to(at::kDouble);
  for (int64_t i = 0; i < W.size(0); ++i) {
    at::Tensor S = W[i].ne(0).nonzero().squeeze(1);
    at::Tensor target = X.matmul(p.W0[i].to(at::kDouble));
    at::Tensor XS = X.index_select(1, S);
    auto [Qm, R] = at::linalg_qr(XS);
    at::Tensor w = at::linalg_solve_triangular(R, Qm.t().matmul(target).unsqueeze(1), /*upper=*/true).squeeze(1);
    // The refit solves the normal equations of the fp32-rounded gram (|dG| <= 2^-24 |G|): a relative
    // perturbation of gamma_|S| in norm, amplified by the condition number of G[S, S]; then one rounding to fp32.
    const double kappa = at::linalg_cond(XS.t().matmul(XS)).item<double>();
    const double wmax = w.abs().max().item<double>();
    const double tol = alps::test::rounding_bound(S.numel(), kappa * wmax) + std::ldexp(1.0, -24) * wmax;
    EXPECT_TRUE(alps::test::all_close(E[i].index_select(0, S), w, tol, 0)) << "row " << i;
  }
}

TEST(Refit, ExactIsNeverWorseThanAnyMethodsOwnWeights) {
  LayerProblem p = make_synthetic_problem(test::small_options(1, 48, 96, 800));
  p.name = "self_attn.q_proj";
  for (const auto& name : method_names()) {
    for (const auto& pattern : {Pattern::unstructured(0.5), Pattern::unstructured(0.8), Pattern::n_m(2, 4)}) {
      at::Tensor W = make_method(name, {})->solve(p, pattern).W;
      const double own = relative_error(p, W), exact = relative_error(p, refit(p, W, Refine::kExact));
      EXPECT_LE(exact, own * (1 + 1e-6)) << name << " " << pattern.str();
    }
  }
}

TEST(Refit, PcgConvergesToExact) {
  LayerProblem p = make_synthetic_problem(test::small_options(4, 64, 128, 1000));
  for (const auto& pattern : {Pattern::unstructured(0.5), Pattern::unstructured(0.7), Pattern::n_m(2, 4)}) {
    for (const char* method : {"magnitude", "sparsegpt"}) {
      SCOPED_TRACE(std::string(method) + " " + pattern.str());
      at::Tensor W = make_method(method, {})->solve(p, pattern).W;
      const double exact = relative_error(p, refit(p, W, Refine::kExact));
      PcgOptions many;
      many.iterations = 1000;
      many.tolerance = 0;
      at::Tensor P = refit(p, W, Refine::kPcg, many);
      EXPECT_TRUE(P.ne(0).le(W.ne(0)).all().item<bool>());
      EXPECT_LT((relative_error(p, P) - exact) / exact, 1e-5);
      EXPECT_GE(relative_error(p, P), exact * (1 - 1e-5));
      // The default 10 iterations, warm-started from the method's weights, get within 1%.
      EXPECT_LT(relative_error(p, refit(p, W, Refine::kPcg)), 1.01 * exact);
    }
  }
}

TEST(Refit, NoneAndBadInput) {
  LayerProblem p = make_synthetic_problem(test::small_options(5, 8, 16, 100));
  EXPECT_TRUE(refit(p, p.W0, Refine::kNone).equal(p.W0));
  EXPECT_THROW(refit(p, at::zeros({3, 3}), Refine::kPcg), Error);
  EXPECT_EQ(parse_refine("exact"), Refine::kExact);
  EXPECT_THROW(parse_refine("cholesky"), Error);
}

}  // namespace
}  // namespace alps::prune
