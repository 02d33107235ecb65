#include "alps/prune/problem.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "alps/core/error.h"
#include "alps/io/safetensors.h"
#include "alps/prune/method.h"
#include "alps/prune/solve.h"
#include "alps/prune/synthetic.h"
#include "fixtures.h"
#include "support.h"

namespace alps::prune {
namespace {

namespace fs = std::filesystem;

std::string load_error(const fs::path& p) {
  return alps::test::error_message([&] { load_problem(p); });
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
  EXPECT_EQ(q.sequences, 0);  // unknown: not written, read back as unknown
  EXPECT_EQ(q.name, p.name);
  EXPECT_FALSE(q.sequence_mean_sq.defined());
  p.sequences = 4;
  p.sequence_mean_sq = p.mean.to(at::kDouble).pow(2) + 0.25;
  save_problem(dir / "seq.safetensors", p);
  const LayerProblem with_sequences = load_problem(dir / "seq.safetensors");
  EXPECT_EQ(with_sequences.sequences, 4);
  EXPECT_TRUE(with_sequences.sequence_mean_sq.equal(p.sequence_mean_sq));
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
  io::save_safetensors(dir / "badseq.safetensors", {{"weight", W}, {"gram", G}},
                       {{"tokens", "5"}, {"sequences", "x"}});
  EXPECT_NE(load_error(dir / "badseq.safetensors").find("metadata 'sequences'"), std::string::npos);
  io::save_safetensors(dir / "moreseq.safetensors", {{"weight", W}, {"gram", G}},
                       {{"tokens", "5"}, {"sequences", "6"}});
  EXPECT_NE(load_error(dir / "moreseq.safetensors").find("6 sequences for 5 tokens"), std::string::npos);
  io::save_safetensors(dir / "seqshape.safetensors", {{"weight", W}, {"gram", G}, {"sequence_mean_sq", at::ones({5})}},
                       {{"tokens", "5"}});
  EXPECT_NE(load_error(dir / "seqshape.safetensors").find("sequence_mean_sq must be [6]"), std::string::npos);
  io::save_safetensors(dir / "seqneg.safetensors", {{"weight", W}, {"gram", G}, {"sequence_mean_sq", -at::ones({6})}},
                       {{"tokens", "5"}});
  EXPECT_NE(load_error(dir / "seqneg.safetensors").find("sequence_mean_sq must be finite and >= 0"),
            std::string::npos);
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
  // G is the fp64 Gram matrix rounded once to fp32: |dG_ij| <= u |G_ij| <= u d_i d_j (d = sqrt(diag G),
  // u = 2^-24), so a quadratic form tr(D G D^T) moves by at most u sum_r (|D_r| . d)^2; the fp64 arithmetic adds
  // nothing visible at this scale. The ratio moves by (dnum + expected * dden) / den.
  const at::Tensor d = p.G.diagonal().to(at::kDouble).sqrt();
  auto spread = [&d](const at::Tensor& D) { return D.to(at::kDouble).abs().matmul(d).pow(2).sum().item<double>(); };
  const double u = std::ldexp(1.0, -24);
  const double tol = 2 * u * (spread(W - p.W0) + expected * spread(p.W0)) / ref_den.item<double>();
  EXPECT_NEAR(relative_error(p, W), expected, tol);
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

std::string gram_error(const LayerProblem& p) {
  return alps::test::error_message([&] { check_gram(p, "g.safetensors"); });
}

// Rank-deficient Gram matrices (fewer tokens than features) have zero eigenvalues that rounding makes slightly
// negative, and X^T X through a general matrix product is symmetric only up to rounding: both pass.
TEST(LayerProblem, CheckGramAcceptsRoundedGramMatrices) {
  for (uint64_t seed = 0; seed < 5; ++seed) {
    at::manual_seed(seed);
    for (int64_t T : {3, 20, 5000}) {
      LayerProblem p;
      at::Tensor X = at::randn({T, 48}) * at::linspace(0.01, 30, 48) + 2;  // wide scales, non-zero mean
      p.W0 = at::randn({8, 48});
      p.G = X.t().matmul(X);
      p.tokens = T;
      p.name = "ok";
      EXPECT_EQ(gram_error(p), "no error") << "T " << T << " seed " << seed;
      // Along the null space of X the numerator is rounding noise of either sign: the error is >= 0, never negative.
      if (T < 48) {
        at::Tensor null_dir = std::get<2>(at::linalg_svd(X.to(at::kDouble), true)).select(0, 47).to(at::kFloat);
        EXPECT_GE(relative_error(p, p.W0 + at::outer(at::ones({8}), null_dir)), 0.0);
      }
    }
  }
}

TEST(LayerProblem, CheckGramRejectsAsymmetricAndIndefiniteGrams) {
  LayerProblem p = make_synthetic_problem(test::small_options(2, 8, 16, 400));
  p.name = "model.layers.1.mlp.up_proj";
  LayerProblem bad = p;
  bad.G = p.G.clone();
  bad.G[3][5] = bad.G[3][5].item<double>() * 1.01 + 0.01 * bad.G[3][3].item<double>();
  std::string msg = gram_error(bad);
  EXPECT_NE(msg.find("gram of model.layers.1.mlp.up_proj (g.safetensors) is not symmetric: G[3, 5]"),
            std::string::npos) << msg;

  bad.G = p.G.clone();
  const double off = 2 * std::sqrt(p.G[0][0].item<double>() * p.G[1][1].item<double>());
  bad.G[0][1] = off;
  bad.G[1][0] = off;
  msg = gram_error(bad);
  EXPECT_NE(msg.find("is not positive semi-definite: smallest eigenvalue -"), std::string::npos) << msg;
  EXPECT_NE(msg.find(" vs largest "), std::string::npos) << msg;

  // Every method refuses it through solve_layer, and its error would have been negative.
  for (const std::string& name : method_names()) {
    msg = alps::test::error_message([&] {
      solve_layer(*make_method(name, nlohmann::json::object()), bad, Pattern::unstructured(0.5), Refine::kNone);
    });
    EXPECT_NE(msg.find("not positive semi-definite"), std::string::npos) << name << ": " << msg;
  }
  // dW rows (sqrt(G_11), -sqrt(G_00), 0, ...) give dW G dW^T = G_00 G_11 (2 - 2 * 2) < 0 per row.
  at::Tensor W = bad.W0.clone();
  W.select(1, 0).add_(std::sqrt(p.G[1][1].item<double>()));
  W.select(1, 1).sub_(std::sqrt(p.G[0][0].item<double>()));
  msg = alps::test::error_message([&] { (void)relative_error(bad, W); });
  EXPECT_NE(msg.find("relative error of model.layers.1.mlp.up_proj is negative"), std::string::npos) << msg;
}

TEST(Synthetic, InputsHaveOutliersMeansCorrelationAndHeavyTailedWeights) {
  SyntheticOptions o = test::small_options(5, 64, 200, 2000);
  at::Tensor X = make_synthetic_inputs(o);
  at::Tensor rms = X.pow(2).mean(0).sqrt();
  const at::Tensor outliers = std::get<1>(rms.topk(4));  // round(0.02 * 200) features of the largest RMS
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
  // G and mean are computed in fp64 and rounded once to fp32 (relative 2^-24); X.mean(0) here sums T fp32 values.
  EXPECT_TRUE(alps::test::all_close(p.G, X.to(at::kDouble).t().matmul(X.to(at::kDouble)), 0, std::ldexp(1.0, -23)));
  EXPECT_TRUE(alps::test::all_close(p.mean, X.mean(0),
                                    alps::test::rounding_bound(o.tokens, X.abs().mean(0).max().item<double>()),
                                    std::ldexp(1.0, -23)));
  EXPECT_EQ(p.tokens, o.tokens);
  EXPECT_TRUE(make_synthetic_problem(o).W0.equal(p.W0));
  EXPECT_FALSE(make_synthetic_problem(test::small_options(6, 64, 200, 2000)).W0.equal(p.W0));
}

}  // namespace
}  // namespace alps::prune
