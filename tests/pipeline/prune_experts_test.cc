// `alps prune --remove-experts` (docs/moe.md): each mixture layer keeps the experts REAP's saliency (or the routing
// frequency) ranks highest, checked against a second computation of the scores from the dense weights; the output is
// a smaller checkpoint of the same family (router rows and experts renumbered, the expert count in config.json); the
// experts it keeps are then pruned on the statistics of the tokens the smaller router sends them; a resumed run ends
// where an uninterrupted one does; what cannot be done is refused before any work. That transformers loads the output
// with alps's perplexity is scripts/check_hf_load.py's check (docs/moe.md).
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "alps/io/safetensors.h"
#include "alps/io/text_files.h"
#include "alps/model/causal_lm.h"
#include "alps/prune/problem.h"
#include "moe_support.h"
#include "prune_cli_support.h"
#include "support.h"

namespace alps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* kFixture = "qwen3_moe_routed";  // 6 experts, 2 per token, renormalised; block 1 is a dense MLP
constexpr int64_t kWindows = 4, kSeqlen = 16;

std::string expert(int64_t block, int64_t e) {
  return "model.layers." + std::to_string(block) + ".mlp.experts." + std::to_string(e);
}

// Block 0's experts scored in fp64 from the dense weights: REAP's saliency (the mean over an expert's routed tokens of
// its routing probability times the norm of its output), the routed tokens, and a tolerance per score from the
// rounding of the fp32 forward that alps scores with.
struct Scores {
  std::vector<double> reap, tolerance;
  std::vector<int64_t> tokens;
};

Scores block0_scores(const model::CausalLM& m, const at::Tensor& ids) {
  const at::Tensor h = test_moe::mlp_inputs(m, ids);
  const at::Tensor router = m.tensor("model.layers.0.mlp.gate.weight").to(at::kDouble);
  const int64_t E = router.size(0), k = m.config().moe->top_k, hidden = h.size(1);
  const at::Tensor probs = at::softmax(at::matmul(h.to(at::kFloat), router.to(at::kFloat).t()), -1);
  const auto routed = test_moe::routed_tokens(probs, k);
  // A logit's rounding moves a probability by as much relative to the logits' scale.
  const double logit_scale = at::matmul(h.abs(), router.abs().t()).max().item<double>();
  Scores s;
  for (int64_t e = 0; e < E; ++e) {
    const auto& rows = routed[static_cast<size_t>(e)];
    s.tokens.push_back(static_cast<int64_t>(rows.size()));
    if (rows.empty()) {
      s.reap.push_back(0);
      s.tolerance.push_back(0);
      continue;
    }
    const at::Tensor X = h.index_select(0, at::tensor(rows, at::kLong));
    auto w = [&](const char* p) { return m.tensor(expert(0, e) + "." + p + ".weight").to(at::kDouble); };
    const at::Tensor f =
        at::matmul(at::silu(at::matmul(X, w("gate_proj").t())) * at::matmul(X, w("up_proj").t()), w("down_proj").t());
    const at::Tensor magnitude =
        at::matmul(at::matmul(X.abs(), w("gate_proj").abs().t()) * at::matmul(X.abs(), w("up_proj").abs().t()),
                   w("down_proj").abs().t());
    const at::Tensor p = probs.to(at::kDouble).index_select(0, at::tensor(rows, at::kLong)).select(1, e);
    s.reap.push_back((p * f.norm(2, {-1})).mean().item<double>());
    const double scale = (p * magnitude.norm(2, {-1})).mean().item<double>() * (1 + logit_scale);
    const auto chain = static_cast<double>(3 * hidden + w("down_proj").size(1) + E + static_cast<int64_t>(rows.size()));
    s.tolerance.push_back(test::rounding_bound(chain, scale));
  }
  return s;
}

// The experts above the keep-th highest score, then those at it from the lowest index until `keep` (the rule's
// statement by a threshold, where the run sorts).
std::vector<int64_t> highest(const std::vector<double>& score, int64_t keep) {
  std::vector<double> sorted = score;
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  const double threshold = sorted[static_cast<size_t>(keep - 1)];
  std::vector<bool> chosen(score.size(), false);
  auto count = [&] { return std::count(chosen.begin(), chosen.end(), true); };
  for (size_t e = 0; e < score.size(); ++e) chosen[e] = score[e] > threshold;
  for (size_t e = 0; e < score.size() && count() < keep; ++e) chosen[e] = chosen[e] || score[e] == threshold;
  std::vector<int64_t> kept;
  for (size_t e = 0; e < score.size(); ++e)
    if (chosen[e]) kept.push_back(static_cast<int64_t>(e));
  return kept;
}

const json& experts_report(const json& report, int64_t block) {
  for (const json& b : report.at("extra").at("structured").at("blocks"))
    if (b.at("block") == block && b.at("structure") == "experts") return b;
  ADD_FAILURE() << "no experts step for block " << block;
  static const json none;
  return none;
}

TEST(PruneExperts, KeepsTheExpertsOfHighestReapSaliencyAndWritesASmallerCheckpointOfTheSameFamily) {
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer(kFixture, dir.path());
  const auto run = test_moe::prune(model, dir.path(), kWindows, kSeqlen, {"--remove-experts", "0.34"}, false);
  ASSERT_FALSE(run.report.is_null());
  const auto dense = model::CausalLM::load(model);
  const Scores want = block0_scores(dense, test_moe::calibration_ids(model, kWindows, kSeqlen));

  const json& step = experts_report(run.report, 0);
  EXPECT_EQ(step.at("method"), "reap");
  EXPECT_EQ(step.at("units"), 6);
  const auto scores = step.at("scores").get<std::vector<double>>();
  ASSERT_EQ(scores.size(), want.reap.size());
  EXPECT_EQ(step.at("tokens").get<std::vector<int64_t>>(), want.tokens);
  for (size_t e = 0; e < scores.size(); ++e) EXPECT_NEAR(scores[e], want.reap[e], want.tolerance[e]) << "expert " << e;
  // round(0.34 x 6) = 2 go; the scores of the kept and the removed are further apart than rounding can move them.
  const std::vector<int64_t> kept = highest(want.reap, 4);
  EXPECT_EQ(step.at("kept_units").get<std::vector<int64_t>>(), kept);
  double lowest_kept = 1e300, highest_removed = 0, slack = 0;
  for (int64_t e = 0; e < 6; ++e) {
    const bool k = std::find(kept.begin(), kept.end(), e) != kept.end();
    (k ? lowest_kept : highest_removed) = k ? std::min(lowest_kept, want.reap[static_cast<size_t>(e)])
                                            : std::max(highest_removed, want.reap[static_cast<size_t>(e)]);
    slack = std::max(slack, want.tolerance[static_cast<size_t>(e)]);
  }
  ASSERT_GT(lowest_kept - highest_removed, 2 * slack) << "the fixture's scores tie within rounding";

  // The output: the kept experts renumbered 0..3 with their own weights, the router's rows of them, the count in
  // config.json; block 1's dense MLP as it was; block 2 kept 4 of its own.
  const auto out = model::CausalLM::load(dir / "pruned");
  EXPECT_EQ(out.config().moe->num_experts, 4);
  const json config = json::parse(io::read_text_file(dir / "pruned/config.json"));
  EXPECT_EQ(config.at("num_local_experts"), 4);
  EXPECT_FALSE(config.contains("num_experts"));  // the fixture states the count under one name: the output too
  EXPECT_TRUE(out.tensor("model.layers.0.mlp.gate.weight")
                  .equal(dense.tensor("model.layers.0.mlp.gate.weight").index_select(0, at::tensor(kept, at::kLong))));
  for (size_t j = 0; j < kept.size(); ++j)
    for (const char* p : {"gate_proj", "up_proj", "down_proj"})
      EXPECT_TRUE(out.tensor(expert(0, static_cast<int64_t>(j)) + "." + p + ".weight")
                      .equal(dense.tensor(expert(0, kept[j]) + "." + p + ".weight")))
          << j << " " << p;
  EXPECT_TRUE(
      out.tensor("model.layers.1.mlp.down_proj.weight").equal(dense.tensor("model.layers.1.mlp.down_proj.weight")));
  EXPECT_EQ(out.num_experts(2), 4);
  const io::SafetensorsFile file(dir / "pruned/model.safetensors");
  for (const auto& e : file.entries()) EXPECT_EQ(e.name.find("experts.4."), std::string::npos) << e.name;
  // The smaller model: its parameters in the report, the step in the summary.
  const json& structured = run.report.at("extra").at("structured");
  EXPECT_EQ(structured.at("parameters").at("after"), out.num_parameters());
  EXPECT_LT(out.num_parameters(), dense.num_parameters());
  EXPECT_EQ(structured.at("steps").at(0).at("structure"), "experts");
}

TEST(PruneExperts, FrequencyKeepsTheMostRoutedExperts) {
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer(kFixture, dir.path());
  const auto run = test_moe::prune(model, dir.path(), kWindows, kSeqlen,
                                   {"--remove-experts", "0.5", "--expert-score", "frequency"}, false);
  ASSERT_FALSE(run.report.is_null());
  const auto dense = model::CausalLM::load(model);
  const Scores want = block0_scores(dense, test_moe::calibration_ids(model, kWindows, kSeqlen));
  std::vector<double> counts(want.tokens.begin(), want.tokens.end());
  const json& step = experts_report(run.report, 0);
  EXPECT_EQ(step.at("method"), "frequency");
  EXPECT_EQ(step.at("scores").get<std::vector<double>>(), counts);
  EXPECT_EQ(step.at("kept_units").get<std::vector<int64_t>>(), highest(counts, 3));
}

TEST(PruneExperts, TheKeptExpertsArePrunedOnTheTokensTheSmallerRouterSendsThem) {
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer(kFixture, dir.path());
  const auto run = test_moe::prune(model, dir.path(), kWindows, kSeqlen,
                                   {"--remove-experts", "0.34", "--method", "sparsegpt", "--sparsity", "0.5"});
  ASSERT_FALSE(run.report.is_null());
  const auto dense = model::CausalLM::load(model);
  const at::Tensor h = test_moe::mlp_inputs(dense, test_moe::calibration_ids(model, kWindows, kSeqlen));
  const auto kept = experts_report(run.report, 0).at("kept_units").get<std::vector<int64_t>>();
  const at::Tensor router = dense.tensor("model.layers.0.mlp.gate.weight").index_select(0, at::tensor(kept, at::kLong));
  const auto routed = test_moe::routed_tokens(at::softmax(at::matmul(h.to(at::kFloat), router.t()), -1), 2);
  const int64_t T = h.size(0);
  const double xmax2 = h.pow(2).sum(-1).max().item<double>();
  const double tol = test::rounding_bound(T + 2 * dense.config().hidden_size, T * xmax2);
  for (size_t j = 0; j < kept.size(); ++j) {
    const std::string name = expert(0, static_cast<int64_t>(j)) + ".gate_proj";
    const prune::LayerProblem p = prune::load_problem(run.problems / (name + ".safetensors"));
    const at::Tensor X = h.index_select(0, at::tensor(routed[j], at::kLong));
    EXPECT_EQ(p.tokens, static_cast<int64_t>(routed[j].size())) << name;
    EXPECT_ALL_CLOSE(p.G.to(at::kDouble), at::matmul(X.t(), X), tol, 0);
    // The problem's dense weight is the kept expert's own.
    EXPECT_TRUE(p.W0.equal(dense.tensor(expert(0, kept[j]) + ".gate_proj.weight"))) << name;
  }
  int64_t layers = 0;
  for (const json& l : run.report.at("layers"))
    if (l.at("name").get<std::string>().find(".mlp.experts.") != std::string::npos) ++layers;
  EXPECT_EQ(layers, 2 * 4 * 3);  // two mixture blocks of 4 experts of 3 linears
}

TEST(PruneExperts, AResumedRunEndsWhereAnUninterruptedOneDoes) {
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer(kFixture, dir.path());
  const std::vector<std::string> flags = {"--remove-experts", "0.34", "--method", "wanda", "--sparsity", "0.4"};
  test::TempDir whole, legs;
  ASSERT_FALSE(test_moe::prune(model, whole.path(), kWindows, kSeqlen, flags, false).report.is_null());
  std::vector<std::string> first = flags;
  first.insert(first.end(), {"--stop-after", "1"});
  ASSERT_FALSE(test_moe::prune(model, legs.path(), kWindows, kSeqlen, first, false).report.is_null());
  std::vector<std::string> second = flags;
  second.push_back("--resume");
  const auto resumed = test_moe::prune(model, legs.path(), kWindows, kSeqlen, second, false);
  ASSERT_FALSE(resumed.report.is_null());
  const io::SafetensorsFile a(whole / "pruned/model.safetensors"), b(legs / "pruned/model.safetensors");
  ASSERT_EQ(a.entries().size(), b.entries().size());
  for (const auto& e : a.entries()) EXPECT_TRUE(at::equal(a.tensor(e.name), b.tensor(e.name))) << e.name;
  EXPECT_EQ(test::slurp(whole / "pruned/config.json"), test::slurp(legs / "pruned/config.json"));
  EXPECT_EQ(resumed.report.at("extra").at("structured").at("blocks").size(), 2u);
}

TEST(PruneExperts, TheRanksOfADistributedRunKeepTheExpertsTheWholeCalibrationChooses) {
  test::TempDir dir;
  const fs::path model = test_prune::fixture_with_tokenizer(kFixture, dir.path());
  const std::vector<std::string> flags = {"--remove-experts", "0.34", "--method", "sparsegpt", "--sparsity", "0.5"};
  test::TempDir one_dir, two_dir;
  const auto one = test_moe::prune(model, one_dir.path(), kWindows, kSeqlen, flags, false);
  std::vector<std::string> two_flags = flags;
  two_flags.insert(two_flags.end(), {"--nproc", "2"});
  const auto two = test_moe::prune(model, two_dir.path(), kWindows, kSeqlen, two_flags, false);
  ASSERT_FALSE(one.report.is_null());
  ASSERT_FALSE(two.report.is_null());
  EXPECT_EQ(two.report.at("extra").at("distributed").at("world_size"), 2);
  // Each rank sees half the windows; the scores are of all of them, as the fp64 recomputation says.
  const Scores want = block0_scores(model::CausalLM::load(model), test_moe::calibration_ids(model, kWindows, kSeqlen));
  const json& step = experts_report(two.report, 0);
  EXPECT_EQ(step.at("tokens").get<std::vector<int64_t>>(), want.tokens);
  const auto scores = step.at("scores").get<std::vector<double>>();
  ASSERT_EQ(scores.size(), want.reap.size());
  for (size_t e = 0; e < scores.size(); ++e) EXPECT_NEAR(scores[e], want.reap[e], want.tolerance[e]) << "expert " << e;
  for (int64_t b : {0, 2})
    EXPECT_EQ(experts_report(two.report, b).at("kept_units"), experts_report(one.report, b).at("kept_units"));
  // The kept experts' solves on the statistics of every rank's tokens. Small experts' Grams are rank-deficient and
  // SparseGPT's damped inverse amplifies their rounding: the reference spread is one process with another batch size
  // (which changes only the rounding of the forward and the statistics); two ranks stay within three times it.
  std::vector<std::string> batch_flags = flags;
  batch_flags.insert(batch_flags.end(), {"--batch-size", "1"});
  test::TempDir batch_dir;
  const auto batch = test_moe::prune(model, batch_dir.path(), kWindows, kSeqlen, batch_flags, false);
  ASSERT_FALSE(batch.report.is_null());
  const json &layers1 = one.report.at("layers"), &layers2 = two.report.at("layers");
  ASSERT_EQ(layers2.size(), layers1.size());
  for (size_t i = 0; i < layers1.size(); ++i) {
    EXPECT_EQ(layers2[i].at("name"), layers1[i].at("name"));
    EXPECT_EQ(layers2[i].at("tokens"), layers1[i].at("tokens")) << layers1[i].at("name");
    EXPECT_EQ(layers2[i].at("sparsity"), layers1[i].at("sparsity")) << layers1[i].at("name");
  }
  const double spread = test_prune::mean_relative_difference(batch.report, one.report);
  EXPECT_LE(test_prune::mean_relative_difference(two.report, one.report), 3 * std::max(spread, 1e-7)) << spread;
  EXPECT_EQ(test::slurp(two_dir / "pruned/config.json"), test::slurp(one_dir / "pruned/config.json"));
}

TEST(PruneExperts, WhatCannotBeRemovedIsRefusedBeforeAnyWork) {
  test::TempDir dir;
  const fs::path moe = test_prune::fixture_with_tokenizer(kFixture, dir.path());
  struct Case {
    fs::path model;
    std::vector<std::string> flags;
    std::string says;
  };
  const std::vector<Case> cases = {
      {test_prune::model_dir(), {"--remove-experts", "0.5"}, "has no mixture-of-experts layers"},
      {moe, {"--remove-experts", "0.05"}, "removes none"},
      {moe, {"--remove-experts", "0.8"}, "fewer than the 2 each token is routed to"},
      {moe, {"--remove-experts", "0.5", "--sparsity", "0.5", "--sparsity-profile", "owl"}, "--sparsity-profile owl"},
      {moe, {"--remove-experts", "0.5", "--expert-score", "reeap"}, "did you mean"},
      {moe, {"--remove-experts", "1"}, "--remove-experts"}};
  for (const Case& c : cases) {
    const fs::path out = dir / ("out-" + std::to_string(&c - cases.data()));
    std::vector<std::string> args = test_prune::prune_args(out, c.flags);
    args[2] = c.model.string();
    const auto r = test::run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << c.says << "\n" << r.err;
    EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << c.says;
  }
}

}  // namespace
}  // namespace alps
