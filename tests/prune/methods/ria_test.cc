// RIA: its score from the formula, its masks from a sort, the assignment against enumeration, and the channel
// permutation against the rules it promises (the same function, N:M in its order, each round at least as good).
#include "alps/prune/methods/ria.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <numeric>
#include <vector>

#include "../fixtures.h"
#include "alps/core/error.h"
#include "alps/prune/pattern.h"
#include "alps/prune/problem.h"
#include "prune/assignment.h"
#include "prune/kernels/cpu_kernels.h"
#include "support.h"

namespace alps::prune {
namespace {

// The kept score of N:M groups formed in `order`: sum over rows and groups of the n largest of M.
double kept_in_order(const at::Tensor& score, const at::Tensor& order, int64_t n, int64_t m) {
  const at::Tensor grouped = score.index_select(1, order).view({score.size(0), -1, m});
  return std::get<0>(grouped.topk(n, 2)).sum().item<double>();
}

TEST(Assignment, EqualsTheBestOfEveryPermutation) {
  at::manual_seed(3);
  for (int64_t n = 1; n <= 7; ++n) {
    for (int trial = 0; trial < 4; ++trial) {
      const at::Tensor V = at::randn({n, n}, at::kDouble);
      std::vector<double> value(V.data_ptr<double>(), V.data_ptr<double>() + n * n);
      if (trial == 3) std::fill(value.begin(), value.end(), 1.0);  // every assignment ties
      const std::vector<int64_t> col = detail::max_weight_assignment(value, n);
      std::vector<int64_t> seen = col;
      std::sort(seen.begin(), seen.end());
      std::vector<int64_t> identity(static_cast<size_t>(n));
      std::iota(identity.begin(), identity.end(), 0);
      ASSERT_EQ(seen, identity) << "not a permutation";
      auto total = [&](const std::vector<int64_t>& c) {
        double s = 0;
        for (int64_t r = 0; r < n; ++r) s += value[static_cast<size_t>(r * n + c[static_cast<size_t>(r)])];
        return s;
      };
      double best = -1e300;
      std::vector<int64_t> p = identity;
      do best = std::max(best, total(p));
      while (std::next_permutation(p.begin(), p.end()));
      EXPECT_NEAR(total(col), best, 1e-12 * n) << "n " << n << " trial " << trial;
    }
  }
  EXPECT_TRUE(detail::max_weight_assignment({}, 0).empty());
  EXPECT_THROW(detail::max_weight_assignment({1.0, NAN, 0.0, 2.0}, 2), Error);
}

// The fused CPU form of the assignment values against their definition; fp32 sums of up to 300 terms in another
// order differ by a few units of the last place of the sum.
TEST(Ria, FusedAssignmentValuesEqualTheirDefinition) {
  at::manual_seed(7);
  for (const auto& [out, groups] : {std::pair<int64_t, int64_t>{300, 37}, {5, 9}, {1, 1}}) {
    const at::Tensor V = at::rand({out, groups}), a = at::rand({out, groups}) + 0.3;
    const at::Tensor want = (V.unsqueeze(1) - a.unsqueeze(2)).clamp_min(0).sum(0);  // [g, q]
    const at::Tensor got = detail::relu_gain_cpu(V, a);
    EXPECT_TRUE(at::allclose(got, want, 1e-5, 1e-5)) << (got - want).abs().max().item<float>();
  }
}

TEST(Ria, ScoreIsRelativeImportanceTimesTheInputRmsToThePowerA) {
  LayerProblem p = make_synthetic_problem(test::small_options(1, 6, 8, 50));
  for (const double a : {0.0, 0.5, 1.0}) {
    const at::Tensor S = ria_score(p, a);
    const at::Tensor W = p.W0.to(at::kDouble), G = p.G.to(at::kDouble);
    for (int64_t i = 0; i < 6; ++i)
      for (int64_t j = 0; j < 8; ++j) {
        double row = 0, col = 0;
        for (int64_t k = 0; k < 8; ++k) row += std::abs(W[i][k].item<double>());
        for (int64_t k = 0; k < 6; ++k) col += std::abs(W[k][j].item<double>());
        const double w = std::abs(W[i][j].item<double>());
        const double want = (w / col + w / row) * std::pow(std::sqrt(G[j][j].item<double>() / 50), a);
        EXPECT_NEAR(S[i][j].item<double>(), want, 1e-5 * want) << i << "," << j << " a " << a;
      }
  }
}

TEST(Ria, PrunesTheLowestScoresOfTheLayerOrOfEachRow) {
  LayerProblem p = make_synthetic_problem(test::small_options(2, 40, 96, 600));
  const at::Tensor S = ria_score(p, 0.5);
  const Pattern pattern = Pattern::unstructured(0.6);
  const at::Tensor W = make_method("ria", {})->solve(p, pattern).W;
  const int64_t zeros = pattern.zeros_total(40, 96);
  EXPECT_EQ(W.eq(0).sum().item<int64_t>(), zeros);
  const at::Tensor cut = std::get<0>(S.flatten().sort()).select(0, zeros);
  EXPECT_TRUE(S.masked_select(W.eq(0)).lt(cut).all().item<bool>());          // the zeros are the lowest scores
  EXPECT_TRUE(W.masked_select(W.ne(0)).equal(p.W0.masked_select(W.ne(0))));  // no weight update
  const at::Tensor R = make_method("ria", {{"per_row", true}})->solve(p, pattern).W;
  for (int64_t r = 0; r < 40; ++r) {
    ASSERT_EQ(R[r].eq(0).sum().item<int64_t>(), pattern.zeros_in_row(r, 96)) << r;
    const at::Tensor row_cut = std::get<0>(S[r].sort()).select(0, pattern.zeros_in_row(r, 96));
    EXPECT_TRUE(S[r].masked_select(R[r].eq(0)).lt(row_cut).all().item<bool>()) << r;
  }
}

// Eight channels in two groups of four, summed scores rising with the channel's index (0 lowest): member 0 takes the
// lowest quarter, member 1 the next reversed, and so on.
TEST(Ria, HeuristicDealsTheSortedChannelsToTheMembersInTurn) {
  const at::Tensor score =
      at::arange(1, 9, at::kFloat)
          .unsqueeze(0)
          .repeat({3, 1})
          .index_select(
              1, at::tensor(std::vector<int64_t>{5, 0, 7, 2, 6, 1, 4, 3}));  // channel c holds value order[c] + 1
  // Channels sorted by score: 1, 5, 3, 7, 6, 0, 4, 2.
  const at::Tensor order = ria_channel_order(score, Pattern::n_m(2, 4), "heuristic", 1);
  EXPECT_EQ(std::vector<int64_t>(order.data_ptr<int64_t>(), order.data_ptr<int64_t>() + 8),
            (std::vector<int64_t>{1, 7, 6, 2, 5, 3, 0, 4}));
}

TEST(Ria, PermutedNmKeepsTheFunctionAndIsNmInItsOrder) {
  for (const auto& [n, m] : {std::pair<int64_t, int64_t>{2, 4}, {1, 4}, {4, 8}}) {
    LayerProblem p = make_synthetic_problem(test::small_options(4, 24, 64, 400));
    const Pattern pattern = Pattern::n_m(n, m);
    const at::Tensor S = ria_score(p, 0.5);
    const Solution direct = make_method("ria", {})->solve(p, pattern);
    EXPECT_FALSE(direct.input_order.defined());
    const double unpermuted = kept_in_order(S, at::arange(64, at::kLong), n, m);
    double previous = unpermuted;
    for (const std::string permutation : {"heuristic", "lsa"}) {
      SCOPED_TRACE(permutation + " " + pattern.str());
      const Solution s = make_method("ria", {{"permutation", permutation}})->solve(p, pattern);
      ASSERT_TRUE(s.input_order.defined());
      EXPECT_TRUE(std::get<0>(s.input_order.sort()).equal(at::arange(64, at::kLong)));
      EXPECT_TRUE(satisfies(s.W.index_select(1, s.input_order), pattern));
      const at::Tensor kept = s.W.ne(0);
      EXPECT_TRUE(s.W.masked_select(kept).equal(p.W0.masked_select(kept)));  // the model's order, weights unchanged
      EXPECT_EQ(kept.sum().item<int64_t>(), 24 * 64 * n / m);
      const double score = kept_in_order(S, s.input_order, n, m);
      EXPECT_NEAR(S.masked_select(kept).sum().item<double>(), score, 1e-5 * score);
      if (permutation == "lsa") EXPECT_GE(score, previous * (1 - 1e-6));  // assignments never lose score
      EXPECT_NEAR(s.stats.at("kept_score_gain").get<double>(), score / unpermuted - 1, 1e-5);
      if (permutation == "heuristic") previous = score;
    }
  }
}

// The last round of lsa chose member M-1 of every group given the others: no reassignment of that member does better
// (all 4! = 24 of them tried, with scores from real |W| and inputs).
TEST(Ria, LsaLastRoundIsTheBestReassignmentOfItsMember) {
  LayerProblem p = make_synthetic_problem(test::small_options(5, 16, 16, 300));
  const at::Tensor S = ria_score(p, 0.5);
  const Pattern pattern = Pattern::n_m(2, 4);
  for (const int64_t blocks : {1, 2}) {
    const at::Tensor order = ria_channel_order(S, pattern, "lsa", blocks);
    const double got = kept_in_order(S, order, 2, 4);
    std::vector<int64_t> groups = {0, 1, 2, 3};
    do {
      // Within blocks of two groups, lsa_blocks = 2 may only move the member inside its block.
      if (blocks == 2 && (groups[0] > 1 || groups[1] > 1)) continue;
      at::Tensor other = order.clone();
      for (int64_t g = 0; g < 4; ++g) other[g * 4 + 3] = order[groups[static_cast<size_t>(g)] * 4 + 3];
      EXPECT_LE(kept_in_order(S, other, 2, 4), got * (1 + 1e-6)) << "blocks " << blocks;
    } while (std::next_permutation(groups.begin(), groups.end()));
  }
}

TEST(Ria, BadOptionsAreClearErrors) {
  EXPECT_NE(alps::test::error_message([] {
              make_method("ria", {{"permutation", "random"}});
            }).find("permutation"),
            std::string::npos);
  EXPECT_THROW(make_method("ria", {{"a", -1.0}}), Error);
  EXPECT_THROW(make_method("ria", {{"lsa_blocks", 0}}), Error);
  LayerProblem p = make_synthetic_problem(test::small_options(6, 8, 16, 100));
  EXPECT_THROW(ria_channel_order(ria_score(p, 0.5), Pattern::unstructured(0.5), "lsa", 1), Error);
}

}  // namespace
}  // namespace alps::prune
