// OWL's statistic and allocation (include/alps/prune/owl.h), against hand-computed cases and against OWL's own code
// (tests/data/owl/smollm2_owl_golden.json, written by scripts/make_owl_golden.py from luuyin/OWL on SmolLM2-135M).
#include "alps/prune/owl.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include "alps/core/error.h"
#include "alps/prune/methods/wanda.h"
#include "support.h"

namespace alps::prune {
namespace {

nlohmann::json golden() {
  std::ifstream f(test::source_dir() / "tests/data/owl/smollm2_owl_golden.json");
  return nlohmann::json::parse(f);
}

// OWL's allocation from OWL's own block statistics: the same fp64 arithmetic but for the order of the mean's sum
// (numpy's pairwise against a running sum): 30 terms in [0, 0.16] sum with an error of at most 29 u * 4.8 = 1.5e-14,
// 5e-16 once divided by 30, and the few operations after it add a few units of 1e-16.
TEST(Owl, AllocationIsOwls) {
  const auto g = golden();
  const auto ratios = g.at("outlier_ratio_percent").get<std::vector<double>>();
  const auto want = g.at("block_sparsity").get<std::vector<double>>();
  const auto got = owl_block_sparsities(ratios, g.at("sparsity").get<double>(), g.at("lambda").get<double>());
  ASSERT_EQ(got.size(), want.size());
  for (size_t b = 0; b < got.size(); ++b) EXPECT_NEAR(got[b], want[b], 1e-14) << "block " << b;
  // The statistic's scale does not matter (OWL counts percent, alps a fraction).
  std::vector<double> fractions;
  for (double r : ratios) fractions.push_back(r / 100);
  const auto same = owl_block_sparsities(fractions, g.at("sparsity").get<double>(), g.at("lambda").get<double>());
  for (size_t b = 0; b < got.size(); ++b) EXPECT_NEAR(same[b], want[b], 1e-14) << "block " << b;
}

// The range is 2 lambda wide, its mean the target; more outliers, less sparsity; no spread, no change.
TEST(Owl, AllocationSpansTwoLambdaAroundTheTarget) {
  const std::vector<double> d = {0.010, 0.004, 0.007, 0.004, 0.013};
  const auto s = owl_block_sparsities(d, 0.7, 0.08);
  EXPECT_NEAR(std::accumulate(s.begin(), s.end(), 0.0) / 5, 0.7, 1e-15);
  EXPECT_NEAR(*std::max_element(s.begin(), s.end()) - *std::min_element(s.begin(), s.end()), 0.16, 1e-15);
  EXPECT_LT(s[4], s[0]);
  EXPECT_LT(s[0], s[2]);
  EXPECT_DOUBLE_EQ(s[1], s[3]);
  for (double x : owl_block_sparsities({0.01, 0.01, 0.01}, 0.6, 0.08)) EXPECT_DOUBLE_EQ(x, 0.6);
  for (double x : owl_block_sparsities(d, 0.6, 0.0)) EXPECT_DOUBLE_EQ(x, 0.6);
}

// Pooled over the block's linears: 2 of 12 entries above 5x the mean (mean 1.5 with two 6s and ten 0.6s: 7.5).
TEST(Owl, OutlierFractionPoolsTheBlocksScores) {
  const at::Tensor a = at::full({2, 3}, 0.6), b = at::full({3, 2}, 0.6);
  b[0][0] = 6.6;
  b[2][1] = 8.0;
  // mean = (10 * 0.6 + 6.6 + 8.0) / 12 = 1.71667; 5x = 8.58: nothing above; at M = 3 (5.15): two.
  EXPECT_EQ(outlier_fraction({a, b}, 5), 0.0);
  EXPECT_DOUBLE_EQ(outlier_fraction({a, b}, 3), 2.0 / 12);
  // Wanda's score: |W| times the input column's root mean square per window.
  const at::Tensor W = at::tensor({1.f, -2.f, 3.f, -4.f}).reshape({2, 2});
  const at::Tensor scores = wanda_score(W, at::tensor({4.f, 16.f}), 4);
  EXPECT_TRUE(scores.allclose(at::tensor({1.f, 4.f, 3.f, 8.f}).reshape({2, 2})));
}

// The zeros of a model under a profile total round(s N) exactly, where rounding each block's (or each linear's)
// share would drift: here 3 blocks of 3 linears of 7 x 13 = 91 weights at 0.3 +- 0.1 (quotas 18.2, 27.3 and 36.4 per
// linear: per-linear floors would give 243 zeros, not round(0.3 * 819) = 246). Each linear gets its quota's floor or
// ceiling, the largest remainders first.
TEST(Owl, ZerosOfTheModelAreItsSparsityOfItsWeights) {
  const std::vector<double> block = {0.2, 0.3, 0.4};
  std::vector<double> s;
  std::vector<int64_t> numel;
  for (double b : block)
    for (int l = 0; l < 3; ++l) {
      s.push_back(b);
      numel.push_back(91);
    }
  const auto zeros = apportion_zeros(s, numel, 0.3);
  ASSERT_EQ(zeros.size(), 9u);
  EXPECT_EQ(std::accumulate(zeros.begin(), zeros.end(), int64_t{0}), 246);
  for (size_t l = 0; l < 9; ++l) {
    const double quota = s[l] * 91;
    EXPECT_GE(zeros[l], static_cast<int64_t>(std::floor(quota))) << l;
    EXPECT_LE(zeros[l], static_cast<int64_t>(std::ceil(quota))) << l;
  }
  // Unequal sizes and a total that the quotas do not reach on their own (overrides left some weights out of the
  // profile): the quotas are scaled to the total; an empty profile has nothing to share.
  const auto scaled = apportion_zeros({0.5, 0.7, 0.6}, {1000, 10, 333}, 0.55);
  EXPECT_EQ(std::accumulate(scaled.begin(), scaled.end(), int64_t{0}), std::llround(0.55 * 1343));
  EXPECT_TRUE(apportion_zeros({}, {}, 0.5).empty());
  EXPECT_THROW(apportion_zeros({0.5}, {1, 2}, 0.5), Error);
}

// OWL's mixed N:M variant: block b keeps n + round(r_b - mean r) of every m, r spanning lambda entries; rounded half
// to even as numpy's round.
TEST(Owl, MixedNmKeepsNPlusOrMinusAFew) {
  // r = 0, 2/3, 4/3, 2 (mean 1): -1, -1/3, 1/3, 1 round to -1, 0, 0, 1.
  EXPECT_EQ(owl_block_kept({0.1, 0.2, 0.3, 0.4}, 3, 2.0), (std::vector<int64_t>{2, 3, 3, 4}));
  // r = 0, 2, 2, 2 (mean 1.5): -1.5 and 0.5, which round half to even: -2 and 0.
  EXPECT_EQ(owl_block_kept({0.0, 1.0, 1.0, 1.0}, 3, 2.0), (std::vector<int64_t>{1, 3, 3, 3}));
  EXPECT_EQ(owl_block_kept({0.02, 0.02}, 3, 2.0), (std::vector<int64_t>{3, 3}));  // no spread, no change
  EXPECT_EQ(owl_nm_options_problem({5, 2}, 3, 8), "");
  EXPECT_NE(owl_nm_options_problem({5, 0.08}, 2, 4).find("would change no block's count"), std::string::npos);
  EXPECT_NE(owl_nm_options_problem({5, 2}, 2, 4).find("would let a block keep 0 .. 4 of every 4"), std::string::npos);
  EXPECT_NE(owl_nm_options_problem({5, 2}, 7, 8).find("keep 5 .. 9 of every 8"), std::string::npos);
  EXPECT_NE(owl_nm_options_problem({0, 2}, 3, 8).find("M must be > 0"), std::string::npos);
}

// OWL's own mixed N:M allocation on SmolLM2 (tests/data/owl/smollm2_owl_nm_golden.json, its README's run: 5:8 in
// OWL's notation, 5 pruned of 8, M = 6, lambda = 2) from its own block statistics: the same counts. The rounding
// could only differ where r_b - mean r lands within the sums' rounding (1e-14) of a half; none does.
TEST(Owl, MixedNmAllocationIsOwls) {
  std::ifstream f(test::source_dir() / "tests/data/owl/smollm2_owl_nm_golden.json");
  const auto g = nlohmann::json::parse(f);
  const auto ratios = g.at("outlier_ratio_percent").get<std::vector<double>>();
  const auto pruned = g.at("block_pruned_per_group").get<std::vector<int64_t>>();
  const int64_t m = 8, kept = m - 5;
  ASSERT_EQ(g.at("pattern_owl"), "5:8");
  const auto got = owl_block_kept(ratios, kept, g.at("lambda").get<double>());
  ASSERT_EQ(got.size(), pruned.size());
  for (size_t b = 0; b < got.size(); ++b) EXPECT_EQ(got[b], m - pruned[b]) << "block " << b;
  EXPECT_NE(*std::min_element(got.begin(), got.end()), *std::max_element(got.begin(), got.end()));  // not uniform
}

TEST(Owl, ConstantsOutsideTheirRangeAreNamed) {
  EXPECT_EQ(owl_options_problem({5, 0.08}, 0.7), "");
  EXPECT_NE(owl_options_problem({0, 0.08}, 0.7).find("M must be > 0"), std::string::npos);
  EXPECT_NE(owl_options_problem({5, -0.1}, 0.7).find("lambda must be >= 0"), std::string::npos);
  EXPECT_NE(owl_options_problem({5, 0.25}, 0.8).find("outside (0, 1)"), std::string::npos);
  EXPECT_NE(owl_options_problem({5, 0.1}, 0.05).find("outside (0, 1)"), std::string::npos);
}

}  // namespace
}  // namespace alps::prune
