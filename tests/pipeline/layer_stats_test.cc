#include "alps/pipeline/layer_stats.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>

#include "alps/core/error.h"
#include "support.h"

namespace alps::pipeline {
namespace {

TEST(LayerStats, EqualsExplicitGramMeanAndCount) {
  at::manual_seed(0);
  const at::Tensor a = at::randn({2, 5, 6}) + 3;  // non-zero mean
  const at::Tensor b = at::randn({1, 7, 6});
  LayerStats s(6, at::kCPU, at::kFloat);
  s.add(a);
  s.add(b);
  const at::Tensor X = at::cat({a.reshape({-1, 6}), b.reshape({-1, 6})}).to(at::kDouble);  // [17, 6]
  EXPECT_EQ(s.tokens(), 17);
  // fp32 syrk against fp64: each entry a 17-term dot product, off by <= gamma_17 sum_t |x_ti||x_tj| <=
  // gamma_17 max_i G_ii (Cauchy-Schwarz). The mean: each add's column sums in fp32 (10 and 7 terms, off by at most
  // gamma_n sum |x|), those accumulated in fp64, the quotient rounded once to fp32 (u |mean|).
  const double max_diag = X.pow(2).sum(0).max().item<double>();
  EXPECT_ALL_CLOSE(s.gram(), X.t().mm(X), test::rounding_bound(17, max_diag) / 2, 0);
  const at::Tensor abs_a = a.reshape({-1, 6}).abs().sum(0).to(at::kDouble), abs_b = b.reshape({-1, 6}).abs().sum(0);
  const double sum_error =
      (test::rounding_bound(10, 1) * abs_a + test::rounding_bound(7, 1) * abs_b).max().item<double>();
  EXPECT_ALL_CLOSE(s.mean(), X.mean(0), sum_error / 17, std::ldexp(1.0, -24));
  // (1/T) sum_s L_s m_s^2 over the three sequences (5, 5 and 7 tokens). Each sequence sum S_s is off by at most
  // gamma_L sum_t |x_t| =: d_s in fp32, so S_s^2 / L_s by (2 |S_s| + d_s) d_s / L_s; the fp64 rest is far below.
  const at::Tensor sequences[] = {a[0].to(at::kDouble), a[1].to(at::kDouble), b[0].to(at::kDouble)};
  at::Tensor expected = at::zeros({6}, at::kDouble), bound = at::zeros({6}, at::kDouble);
  for (const auto& x : sequences) {
    const double L = static_cast<double>(x.size(0));
    const at::Tensor S = x.sum(0), d = test::rounding_bound(x.size(0), 1) * x.abs().sum(0);
    expected += S.pow(2) / L;
    bound += (2 * S.abs() + d) * d / L;
  }
  EXPECT_ALL_CLOSE(s.sequence_mean_sq(), expected / 17, bound.max().item<double>() / 17, 0);
  // Within-sequence variances are at most the variance over all tokens: G_jj / T - Q_j <= G_jj / T - mu_j^2.
  EXPECT_TRUE((expected / 17 >= X.mean(0).pow(2) - 1e-12).all().item<bool>());
}

TEST(BlockStats, SharesOneAccumulatorPerDistinctInput) {
  at::manual_seed(1);
  BlockStats stats(at::kCPU, at::kFloat);
  std::vector<at::Tensor> xs, hs;
  for (int call = 0; call < 2; ++call) {
    const at::Tensor x = at::randn({1, 4, 8});  // what q/k/v read
    const at::Tensor h = at::randn({1, 4, 8});  // o_proj's input: same shape, different tensor
    const at::Tensor u = at::randn({1, 4, 3});  // down_proj's input
    stats.observe("q", x);
    stats.observe("k", x);
    stats.observe("v", x);
    stats.observe("o", h);
    stats.observe("down", u);
    stats.end_forward();
    xs.push_back(x);
    hs.push_back(h);
  }
  EXPECT_EQ(&stats.at("q"), &stats.at("k"));
  EXPECT_EQ(&stats.at("q"), &stats.at("v"));
  EXPECT_NE(&stats.at("q"), &stats.at("o"));
  EXPECT_EQ(stats.at("q").tokens(), 8) << "shared inputs must be counted once per forward";
  const at::Tensor X = at::cat(xs, 1).reshape({-1, 8});
  const at::Tensor H = at::cat(hs, 1).reshape({-1, 8});
  // Two fp32 evaluations of 8-term dot products (syrk and mm): within gamma_8 max_i G_ii of each other, twice.
  EXPECT_ALL_CLOSE(stats.at("k").gram(), X.t().mm(X), test::rounding_bound(8, X.pow(2).sum(0).max().item<double>()), 0);
  EXPECT_ALL_CLOSE(stats.at("o").gram(), H.t().mm(H), test::rounding_bound(8, H.pow(2).sum(0).max().item<double>()), 0);
  EXPECT_EQ(stats.at("down").gram().size(0), 3);
  EXPECT_EQ(stats.bytes(), (8 * 8 * 2 + 3 * 3) * 4);
  EXPECT_THROW(stats.at("gate"), Error);
}

}  // namespace
}  // namespace alps::pipeline
