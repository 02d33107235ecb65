// End-to-end `alps prune` output besides the weights: the summary, the evaluations, the model card; `alps` alone.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
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
using test::slurp;
using test_prune::model_dir;
using test_prune::prune_args;

// Without --json the result is a summary table on stdout (logs stay on stderr); --eval-max-windows and --eval-limit
// bound the evaluation, and the perplexity equals `alps eval` of the saved checkpoint over the same windows.
TEST(PruneCli, SummaryOnStdoutAndBoundedEvaluation) {
  ALPS_REQUIRE_DATA("eval/rte");
  test::TempDir dir;
  const std::string text = (test::committed_data_dir() / "text/tinystories/tinystories_sample.txt").string();
  std::vector<std::string> args = prune_args(dir / "out", {"--method", "magnitude", "--sparsity", "0.5", "--eval",
                                                           text + ",rte", "--eval-seqlen", "64", "--eval-max-windows",
                                                           "3", "--eval-limit", "10"});
  args.erase(std::find(args.begin(), args.end(), "--json"));
  const auto r = test::run_cli(args, test::with_data_dir());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* want : {"magnitude 0.5: 35 linear layers pruned (0 left dense) in 5/5 blocks", "layer kind",
                           "mlp.down_proj", "save_state", "perplexity", "3 windows of 64 tokens", "rte",
                           "10 documents"})
    EXPECT_NE(r.out.find(want), std::string::npos) << want << " not in stdout:\n" << r.out;
  EXPECT_EQ(r.err.find("layer kind"), std::string::npos) << "the summary belongs on stdout only";

  const json report = json::parse(slurp(dir / "out/alps-report.json"));
  ASSERT_EQ(report["eval"].size(), 2u);
  EXPECT_EQ(report["eval"][0]["windows"], 3);
  EXPECT_EQ(report["eval"][1]["docs"], 10);
  const auto again = test::run_cli({"eval", "--model", (dir / "out").string(), "--ppl", text, "--seqlen", "64",
                                    "--max-windows", "3", "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  // The same weights and windows through the same code: equal up to the order in which the saved copy was read.
  const double saved = json::parse(again.out)["results"][0]["perplexity"].get<double>();
  const double in_memory = report["eval"][0]["perplexity"].get<double>();
  EXPECT_NEAR(in_memory, saved, 1e-9 * saved);

  const auto bad = test::run_cli(prune_args(dir / "bad", {"--sparsity", "0.5", "--eval-max-windows", "-1"}));
  EXPECT_EQ(bad.exit_code, 2) << bad.err;
  EXPECT_FALSE(fs::exists(dir / "bad"));
}

// The pruned checkpoint's model card says that it was pruned, by what, and where the report is; pruning the pruned
// model again replaces that note instead of adding a second.
TEST(PruneCli, TheModelCardSaysTheModelWasPruned) {
  test::TempDir dir;
  ASSERT_EQ(test::run_cli(prune_args(dir / "a", {"--method", "wanda", "--sparsity", "0.5"})).exit_code, 0);
  const std::string card = slurp(dir / "a/README.md");
  EXPECT_EQ(card.rfind("<!-- alps: pruning note -->\n> **Pruned with alps ", 0), 0u) << card.substr(0, 300);
  EXPECT_NE(card.find("wanda 0.5: 35 linear layers pruned"), std::string::npos) << card.substr(0, 400);
  EXPECT_NE(card.find(slurp(model_dir() / "README.md")), std::string::npos) << "the input's card follows the note";
  const json report = json::parse(slurp(dir / "a/alps-report.json"));
  bool listed = false;
  for (const auto& f : report["files"]) listed = listed || f["name"] == "README.md";
  EXPECT_TRUE(listed) << "alps wrote the card: a later --overwrite may replace it";

  auto again = prune_args(dir / "b", {"--method", "magnitude", "--sparsity", "0.6"});
  again[std::find(again.begin(), again.end(), "--model") - again.begin() + 1] = (dir / "a").string();
  ASSERT_EQ(test::run_cli(again).exit_code, 0);
  const std::string twice = slurp(dir / "b/README.md");
  EXPECT_EQ(twice.find("wanda 0.5"), std::string::npos) << "the earlier note is replaced";
  EXPECT_NE(twice.find("magnitude 0.6"), std::string::npos);
  EXPECT_EQ(twice.find("<!-- alps: pruning note -->", 1), std::string::npos) << "one note only";
}

// A tool's marker in the input (scripts/get_smollm2.sh's .alps-smollm2.json) describes the input: the output would
// pass for it. An input without a card gets one with the Hub's metadata, naming what it was pruned from.
TEST(PruneCli, HiddenFilesOfTheInputStayThereAndACardlessInputGetsMetadata) {
  test::TempDir dir;
  fs::copy(model_dir(), dir / "in", fs::copy_options::recursive);
  fs::remove(dir / "in/README.md");
  std::ofstream(dir / "in/.alps-smollm2.json") << "{}\n";
  auto args = prune_args(dir / "out", {"--method", "magnitude", "--sparsity", "0.5"});
  args[std::find(args.begin(), args.end(), "--model") - args.begin() + 1] = (dir / "in").string();
  const auto r = test::run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(dir / "out/.alps-smollm2.json"));
  EXPECT_NE(r.err.find("not copied to the output (the input's hidden files): .alps-smollm2.json"), std::string::npos)
      << r.err;
  const std::string card = slurp(dir / "out/README.md");
  EXPECT_EQ(card.rfind("---\nbase_model: in\ntags:\n- alps\n- pruned\n- magnitude\nalps_recipe: {", 0), 0u) << card;
}

// --eval-dense puts the input model's figure beside the pruned one's: the same windows as `alps eval` of the input
// scores, computed once and then read from the cache directory by every run that shares the model and windows.
TEST(PruneCli, TheDenseModelsEvaluationSitsBesideThePrunedOne) {
  test::TempDir dir;
  const std::string text = (test::committed_data_dir() / "text/tinystories/tinystories_sample.txt").string();
  const test::CliContext cache{{}, {"ALPS_CACHE_DIR=" + (dir / "cache").string()}};
  auto args = [&](const std::string& out) {
    auto a = prune_args(dir / out, {"--method", "wanda", "--sparsity", "0.5", "--eval", text, "--eval-seqlen", "64",
                                    "--eval-max-windows", "3", "--eval-dense"});
    a.erase(std::find(a.begin(), a.end(), "--json"));
    return a;
  };
  const auto first = test::run_cli(args("a"), cache);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find("dense"), std::string::npos) << first.out;
  const json report = json::parse(slurp(dir / "a/alps-report.json"));
  ASSERT_EQ(report["eval_dense"].size(), 1u);
  EXPECT_FALSE(report["extra"]["dense_eval"]["from_cache"].get<bool>());
  const double dense = report["eval_dense"][0]["perplexity"].get<double>();
  const double pruned = report["eval"][0]["perplexity"].get<double>();
  EXPECT_NE(first.out.find(fmt::format("{:.4f}", dense)), std::string::npos) << first.out;
  EXPECT_GT(pruned, dense) << "half the weights gone cost something";

  const auto reference = test::run_cli({"eval", "--model", model_dir().string(), "--ppl", text, "--seqlen", "64",
                                        "--max-windows", "3", "--json"});
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  // The same weights and windows through the same code, one window per forward in both: equal but for the last
  // digits the JSON round trip of the cached figure may drop.
  EXPECT_NEAR(json::parse(reference.out)["results"][0]["perplexity"].get<double>(), dense, 1e-9 * dense);

  const auto second = test::run_cli(args("b"), cache);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_NE(second.err.find("dense model's evaluation: from"), std::string::npos) << second.err;
  const json again = json::parse(slurp(dir / "b/alps-report.json"));
  EXPECT_TRUE(again["extra"]["dense_eval"]["from_cache"].get<bool>());
  EXPECT_EQ(again["eval_dense"], report["eval_dense"]);

  const auto alone = test::run_cli(prune_args(dir / "c", {"--sparsity", "0.5", "--eval-dense"}));
  EXPECT_EQ(alone.exit_code, 2);
  EXPECT_NE(alone.err.find("--eval-dense evaluates the input model"), std::string::npos) << alone.err;
}

TEST(Cli, WithoutASubcommandSaysOneIsNeeded) {
  const auto r = test::run_cli({});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("alps: a subcommand is required (solve-layer, make-problem, prune, eval"), std::string::npos)
      << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

}  // namespace
}  // namespace alps
