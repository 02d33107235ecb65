// End-to-end `alps prune --sparsity-profile owl`: per-block sparsity or N:M counts, resumed, and OWL's statistic.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "prune_cli_support.h"
#include "support.h"

namespace alps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test_prune::prune_args;
using test_prune::stopped_and_resumed;

// The run of `args` in dir/whole, which must succeed: its report.
json whole_run(const test::TempDir& dir, const std::vector<std::string>& args) {
  const auto r = test::run_cli(prune_args(dir / "whole", args));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json::object();
}

// A report row's zeros: its achieved sparsity times its weights, an integer up to the double's rounding.
double layer_zeros(const json& layer) {
  const auto shape = layer.at("shape").get<std::vector<int64_t>>();
  return layer.at("sparsity").get<double>() * static_cast<double>(shape.at(0) * shape.at(1));
}

// --sparsity-profile owl: every block at its own sparsity, their mean the target; an override's pattern stays; the
// allocation is part of the resume state, so a resumed run prunes each block as an uninterrupted one does.
TEST(PruneCli, OwlGivesEachBlockItsSparsityAndResumesWithIt) {
  test::TempDir dir;
  const std::vector<std::string> owl = {"--sparsity", "0.5", "--sparsity-profile", "owl", "--owl-lambda", "0.1"};
  const json report = whole_run(dir, owl);
  ASSERT_TRUE(report.contains("extra"));
  const json& profile = report.at("extra").at("sparsity_profile");
  const auto s = profile.at("block_sparsity").get<std::vector<double>>();
  ASSERT_EQ(s.size(), 5u);
  double mean = 0;
  for (double x : s) mean += x / 5;
  EXPECT_NEAR(mean, 0.5, 1e-12);
  EXPECT_NEAR(*std::max_element(s.begin(), s.end()) - *std::min_element(s.begin(), s.end()), 0.2, 1e-12);
  // Each linear holds its block's share to within one zero (the apportionment's rounding), and the model holds
  // round(0.5 N) zeros exactly over its N pruned weights.
  int64_t weights = 0, zeros = 0;
  for (const auto& l : report.at("layers")) {
    const double target = s.at(l.at("block").get<size_t>());
    const auto shape = l.at("shape").get<std::vector<int64_t>>();
    const double n = static_cast<double>(shape.at(0) * shape.at(1)), z = layer_zeros(l);
    EXPECT_NEAR(z, std::round(z), 1e-6) << l.at("name");
    EXPECT_LT(std::abs(z - target * n), 2.0) << l.at("name");
    weights += shape.at(0) * shape.at(1);
    zeros += std::llround(z);
  }
  EXPECT_EQ(profile.at("weights").get<int64_t>(), weights);
  EXPECT_EQ(profile.at("zeros").get<int64_t>(), zeros);
  EXPECT_EQ(zeros, std::llround(0.5 * static_cast<double>(weights)));
  // The per-row rule (Wanda) spreads a linear's share over its rows and holds the same total.
  const auto wanda = test::run_cli(prune_args(dir / "wanda", [&] {
    auto a = owl;
    a.insert(a.end(), {"--method", "wanda"});
    return a;
  }()));
  ASSERT_EQ(wanda.exit_code, 0) << wanda.err;
  int64_t wanda_zeros = 0;
  const json wanda_report = json::parse(wanda.out);
  for (const auto& l : wanda_report.at("layers")) wanda_zeros += std::llround(layer_zeros(l));
  EXPECT_EQ(wanda_zeros, zeros);
  EXPECT_EQ(stopped_and_resumed(dir.path(), owl).at("extra").at("sparsity_profile"), profile);
  // A recipe override's sparsity is the layer's own.
  const fs::path recipe = dir / "recipe.json";
  std::ofstream(recipe) << R"({"sparsity": 0.5, "sparsity_profile": "owl",
    "overrides": [{"match": "*.mlp.down_proj", "sparsity": 0.25}]})";
  const auto over = test::run_cli(prune_args(dir / "override", {"--config", recipe.string()}));
  ASSERT_EQ(over.exit_code, 0) << over.err;
  const json over_report = json::parse(over.out);  // kept alive: the loop reads into it
  int64_t overridden = 0;
  for (const auto& l : over_report.at("layers"))
    if (l.at("name").get<std::string>().find("down_proj") != std::string::npos) {
      EXPECT_EQ(l.at("pattern"), "0.25");
      ++overridden;
    }
  EXPECT_EQ(overridden, 5);
}

// OWL's mixed N:M variant: each block keeps its own count of every 4 (2 +- 1 with lambda 1), every linear of the block
// follows it, and a resumed run continues with the saved counts.
TEST(PruneCli, OwlMixedNmGivesEachBlockItsCount) {
  test::TempDir dir;
  const std::vector<std::string> owl = {"--pattern", "2:4", "--sparsity-profile", "owl", "--owl-lambda", "1"};
  const json report = whole_run(dir, owl);
  ASSERT_TRUE(report.contains("extra"));
  const json& profile = report.at("extra").at("sparsity_profile");
  const auto kept = profile.at("block_kept").get<std::vector<int64_t>>();
  ASSERT_EQ(kept.size(), 5u);
  for (int64_t k : kept) EXPECT_TRUE(k >= 1 && k <= 3) << k;
  EXPECT_NE(*std::min_element(kept.begin(), kept.end()), *std::max_element(kept.begin(), kept.end()));
  EXPECT_FALSE(profile.contains("zeros"));  // the mean is 2 of 4 only up to OWL's rounding
  for (const auto& l : report.at("layers")) {
    const int64_t k = kept.at(l.at("block").get<size_t>());
    EXPECT_EQ(l.at("pattern"), std::to_string(k) + ":4") << l.at("name");
    EXPECT_NEAR(l.at("sparsity").get<double>(), 1.0 - k / 4.0, 1e-12) << l.at("name");
  }
  stopped_and_resumed(dir.path(), owl);
}

// OWL's statistic measured by alps on SmolLM2-135M equals OWL's own (tests/data/owl/smollm2_owl_golden.json, from
// luuyin/OWL by scripts/make_owl_golden.py, 8 windows of the committed C4 documents, fp32). The two forwards round
// differently, so a score within rounding of its block's threshold may count on one side only: each block may
// differ by a few entries (10 allowed, of 3.5 million), which moves a block's sparsity by at most
// 2 lambda * 4 * 10 / 3.5e6 / (the spread of the fractions, 0.020) = 9e-5.
TEST(PruneCli, OwlOnSmolLM2IsOwls) {
  ALPS_REQUIRE_SMOLLM2();
  std::ifstream f(test::source_dir() / "tests/data/owl/smollm2_owl_golden.json");
  const json golden = json::parse(f);
  test::TempDir dir;
  const auto r = test::run_cli(
      {"prune", "--model", test::smollm2_dir().string(), "--out", (dir / "o").string(), "--calib", "c4",
       "--data-dir", test::committed_data_dir().string(), "--nsamples", "8", "--seqlen", "2048", "--device", "cpu",
       "--sparsity", "0.7", "--sparsity-profile", "owl", "--stop-after", "0", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = json::parse(r.out);
  const auto& profile = report.at("extra").at("sparsity_profile");
  const auto fractions = profile.at("outlier_fraction").get<std::vector<double>>();
  const auto sparsity = profile.at("block_sparsity").get<std::vector<double>>();
  const auto want_percent = golden.at("outlier_ratio_percent").get<std::vector<double>>();
  const auto want = golden.at("block_sparsity").get<std::vector<double>>();
  ASSERT_EQ(fractions.size(), want.size());
  const double block_entries = 2 * 576.0 * 576 + 2 * 576.0 * 192 + 3 * 576.0 * 1536;
  for (size_t b = 0; b < want.size(); ++b) {
    EXPECT_NEAR(fractions[b] * 100, want_percent[b], 100 * 10 / block_entries) << "block " << b;
    EXPECT_NEAR(sparsity[b], want[b], 9e-5) << "block " << b;
  }
}

}  // namespace
}  // namespace alps
