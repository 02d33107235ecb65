// `alps prune` inside the experts of a mixture (docs/moe.md): each expert's statistics are those of the tokens its
// router sends it (or of every token with --moe-calibration all), an expert no token reached is pruned by
// magnitude and says so, OWL pools a block's experts with its other linears, and recipes reach expert linears by
// their names, and the routers where a rule names them alone. The forwards themselves are checked
// against transformers' logits in causal_lm_test.cc; PruneVariants prunes, evaluates and generates with every MoE
// fixture.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alps/io/text_files.h"
#include "alps/model/causal_lm.h"
#include "alps/pipeline/output_dir.h"
#include "alps/prune/problem.h"
#include "moe_support.h"
#include "prune_cli_support.h"
#include "support.h"

namespace alps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

using test_moe::calib;
using test_moe::mlp_inputs;
using test_moe::prune;
using test_moe::PruneRun;
using test_moe::routed_tokens;

TEST(PruneMoe, EachExpertsStatisticsAreThoseOfTheTokensRoutedToIt) {
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer("qwen3_moe_routed", dir.path());
  const int64_t nsamples = 4, seqlen = 16, T = nsamples * seqlen;
  const PruneRun run = prune(model, dir.path(), nsamples, seqlen, {"--method", "sparsegpt", "--sparsity", "0.5"});
  ASSERT_FALSE(run.report.is_null());

  const auto dense = model::CausalLM::load(model);
  const model::MoeConfig& moe = *dense.config().moe;
  const at::Tensor ids = test_moe::calibration_ids(model, nsamples, seqlen);
  const at::Tensor h = mlp_inputs(dense, ids);
  ASSERT_EQ(h.size(0), T);
  const at::Tensor router = dense.tensor("model.layers.0.mlp.gate.weight");
  const at::Tensor probs = at::softmax(at::matmul(h.to(at::kFloat), router.t()), -1);
  const auto routed = routed_tokens(probs, moe.top_k);

  // Statistics in fp32 over at most T tokens of inputs no larger than xmax2 (squared).
  const double xmax2 = h.pow(2).sum(-1).max().item<double>();
  const double tol = test::rounding_bound(T + 2 * dense.config().hidden_size, T * xmax2);
  at::Tensor sum = at::zeros({h.size(1), h.size(1)}, at::kDouble);
  int64_t tokens = 0;
  for (int64_t e = 0; e < moe.num_experts; ++e) {
    const std::string name = "model.layers.0.mlp.experts." + std::to_string(e) + ".gate_proj";
    const prune::LayerProblem p = prune::load_problem(run.problems / (name + ".safetensors"));
    const auto& rows = routed[static_cast<size_t>(e)];
    EXPECT_EQ(p.tokens, static_cast<int64_t>(rows.size())) << name;
    const at::Tensor X = h.index_select(0, at::tensor(rows, at::kLong));
    EXPECT_ALL_CLOSE(p.G.to(at::kDouble), at::matmul(X.t(), X), tol, 0);
    sum += p.G.to(at::kDouble);
    tokens += p.tokens;
    // The report says how many tokens each expert's linears saw; up shares gate's statistic.
    for (const auto& layer : run.report["layers"])
      if (layer["name"] == name || layer["name"] == "model.layers.0.mlp.experts." + std::to_string(e) + ".up_proj")
        EXPECT_EQ(layer["tokens"], p.tokens) << layer;
  }
  // Every token reaches exactly top_k experts: whatever the routing, the experts' statistics add up to top_k times
  // the Gram of all tokens.
  EXPECT_EQ(tokens, moe.top_k * T);
  EXPECT_ALL_CLOSE(sum, moe.top_k * at::matmul(h.t(), h), moe.num_experts * tol, 0);
  // Layer 1 is a dense MLP (mlp_only_layers) and sees every token.
  for (const auto& layer : run.report["layers"])
    if (layer["block"] == 1) EXPECT_EQ(layer["tokens"], T) << layer;
}

TEST(PruneMoe, AllExpertsCalibrationShowsEveryTokenToEveryExpert) {
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer("qwen3_moe_routed", dir.path());
  const int64_t nsamples = 2, seqlen = 16, T = nsamples * seqlen;
  test::TempDir routed_dir;
  const PruneRun all = prune(model, dir.path(), nsamples, seqlen,
                             {"--method", "sparsegpt", "--sparsity", "0.5", "--moe-calibration", "all"});
  const PruneRun routed =
      prune(model, routed_dir.path(), nsamples, seqlen, {"--method", "sparsegpt", "--sparsity", "0.5"});
  ASSERT_FALSE(all.report.is_null());
  ASSERT_FALSE(routed.report.is_null());
  EXPECT_EQ(all.report["recipe"]["calibration"]["experts"], "all");
  const auto dense = model::CausalLM::load(model);
  const at::Tensor ids = test_moe::calibration_ids(model, nsamples, seqlen);
  const at::Tensor h = mlp_inputs(dense, ids);
  const double xmax2 = h.pow(2).sum(-1).max().item<double>();
  const double tol = test::rounding_bound(T + 2 * dense.config().hidden_size, T * xmax2);
  for (int64_t e = 0; e < dense.config().moe->num_experts; ++e) {
    const std::string expert = "model.layers.0.mlp.experts." + std::to_string(e);
    const prune::LayerProblem p = prune::load_problem(all.problems / (expert + ".gate_proj.safetensors"));
    EXPECT_EQ(p.tokens, T);
    EXPECT_ALL_CLOSE(p.G.to(at::kDouble), at::matmul(h.t(), h), tol, 0);
    EXPECT_EQ(prune::load_problem(all.problems / (expert + ".down_proj.safetensors")).tokens, T);
  }
  // The choice changes what the experts are pruned to.
  const auto a = model::CausalLM::load(dir / "pruned"), r = model::CausalLM::load(routed_dir / "pruned");
  EXPECT_FALSE(a.tensor("model.layers.0.mlp.experts.0.down_proj.weight")
                   .equal(r.tensor("model.layers.0.mlp.experts.0.down_proj.weight")));
}

TEST(PruneMoe, AnExpertNoTokenReachesIsPrunedByMagnitudeAndTheReportSaysSo) {
  test::TempDir dir, magnitude_dir;
  const fs::path model = test_prune::fixture_with_tokenizer("qwen3_moe_routed", dir.path());
  // 16 tokens, 2 experts each, 6 experts: in block 2 (as the pruned blocks before it leave the tokens) some expert
  // receives none.
  const PruneRun run = prune(model, dir.path(), 1, 16, {"--method", "alps", "--sparsity", "0.6"});
  const PruneRun magnitude =
      prune(model, magnitude_dir.path(), 1, 16, {"--method", "magnitude", "--sparsity", "0.6"}, false);
  ASSERT_FALSE(run.report.is_null());
  const auto pruned = model::CausalLM::load(dir / "pruned"),
             by_magnitude = model::CausalLM::load(magnitude_dir / "pruned");
  int64_t unreached = 0;
  for (const auto& layer : run.report["layers"]) {
    const std::string name = layer["name"];
    if (layer["tokens"] != 0) {
      EXPECT_EQ(layer["method"], "alps") << name;
      continue;
    }
    ++unreached;
    EXPECT_NE(name.find(".mlp.experts."), std::string::npos) << name;
    EXPECT_EQ(layer["method"], "magnitude") << name;
    EXPECT_NE(layer["rule"].get<std::string>().find("no calibration token"), std::string::npos);
    EXPECT_TRUE(pruned.tensor(name + ".weight").equal(by_magnitude.tensor(name + ".weight"))) << name;
  }
  EXPECT_GT(unreached, 0);
  EXPECT_EQ(unreached % 3, 0);  // an expert's gate, up and down together
}

TEST(PruneMoe, OwlPoolsABlocksExpertsScoredOnTheirRoutedTokensWithItsOtherLinears) {
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer("qwen3_moe_routed", dir.path());
  const int64_t nsamples = 4, seqlen = 16;
  const double M = 3;  // the fixture's scores have outliers above 3 times their mean in every block
  const PruneRun run =
      prune(model, dir.path(), nsamples, seqlen,
            {"--method", "wanda", "--sparsity", "0.5", "--sparsity-profile", "owl", "--owl-m", "3"}, false);
  ASSERT_FALSE(run.report.is_null());
  const json& profile = run.report.at("extra").at("sparsity_profile");

  // Block 0's outlier fraction again: the attention linears on their inputs in the dense forward, each expert's
  // gate, up and down on the tokens a scan of the router's probabilities sends it (down on their gated product, in
  // fp64), every Wanda score |W_ij| ||X_j|| pooled, counted above M times the pooled mean.
  const auto dense = model::CausalLM::load(model);
  const at::Tensor ids = test_moe::calibration_ids(model, nsamples, seqlen);
  std::map<std::string, at::Tensor> attention_inputs;
  dense.observe_block(0, dense.embed(ids), [&](const std::string& linear, const at::Tensor& x) {
    if (linear.rfind("self_attn.", 0) == 0) attention_inputs[linear] = x.reshape({-1, x.size(-1)}).to(at::kDouble);
  });
  std::vector<at::Tensor> scores;
  auto score = [&](const std::string& weight, const at::Tensor& X) {
    scores.push_back(dense.tensor(weight).to(at::kDouble).abs() * X.pow(2).sum(0).sqrt().unsqueeze(0));
  };
  for (const char* p : {"q_proj", "k_proj", "v_proj", "o_proj"})
    score(std::string("model.layers.0.self_attn.") + p + ".weight", attention_inputs.at(std::string("self_attn.") + p));
  const at::Tensor h = mlp_inputs(dense, ids);
  const at::Tensor router = dense.tensor("model.layers.0.mlp.gate.weight");
  const auto routed =
      routed_tokens(at::softmax(at::matmul(h.to(at::kFloat), router.t()), -1), dense.config().moe->top_k);
  for (int64_t e = 0; e < dense.config().moe->num_experts; ++e) {
    const std::string expert = "model.layers.0.mlp.experts." + std::to_string(e) + ".";
    const at::Tensor X = h.index_select(0, at::tensor(routed[static_cast<size_t>(e)], at::kLong));
    auto w = [&](const char* p) { return dense.tensor(expert + p + ".weight").to(at::kDouble); };
    score(expert + "gate_proj.weight", X);
    score(expert + "up_proj.weight", X);
    score(expert + "down_proj.weight", at::silu(at::matmul(X, w("gate_proj").t())) * at::matmul(X, w("up_proj").t()));
  }
  std::vector<at::Tensor> flat;
  for (const at::Tensor& s : scores) flat.push_back(s.reshape({-1}));
  const at::Tensor pooled = at::cat(flat);
  const double threshold = M * pooled.mean().item<double>();
  const auto n = static_cast<double>(pooled.numel());
  const double want = pooled.gt(threshold).sum().item<double>() / n;
  // A score within the rounding of alps's fp32 computation of it (sums of squares over the tokens, an expert's
  // gate and up products over the hidden width, the scores' mean: ATen sums it by cascades, log2 n roundings deep)
  // of the threshold may count either way.
  const double chain = static_cast<double>(nsamples * seqlen + 2 * dense.config().hidden_size) + std::log2(n);
  const double near =
      (pooled - threshold).abs().lt(test::rounding_bound(chain, threshold)).sum().item<double>() / n;
  EXPECT_GT(want, 0);
  EXPECT_NEAR(profile.at("outlier_fraction")[0].get<double>(), want, near + 1e-12);
  // A block's sparsity covers its experts: every block's linears, experts included, get the zeros of its sparsity,
  // all scaled alike so that they total the model's (prune::apportion_zeros), each linear's within one of its share.
  struct Count {
    double zeros = 0, weights = 0, linears = 0;
  };
  std::map<int64_t, Count> blocks;
  Count all;
  for (const json& l : run.report.at("layers")) {
    const auto shape = l.at("shape").get<std::vector<int64_t>>();
    const auto numel = static_cast<double>(shape[0] * shape[1]);
    for (Count* c : {&blocks[l.at("block")], &all}) {
      c->zeros += l.at("sparsity").get<double>() * numel;
      c->weights += numel;
      c->linears += 1;
    }
  }
  EXPECT_EQ(all.zeros, std::round(0.5 * all.weights));
  double quota = 0;
  for (const auto& [b, c] : blocks)
    quota += profile.at("block_sparsity")[static_cast<size_t>(b)].get<double>() * c.weights;
  for (const auto& [b, c] : blocks)
    EXPECT_NEAR(c.zeros,
                profile.at("block_sparsity")[static_cast<size_t>(b)].get<double>() * c.weights * all.zeros / quota,
                c.linears)
        << "block " << b;
}

TEST(PruneMoe, RecipeRulesReachExpertLinearsByName) {
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer("mixtral_top2", dir.path());
  const fs::path recipe = dir / "recipe.json";
  std::ofstream(recipe) << R"({"method": "sparsegpt", "sparsity": 0.5, "overrides": [
      {"match": "*.block_sparse_moe.experts.*.w2", "skip": true},
      {"match": "model.layers.1.block_sparse_moe.experts.3.*", "method": "wanda", "pattern": "2:4"}]})";
  const PruneRun run = prune(model, dir.path(), 2, 16, {"--config", recipe.string()});
  ASSERT_FALSE(run.report.is_null());
  const auto pruned = model::CausalLM::load(dir / "pruned"), dense = model::CausalLM::load(model);
  std::map<std::string, int> seen;
  for (const auto& layer : run.report["layers"]) {
    const std::string name = layer["name"];
    const at::Tensor W = pruned.tensor(name + ".weight");
    if (name.size() > 3 && name.compare(name.size() - 3, 3, ".w2") == 0) {
      EXPECT_TRUE(layer["skipped"].get<bool>()) << name;
      EXPECT_TRUE(W.equal(dense.tensor(name + ".weight"))) << name;
      ++seen["skipped"];
    } else if (name.rfind("model.layers.1.block_sparse_moe.experts.3.", 0) == 0) {
      EXPECT_EQ(layer["method"], "wanda");
      EXPECT_TRUE(W.view({W.size(0), -1, 4}).ne(0).sum(-1).eq(2).all().item<bool>()) << name;
      ++seen["wanda"];
    } else {
      EXPECT_EQ(layer["method"], "sparsegpt") << name;
    }
  }
  EXPECT_EQ(seen["skipped"], 2 * 4);  // every expert's w2 in both blocks
  EXPECT_EQ(seen["wanda"], 2);        // w1 and w3 of that expert
  // The routers stay dense.
  for (int b = 0; b < 2; ++b) {
    const std::string router = "model.layers." + std::to_string(b) + ".block_sparse_moe.gate.weight";
    EXPECT_TRUE(pruned.tensor(router).equal(dense.tensor(router)));
  }
}

TEST(PruneMoe, ARuleThatNamesTheRoutersAlonePrunesThemOnEveryToken) {
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer("qwen3_moe_routed", dir.path());
  const int64_t nsamples = 4, seqlen = 16, T = nsamples * seqlen;
  // "*.mlp.*" matches the routers too, but names the experts and MLPs, "*.mlp.gate*" the dense MLP's gate_proj of
  // block 1 (mlp_only_layers): only a rule that selects routers alone names them, here block 0's.
  auto run_with = [&](const std::string& name, const std::string& overrides) {
    const fs::path recipe = dir / (name + ".json");
    std::ofstream(recipe) << R"({"method": "magnitude", "sparsity": 0.5, "overrides": [)" << overrides << "]}";
    return prune(model, dir / name, nsamples, seqlen, {"--config", recipe.string()});
  };
  const PruneRun named = run_with("named", R"({"match": "*.mlp.*", "method": "sparsegpt"},
      {"match": "model.layers.0.mlp.gate", "method": "wanda"})");
  const PruneRun unnamed = run_with(
      "unnamed", R"({"match": "*.mlp.*", "method": "sparsegpt"}, {"match": "*.mlp.gate*", "method": "wanda"})");
  ASSERT_FALSE(named.report.is_null());
  ASSERT_FALSE(unnamed.report.is_null());
  const auto dense = model::CausalLM::load(model);
  const auto pruned = model::CausalLM::load(dir / "named/pruned"), kept = model::CausalLM::load(dir / "unnamed/pruned");
  const std::string router = "model.layers.0.mlp.gate", other = "model.layers.2.mlp.gate";
  for (const std::string& r : {router, other}) {
    EXPECT_TRUE(kept.tensor(r + ".weight").equal(dense.tensor(r + ".weight"))) << r;
    for (const json& layer : unnamed.report.at("layers")) EXPECT_NE(layer.at("name"), r);
  }
  EXPECT_TRUE(pruned.tensor(other + ".weight").equal(dense.tensor(other + ".weight")));

  // The router reads every token's MLP input: its statistic is their Gram.
  const at::Tensor h = mlp_inputs(dense, test_moe::calibration_ids(model, nsamples, seqlen));
  const prune::LayerProblem p = prune::load_problem(named.problems / (router + ".safetensors"));
  EXPECT_EQ(p.tokens, T);
  const double xmax2 = h.pow(2).sum(-1).max().item<double>();
  EXPECT_ALL_CLOSE(p.G.to(at::kDouble), at::matmul(h.t(), h),
                   test::rounding_bound(T + 2 * dense.config().hidden_size, T * xmax2), 0);
  int64_t jobs = 0;  // block 0's router alone: no job (and no statistic) for block 2's
  for (const json& layer : named.report.at("layers")) {
    EXPECT_NE(layer.at("name"), other);
    if (layer.at("name") != router) continue;
    EXPECT_EQ(layer.at("method"), "wanda");
    EXPECT_EQ(layer.at("tokens"), T);
    ++jobs;
  }
  EXPECT_EQ(jobs, 1);
  // Wanda's choice on it: in each row the half of |W_ij| ||X_j|| that is largest stays, as it was. A score within
  // the rounding of alps's fp32 sums of squares of the threshold may go either way.
  const at::Tensor W = dense.tensor(router + ".weight").to(at::kDouble), got = pruned.tensor(router + ".weight");
  const at::Tensor score = W.abs() * h.pow(2).sum(0).sqrt().unsqueeze(0);
  const int64_t keep = W.size(1) / 2;
  for (int64_t i = 0; i < W.size(0); ++i) {
    const at::Tensor sorted = std::get<0>(score[i].sort(/*dim=*/0, /*descending=*/true));
    const double threshold = 0.5 * (sorted[keep - 1].item<double>() + sorted[keep].item<double>());
    const at::Tensor near = (score[i] - threshold).abs().lt(test::rounding_bound(T, threshold));
    const at::Tensor want = score[i].gt(threshold), stays = got[i].ne(0);
    EXPECT_TRUE(want.eq(stays).logical_or(near).all().item<bool>()) << "row " << i;
    EXPECT_EQ(stays.sum().item<int64_t>(), keep) << "row " << i;
    EXPECT_TRUE(got[i].to(at::kDouble).masked_select(stays).equal(W[i].masked_select(stays))) << "row " << i;
  }
}

TEST(PruneMoe, AStateThatPrunedNoRouterIsNotResumedByAPlanThatPrunesThem) {
  // Before alps pruned routers, a rule naming them changed nothing: a run stopped then must not go on pruning them
  // in the blocks left (its state, as such a build wrote it, records no routers).
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer("qwen3_moe_routed", dir.path());
  const fs::path recipe = dir / "recipe.json", out = dir / "out";
  std::ofstream(recipe) << R"({"method": "sparsegpt", "sparsity": 0.5,
      "overrides": [{"match": "*.mlp.gate", "method": "wanda"}]})";
  const std::vector<std::string> args = {"prune",   "--model",  model.string(), "--out",         out.string(),
                                         "--calib", calib(),    "--config",     recipe.string(), "--nsamples",
                                         "4",       "--seqlen", "16",           "--device",      "cpu"};
  std::vector<std::string> first = args, again = args;
  first.insert(first.end(), {"--stop-after", "1"});
  again.push_back("--resume");
  ASSERT_EQ(test::run_cli(first).exit_code, 0);
  const fs::path state = out / pipeline::kStateDir / "state.json";
  json saved = json::parse(io::read_text_file(state));
  EXPECT_EQ(saved.at("key").at("routers"), json({"model.layers.0.mlp.gate", "model.layers.2.mlp.gate"}));
  saved["key"].erase("routers");
  std::ofstream(state, std::ios::trunc) << saved.dump();
  const auto r = test::run_cli(again);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("routers pruned by recipe rules: the interrupted run used none"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace alps
