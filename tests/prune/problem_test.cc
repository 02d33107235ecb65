#include "alps/prune/problem.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>

#include "alps/core/error.h"
#include "alps/io/safetensors.h"
#include "alps/prune/synthetic.h"
#include "fixtures.h"
#include "support.h"

namespace alps::prune {
namespace {

namespace fs = std::filesystem;

std::string load_error(const fs::path& p) {
  try {
    load_problem(p);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "no error loading " << p;
  return "";
}

TEST(LayerProblem, FileRoundTrip) {
  alps::test::TempDir dir;
  LayerProblem p = make_synthetic_problem(test::small_options(3, 8, 12, 40));
  p.name = "model.layers.0.self_attn.q_proj";
  save_problem(dir / "p.safetensors", p);
  LayerProblem q = load_problem(dir / "p.safetensors");
  EXPECT_TRUE(q.W0.equal(p.W0));
  EXPECT_TRUE(q.G.equal(p.G));
  EXPECT_TRUE(q.mean.equal(p.mean));
  EXPECT_EQ(q.tokens, 40);
  EXPECT_EQ(q.name, p.name);
  // Without a mean the file still loads.
  p.mean = at::Tensor();
  save_problem(dir / "nomean.safetensors", p);
  EXPECT_FALSE(load_problem(dir / "nomean.safetensors").mean.defined());
}

TEST(LayerProblem, LoadErrorsNameTheFileAndTheProblem) {
  alps::test::TempDir dir;
  EXPECT_NE(load_error(dir / "missing.safetensors").find("missing.safetensors"), std::string::npos);
  at::Tensor W = at::randn({4, 6}), G = at::eye(6);
  io::save_safetensors(dir / "nogram.safetensors", {{"weight", W}}, {{"tokens", "5"}});
  EXPECT_NE(load_error(dir / "nogram.safetensors").find("'gram'"), std::string::npos);
  io::save_safetensors(dir / "badgram.safetensors", {{"weight", W}, {"gram", at::eye(5)}}, {{"tokens", "5"}});
  EXPECT_NE(load_error(dir / "badgram.safetensors").find("gram must be [6, 6]"), std::string::npos);
  io::save_safetensors(dir / "notokens.safetensors", {{"weight", W}, {"gram", G}});
  EXPECT_NE(load_error(dir / "notokens.safetensors").find("tokens"), std::string::npos);
  io::save_safetensors(dir / "badtokens.safetensors", {{"weight", W}, {"gram", G}}, {{"tokens", "-3"}});
  EXPECT_NE(load_error(dir / "badtokens.safetensors").find("'-3'"), std::string::npos);
  at::Tensor Wnan = W.clone();
  Wnan[1][2] = NAN;
  io::save_safetensors(dir / "nan.safetensors", {{"weight", Wnan}, {"gram", G}}, {{"tokens", "5"}});
  EXPECT_NE(load_error(dir / "nan.safetensors").find("NaN"), std::string::npos);
  // Truncated: cut the good file in the middle of its data section.
  io::save_safetensors(dir / "good.safetensors", {{"weight", W}, {"gram", G}}, {{"tokens", "5"}});
  const auto size = fs::file_size(dir / "good.safetensors");
  fs::copy_file(dir / "good.safetensors", dir / "cut.safetensors");
  fs::resize_file(dir / "cut.safetensors", size - 40);
  EXPECT_NE(load_error(dir / "cut.safetensors").find("cut.safetensors"), std::string::npos);
}

TEST(LayerProblem, RelativeErrorMatchesExplicitInputs) {
  SyntheticOptions o = test::small_options(1, 24, 40, 300);
  LayerProblem p = make_synthetic_problem(o);
  at::Tensor X = make_synthetic_inputs(o).to(at::kDouble);  // [T, in]
  at::Tensor W = p.W0 + 0.1 * at::randn(p.W0.sizes());
  at::Tensor ref_num = (X.matmul(W.to(at::kDouble).t()) - X.matmul(p.W0.to(at::kDouble).t())).pow(2).sum();
  at::Tensor ref_den = X.matmul(p.W0.to(at::kDouble).t()).pow(2).sum();
  const double expected = (ref_num / ref_den).item<double>();
  // G is stored in fp32, so agreement is to fp32 accuracy of G.
  EXPECT_NEAR(relative_error(p, W), expected, 1e-5 * expected);
  EXPECT_DOUBLE_EQ(relative_error(p, p.W0), 0.0);
  EXPECT_NEAR(relative_error(p, at::zeros_like(p.W0)), 1.0, 1e-12);
  EXPECT_THROW(relative_error(p, at::zeros({3, 3})), Error);
}

TEST(LayerProblem, CheckProblemRejectsNonFiniteAndMismatchedShapes) {
  LayerProblem p = make_synthetic_problem(test::small_options(0, 4, 8, 16));
  LayerProblem bad = p;
  bad.G = p.G.clone();
  bad.G[0][1] = INFINITY;
  EXPECT_THROW(check_problem(bad, "t"), Error);
  bad = p;
  bad.mean = at::zeros({7});
  EXPECT_THROW(check_problem(bad, "t"), Error);
  bad = p;
  bad.G = at::eye(5);
  EXPECT_THROW(check_problem(bad, "t"), Error);
  EXPECT_NO_THROW(check_problem(p, "t"));
}

TEST(Synthetic, InputsHaveOutliersMeansCorrelationAndHeavyTailedWeights) {
  SyntheticOptions o = test::small_options(5, 64, 200, 2000);
  at::Tensor X = make_synthetic_inputs(o);
  at::Tensor outliers = synthetic_outlier_features(o);
  ASSERT_EQ(outliers.numel(), 4);  // round(0.02 * 200)
  at::Tensor rms = X.pow(2).mean(0).sqrt();
  at::Tensor is_outlier = at::zeros({o.in}, at::kBool).index_fill_(0, outliers, true);
  const double normal_max = rms.masked_select(is_outlier.logical_not()).max().item<double>();
  const double outlier_min = rms.masked_select(is_outlier).min().item<double>();
  EXPECT_GT(outlier_min, 10 * normal_max);  // "tens of times larger"
  // Non-zero means: the typical |mean| is a sizeable share of the RMS.
  at::Tensor normal = X.index_select(1, is_outlier.logical_not().nonzero().squeeze(1));
  EXPECT_GT(normal.mean(0).abs().mean().item<double>(), 0.2);
  // Correlated features: mean |off-diagonal correlation| well above the ~1/sqrt(T) of independent features.
  at::Tensor c = normal - normal.mean(0);
  at::Tensor corr = c.t().matmul(c) / (c.pow(2).sum(0).sqrt().unsqueeze(1) * c.pow(2).sum(0).sqrt().unsqueeze(0));
  const int64_t n = corr.size(0);
  EXPECT_GT((corr.abs().sum() - n).item<double>() / (n * (n - 1)), 0.1);
  // Heavy-tailed weights: excess kurtosis clearly positive (Student-t, 3 dof).
  LayerProblem p = make_synthetic_problem(o);
  at::Tensor w = p.W0.flatten().to(at::kDouble);
  w = w - w.mean();
  EXPECT_GT((w.pow(4).mean() / w.pow(2).mean().pow(2)).item<double>(), 5.0);
  // The problem is exactly the statistics of those inputs, and deterministic in the seed.
  EXPECT_TRUE(alps::test::all_close(p.G, X.to(at::kDouble).t().matmul(X.to(at::kDouble)), 1e-3, 1e-5));
  EXPECT_TRUE(alps::test::all_close(p.mean, X.mean(0), 1e-5, 1e-5));
  EXPECT_EQ(p.tokens, o.tokens);
  EXPECT_TRUE(make_synthetic_problem(o).W0.equal(p.W0));
  EXPECT_FALSE(make_synthetic_problem(test::small_options(6, 64, 200, 2000)).W0.equal(p.W0));
}

}  // namespace
}  // namespace alps::prune
