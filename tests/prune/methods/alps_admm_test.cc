#include "alps/prune/methods/alps_admm.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "alps/prune/problem.h"
#include "alps/prune/shared_factors.h"
#include "support.h"
#include "../fixtures.h"

namespace alps::prune {
namespace {

using Action = RhoSchedule::Action;

TEST(RhoSchedule, GrowsByTheSupportChangeThresholds) {
  RhoSchedule s{AlpsOptions{}};
  const int64_t k = 10000;
  EXPECT_EQ(s.check(2, 1000, k), Action::kContinue);  // s_t >= 0.1 k
  EXPECT_DOUBLE_EQ(s.rho(), 0.1 * 1.3);
  EXPECT_EQ(s.check(5, 50, k), Action::kContinue);  // s_t >= 0.005 k
  EXPECT_DOUBLE_EQ(s.rho(), 0.1 * 1.3 * 1.2);
  EXPECT_EQ(s.check(8, 1, k), Action::kContinue);  // s_t >= 1 after an increase
  EXPECT_DOUBLE_EQ(s.rho(), 0.1 * 1.3 * 1.2 * 1.1);
  EXPECT_EQ(s.check(11, 0, k), Action::kStop);  // stable support after an increase
}

TEST(RhoSchedule, ShrinksAndRestartsBeforeTheFirstIncrease) {
  RhoSchedule s{AlpsOptions{}};
  EXPECT_EQ(s.check(2, 3, 10000), Action::kRestart);  // few changes, never increased: rho / 5 and restart
  EXPECT_DOUBLE_EQ(s.rho(), 0.02);
  EXPECT_EQ(s.check(5, 0, 10000), Action::kContinue);  // stable before any increase: rho / 5, go on
  EXPECT_DOUBLE_EQ(s.rho(), 0.004);
  EXPECT_EQ(s.check(8, 0, 10000), Action::kContinue) << "never increased: a stable support does not stop the loop";
  AlpsOptions no_restart;
  no_restart.restart = false;
  RhoSchedule t{no_restart};
  EXPECT_EQ(t.check(2, 3, 10000), Action::kContinue);
}

TEST(RhoSchedule, LateStopAndCap) {
  AlpsOptions o;
  o.rho0 = 9e5;
  RhoSchedule s{o};
  EXPECT_EQ(s.check(2, 5000, 10000), Action::kContinue);
  EXPECT_DOUBLE_EQ(s.rho(), 1e6);  // capped
  EXPECT_EQ(s.check(29, 2, 10000), Action::kContinue);  // 2 < 3e-4 k = 3 but before iteration 30
  EXPECT_EQ(s.check(32, 2, 10000), Action::kStop);      // after iteration 30 it stops
  EXPECT_EQ(s.check(35, 4, 10000), Action::kContinue);
}

TEST(Alps, FactorisesOnceStopsAndReportsItsSchedule) {
  LayerProblem p = make_synthetic_problem(test::small_options(0, 64, 128, 1000));
  for (const auto& pattern : test::all_patterns()) {
    SCOPED_TRACE(pattern.str());
    Solution s = make_alps_admm({})->solve(p, pattern);
    const int64_t iterations = s.stats.at("iterations");
    EXPECT_EQ(s.stats.at("factorizations"), 1);
    EXPECT_GT(iterations, 3);
    EXPECT_LT(iterations, 300);                      // the schedule, not the cap, ends the loop on these problems
    EXPECT_GT(s.stats.at("rho").get<double>(), 0.1);  // rho grew before the support settled
    EXPECT_TRUE(satisfies(s.W, pattern));
  }
  Solution capped = make_alps_admm({{"max_iterations", 7}})->solve(p, Pattern::unstructured(0.5));
  EXPECT_EQ(capped.stats.at("iterations"), 7);
  EXPECT_TRUE(satisfies(capped.W, Pattern::unstructured(0.5)));
}

TEST(Alps, PcgRefitImprovesTheProjectedAdmmIterate) {
  LayerProblem p = make_synthetic_problem(test::small_options(1, 64, 128, 1000));
  const Pattern pattern = Pattern::unstructured(0.7);
  const double without = relative_error(p, make_alps_admm({{"pcg_iterations", 0}})->solve(p, pattern).W);
  Solution with = make_alps_admm({})->solve(p, pattern);
  EXPECT_GT(with.stats.at("refit_iterations").get<int64_t>(), 0);
  EXPECT_LT(relative_error(p, with.W), without);
}

// The B-update forms (eigenbasis: two products per iteration; explicit (Hn + rho I)^-1 per rho: one; Cholesky
// factors), the fp32/fp64 eigendecompositions, the fused/ATen vector kernels and split TF32 products (here in fp32 on
// the CPU, the same arithmetic as on tensor cores) are the same ADMM up to rounding. Over a few
// iterations (no rho change yet) the iterates agree entry by entry; over a whole run the nonconvex projection lets
// rounding change the path (27 vs 30 iterations here), so only the outcome is compared.
TEST(Alps, BUpdateFormsAndEighPrecisionAgree) {
  LayerProblem p = make_synthetic_problem(test::small_options(3, 96, 128, 1000));
  for (const auto& pattern : {Pattern::unstructured(0.7), Pattern::n_m(2, 4)}) {
    SCOPED_TRACE(pattern.str());
    const nlohmann::json reference = {{"b_update", "eigenbasis"}, {"eigh_double", true}, {"fused", false}};
    nlohmann::json short_run = {{"max_iterations", 2}, {"pcg_iterations", 0}};
    auto with = [](nlohmann::json base, const nlohmann::json& extra) {
      base.update(extra);
      return base;
    };
    at::Tensor W_short = make_alps_admm(with(short_run, reference))->solve(p, pattern).W;
    const double full = relative_error(p, make_alps_admm(reference)->solve(p, pattern).W);
    for (const auto& options : {nlohmann::json{{"b_update", "explicit"}}, nlohmann::json{{"b_update", "cholesky"}},
                                nlohmann::json{{"eigh_double", false}},
                                nlohmann::json{{"b_update", "explicit"}, {"eigh_double", false}},
                                nlohmann::json{{"fused", false}}, nlohmann::json::object(),
                                nlohmann::json{{"b_update", "eigenbasis"}, {"products", "tf32x3"}},
                                nlohmann::json{{"b_update", "explicit"}, {"products", "tf32x3"}},
                                nlohmann::json{{"b_update", "cholesky"}, {"products", "tf32x3"}}}) {
      SCOPED_TRACE(options.dump());
      at::Tensor W = make_alps_admm(with(short_run, options))->solve(p, pattern).W;
      at::Tensor both = W.ne(0).logical_and(W_short.ne(0));
      EXPECT_LT(W.ne(0).ne(W_short.ne(0)).sum().item<int64_t>(), W.numel() / 1000);
      EXPECT_LT(((W - W_short) * both).abs().max().item<double>(), 1e-4 * W_short.abs().max().item<double>());
      EXPECT_NEAR(relative_error(p, make_alps_admm(options)->solve(p, pattern).W), full, 0.02 * full);
    }
  }
  EXPECT_THROW(make_alps_admm({{"b_update", "inverse"}}), Error);
  EXPECT_THROW(make_alps_admm({{"products", "tf32"}}), Error);
}

// Cholesky factors are made once per value of rho and no eigendecomposition at all; an Hn + rho I that is not
// positive definite is refused with the way out, not solved into garbage.
TEST(Alps, CholeskyFactorsOncePerRho) {
  LayerProblem p = make_synthetic_problem(test::small_options(5, 64, 128, 1000));
  Solution s = make_alps_admm({{"b_update", "cholesky"}})->solve(p, Pattern::unstructured(0.6));
  EXPECT_EQ(s.stats.at("b_update"), "cholesky");
  const int64_t iterations = s.stats.at("iterations"), factorizations = s.stats.at("factorizations");
  EXPECT_GE(factorizations, 2);  // rho changed at least once
  EXPECT_LE(factorizations, (iterations + 2) / 3 + 1);  // at most one per check period, plus the first
  // Not a Gram matrix (what check_gram refuses before any solve in alps): indefinite, with a zero diagonal.
  LayerProblem indefinite = p;
  indefinite.G = at::zeros_like(p.G);
  indefinite.G[0][1] = 1;
  indefinite.G[1][0] = 1;
  EXPECT_NE(alps::test::error_message([&] {
              make_alps_admm({{"b_update", "cholesky"}, {"damp", 0.0}})->solve(indefinite, Pattern::unstructured(0.5));
            }).find("b_update=cholesky"),
            std::string::npos);
}

// The GPU's choice of B-update as measured on an H100 (alps_admm.cc): on LLaMA-7B's shapes Cholesky factors for
// q_proj (the first of its group: k/v then find no eigendecomposition and factor too), o_proj and down_proj, the
// shared eigendecomposition for gate/up, whose wide output makes the triangular solves dearer than the inverse; a
// linear that finds the eigendecomposition made takes it unless its output is narrow. On LLaMA-70B's shapes the
// blocked triangular solves run near the product rate and every linear factors.
TEST(Alps, GpuChoosesCholeskyWhereTheTriangularSolvesCostLess) {
  EXPECT_TRUE(cholesky_is_cheaper(4096, 4096, 3, false));    // q_proj, and k/v after it
  EXPECT_FALSE(cholesky_is_cheaper(4096, 4096, 3, true));    // k/v had the eigendecomposition been made
  EXPECT_TRUE(cholesky_is_cheaper(4096, 4096, 1, false));    // o_proj
  EXPECT_FALSE(cholesky_is_cheaper(4096, 11008, 2, false));  // gate_proj
  EXPECT_FALSE(cholesky_is_cheaper(4096, 11008, 2, true));   // up_proj
  EXPECT_TRUE(cholesky_is_cheaper(11008, 4096, 1, false));   // down_proj
  EXPECT_TRUE(cholesky_is_cheaper(8192, 8192, 3, false));    // 70B q_proj
  EXPECT_TRUE(cholesky_is_cheaper(8192, 1024, 3, true));     // 70B k_proj: eight KV heads
  EXPECT_TRUE(cholesky_is_cheaper(8192, 28672, 2, false));   // 70B gate_proj
  EXPECT_TRUE(cholesky_is_cheaper(28672, 8192, 1, false));   // 70B down_proj
}

// Linears that read one input share their factorization: the second solve of a group takes the first one's
// eigendecomposition (no factorization of its own) and returns what it would have computed alone, bit for bit;
// another damping is another entry.
TEST(Alps, ProblemsOfOneGramShareTheirFactorization) {
  LayerProblem p = make_synthetic_problem(test::small_options(6, 64, 128, 1000));
  const Pattern pattern = Pattern::unstructured(0.7);
  LayerProblem q = p;
  q.W0 = at::randn_like(p.W0);
  const at::Tensor alone = make_alps_admm({})->solve(q, pattern).W;
  p.shared = q.shared = std::make_shared<SharedFactors>();
  EXPECT_EQ(make_alps_admm({})->solve(p, pattern).stats.at("factorizations"), 1);
  Solution second = make_alps_admm({})->solve(q, pattern);
  EXPECT_EQ(second.stats.at("factorizations"), 0);
  EXPECT_TRUE(second.W.equal(alone));
  EXPECT_EQ(make_alps_admm({{"damp", 0.02}})->solve(q, pattern).stats.at("factorizations"), 1);
  EXPECT_EQ(make_alps_admm({{"eigh_double", true}})->solve(q, pattern).stats.at("factorizations"), 1);
}

}  // namespace
}  // namespace alps::prune
