// `alps eval --tasks` and `alps prune --eval TASK` end to end (the built executable), including bad input.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "support.h"

namespace alps {
namespace {

namespace fs = std::filesystem;

fs::path stories() { return test::committed_data_dir() / "models" / "stories260K-hf"; }

TEST(ZeroShotCli, JsonMetricsAndLogSamples) {
  ALPS_REQUIRE_DATA("eval");
  test::TempDir tmp;
  const auto r = test::run_cli({"eval", "--model", stories().string(), "--tasks", "rte,lambada_openai", "--limit", "6",
                                "--batch-size", "4", "--json", "--log-samples", (tmp / "s.jsonl").string()},
                               test::with_data_dir());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto doc = nlohmann::json::parse(r.out);
  EXPECT_TRUE(doc["results"].empty()) << "no perplexity without --ppl";
  ASSERT_EQ(doc["tasks"].size(), 2u);
  const auto& rte = doc["tasks"][0];
  EXPECT_EQ(rte["task"], "rte");
  EXPECT_EQ(rte["docs"], 6);
  EXPECT_EQ(rte["requests"], 12);
  const double acc = rte["metrics"]["acc"].get<double>();
  EXPECT_NEAR(acc * 6, std::round(acc * 6), 1e-12);
  EXPECT_NEAR(rte["metrics"]["acc_stderr"].get<double>(), std::sqrt(acc * (1 - acc) / 5), 1e-12);
  EXPECT_GT(doc["tasks"][1]["metrics"]["perplexity"].get<double>(), 1.0);
  // Progress on stderr.
  EXPECT_NE(r.err.find("task 1/2 rte: requests 12/12"), std::string::npos) << r.err;

  std::ifstream in(tmp / "s.jsonl");
  std::vector<nlohmann::json> lines;
  for (std::string l; std::getline(in, l);) lines.push_back(nlohmann::json::parse(l));
  ASSERT_EQ(lines.size(), 18u);
  int64_t right = 0;
  for (size_t d = 0; d < 6; ++d) {  // rte: acc from the logged log-likelihoods
    const auto &a = lines[2 * d], &b = lines[2 * d + 1];
    EXPECT_EQ(a["doc"], d);
    EXPECT_EQ(a["continuation"], " True");
    EXPECT_LT(a["loglikelihood"].get<double>(), 0);
    right += (a["loglikelihood"] >= b["loglikelihood"] ? 0 : 1) == a["gold"].get<int64_t>();
  }
  EXPECT_NEAR(acc, right / 6.0, 1e-12);
  EXPECT_EQ(lines[12]["task"], "lambada_openai");
  EXPECT_TRUE(lines[12]["is_greedy"].is_boolean());

  // The log is not replaced unless asked: refused before any scoring, the file left as it was.
  const std::string log = test::slurp(tmp / "s.jsonl");
  const auto again = test::run_cli({"eval", "--model", stories().string(), "--tasks", "rte", "--limit", "2",
                                    "--log-samples", (tmp / "s.jsonl").string()}, test::with_data_dir());
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("already exists"), std::string::npos) << again.err;
  EXPECT_EQ(again.err.find("requests"), std::string::npos) << "refused before scoring:\n" << again.err;
  EXPECT_TRUE(test::slurp(tmp / "s.jsonl") == log);
  const auto replaced = test::run_cli({"eval", "--model", stories().string(), "--tasks", "rte", "--limit", "2",
                                       "--log-samples", (tmp / "s.jsonl").string(), "--overwrite"},
                                      test::with_data_dir());
  EXPECT_EQ(replaced.exit_code, 0) << replaced.err;
  const std::string relog = test::slurp(tmp / "s.jsonl");
  EXPECT_EQ(std::count(relog.begin(), relog.end(), '\n'), 4);
}

TEST(ZeroShotCli, TableWithPerplexityInOneRun) {
  ALPS_REQUIRE_DATA("eval");
  const fs::path sample = test::committed_data_dir() / "text" / "tinystories" / "tinystories_sample.txt";
  const auto r = test::run_cli({"eval", "--model", stories().string(), "--ppl", sample.string(), "--seqlen", "128",
                                "--tasks", "winogrande", "--limit", "4"}, test::with_data_dir());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("perplexity"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("|Tasks     |Version|Filter|n-shot|  Metric  |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("|winogrande|      1|none  |     0|acc       |↑  |"), std::string::npos) << r.out;
}

TEST(ZeroShotCli, OwnTaskFilesAndErrors) {
  test::TempDir tmp;
  fs::create_directories(tmp / "data" / "rte");
  std::ofstream(tmp / "data" / "rte" / "rte_validation.jsonl.gz")  // a plain file is read even under a .gz name
      << R"({"sentence1":"The cat sat.","sentence2":"A cat sat.","label":0})" << "\n";
  std::ofstream(tmp / "mine.jsonl") << R"({"sentence1":"a","sentence2":"b","label":1})" << "\n"
                                    << R"({"sentence1":"a","label":1})" << "\n";
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {"eval", "--model", stories().string(), "--json"};
    a.insert(a.end(), extra.begin(), extra.end());
    return test::run_cli(a);
  };
  const auto own = run({"--tasks", "rte", "--task-data", (tmp / "data").string()});
  ASSERT_EQ(own.exit_code, 0) << own.err;
  EXPECT_EQ(nlohmann::json::parse(own.out)["tasks"][0]["docs"], 1);

  const auto bad_row = run({"--tasks", "rte", "--task-file", "rte=" + (tmp / "mine.jsonl").string()});
  EXPECT_EQ(bad_row.exit_code, 1);
  EXPECT_NE(bad_row.err.find("mine.jsonl row 1 (line 2): field \"sentence2\": missing"), std::string::npos)
      << bad_row.err;

  const auto unknown = run({"--tasks", "rte,hellaswagg"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("--tasks: unknown task 'hellaswagg'"), std::string::npos) << unknown.err;
  // Names of other flags are checked as the command line is read, the message naming the flag.
  for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{{"--device", "gpu"},
                                                                                     {"--dtype", "fp8"}}) {
    const auto bad = run({"--tasks", "rte", flag, value});
    EXPECT_EQ(bad.exit_code, 2) << bad.err;
    EXPECT_NE(bad.err.find(flag + ": unknown " + flag.substr(2) + " '" + value + "'"), std::string::npos) << bad.err;
  }
  for (const char* flag : {"--add-bos", "--limit=3"}) {  // flags that only change task scoring, without tasks
    const auto alone = run({"--ppl", "tinystories", flag});
    EXPECT_EQ(alone.exit_code, 2) << flag;
    EXPECT_NE(alone.err.find("needs --tasks"), std::string::npos) << alone.err;
  }
  const auto empty = run({"--tasks", ""});  // not the default perplexity run in its place
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find("--tasks"), std::string::npos) << empty.err;

  const auto missing = run({"--tasks", "piqa", "--task-data", tmp.path().string()});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("piqa_validation.jsonl.gz does not exist"), std::string::npos) << missing.err;
}

// Every file is read and checked before anything is scored: a bad row of the last task (or a dataset that is not
// text) fails at once, not after the work before it; and flags that would be ignored are refused.
TEST(ZeroShotCli, BadInputAnywhereFailsBeforeAnyScoring) {
  ALPS_REQUIRE_DATA("eval/rte");
  test::TempDir tmp;
  std::ofstream(tmp / "piqa.jsonl") << R"({"goal":"g","sol1":"a","sol2":"b","label":0})" << "\n\n"
                                    << R"({"goal":"g","sol1":"a","sol2":"b"})" << "\n";
  std::ofstream(tmp / "lambada.jsonl") << R"({"text":"  dog"})" << "\n";
  std::ofstream(tmp / "notext.jsonl") << R"({"title":"no text field"})" << "\n";
  auto run = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = {"eval", "--model", stories().string(), "--json",
                                  "--log-samples", (tmp / "s.jsonl").string()};
    a.insert(a.end(), extra.begin(), extra.end());
    return test::run_cli(a, test::with_data_dir());
  };
  auto expect_early = [&](const test::CliResult& r, const std::string& message) {
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << "expected \"" << message << "\" in:\n" << r.err;
    EXPECT_EQ(r.err.find("acc "), std::string::npos) << "a task was scored before the error:\n" << r.err;
    EXPECT_EQ(r.err.find("ppl "), std::string::npos) << "a dataset was scored before the error:\n" << r.err;
    EXPECT_FALSE(fs::exists(tmp / "s.jsonl"));
  };
  expect_early(run({"--ppl", "tinystories", "--max-windows", "2", "--tasks", "rte,piqa", "--task-file",
                    "piqa=" + (tmp / "piqa.jsonl").string()}),
               "piqa.jsonl row 1 (line 3): field \"label\": missing");
  expect_early(run({"--tasks", "rte,lambada_openai", "--limit", "3", "--task-file",
                    "lambada_openai=" + (tmp / "lambada.jsonl").string()}),
               "lambada.jsonl row 0 request 0: the context encodes to no tokens");
  expect_early(run({"--ppl", "tinystories," + (tmp / "notext.jsonl").string(), "--max-windows", "2", "--tasks", "rte",
                    "--limit", "2"}),
               "notext.jsonl: record 1 has no string field \"text\"");

  auto expect_usage = [&](const test::CliResult& r, const std::string& message) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(message), std::string::npos) << "expected \"" << message << "\" in:\n" << r.err;
  };
  expect_usage(run({"--tasks", "lambada_openai", "--bootstrap-iters", "1"}), "--bootstrap-iters");
  expect_usage(test::run_cli({"eval", "--model", stories().string(), "--ppl", "tinystories", "--bootstrap-iters", "0"},
                             test::with_data_dir()),
               "--bootstrap-iters needs --tasks");
  expect_usage(run({"--tasks", "rte", "--seqlen", "16"}), "--seqlen sets perplexity windows");
  expect_usage(run({"--tasks", "rte", "--max-windows", "3"}), "--max-windows sets perplexity windows");
  expect_usage(test::run_cli({"eval", "--model", stories().string(), "--tasks", "rte", "--log-samples", ""},
                             test::with_data_dir()),
               "--log-samples expects a file name");
  fs::create_directories(tmp / "adir");
  const auto dir = run({"--tasks", "rte", "--task-file", "rte=" + (tmp / "adir").string()});
  EXPECT_EQ(dir.exit_code, 1);
  EXPECT_NE(dir.err.find("is a directory, expected a file"), std::string::npos) << dir.err;
}

// Two PIQA solutions are longer than stories260K's 512 positions: an error naming the row, as lm-eval stops too.
TEST(ZeroShotCli, RequestLongerThanTheModelIsAnErrorNamingTheRow) {
  ALPS_REQUIRE_DATA("eval/piqa");
  const auto too_long =
      test::run_cli({"eval", "--model", stories().string(), "--json", "--tasks", "piqa"}, test::with_data_dir());
  EXPECT_EQ(too_long.exit_code, 1);
  EXPECT_NE(too_long.err.find("row 314 request 0: the continuation is"), std::string::npos) << too_long.err;
}

TEST(ZeroShotCli, PruneEvalTakesTaskNames) {
  ALPS_REQUIRE_DATA("eval");
  test::TempDir tmp;
  const std::string calib = (test::committed_data_dir() / "text/tinystories/tinystories.train.first200.txt").string();
  const auto r = test::run_cli({"prune", "--model", stories().string(), "--out", (tmp / "out").string(), "--calib",
                                calib, "--nsamples", "4", "--seqlen", "64", "--method", "magnitude", "--sparsity",
                                "0.5", "--device", "cpu", "--eval", "rte", "--json"}, test::with_data_dir());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  ASSERT_EQ(report["eval"].size(), 1u);
  EXPECT_EQ(report["eval"][0]["task"], "rte");
  EXPECT_EQ(report["eval"][0]["docs"], 277);
  EXPECT_GE(report["eval"][0]["metrics"]["acc"].get<double>(), 0.0);

  const auto bad = test::run_cli({"prune", "--model", stories().string(), "--out", (tmp / "bad").string(), "--calib",
                                  calib, "--seqlen", "64", "--sparsity", "0.5", "--eval", "rtee"},
                                 test::with_data_dir());
  EXPECT_EQ(bad.exit_code, 2);  // an unknown name is a usage error, through `prune --eval` as through `eval`
  EXPECT_NE(bad.err.find("nor a zero-shot task (lambada_openai, piqa"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("did you mean 'rte'?"), std::string::npos) << bad.err;
  EXPECT_FALSE(fs::exists(tmp / "bad"));

  // A bad row of a task file stops the run before any pruning, not after it.
  fs::create_directories(tmp / "data/eval/rte");
  std::ofstream(tmp / "data/eval/rte/rte_validation.jsonl.gz") << R"({"sentence1":"a","label":1})" << "\n";
  const auto bad_row = test::run_cli({"prune", "--model", stories().string(), "--out", (tmp / "bad").string(),
                                      "--calib", calib, "--nsamples", "4", "--seqlen", "64", "--sparsity", "0.5",
                                      "--eval", "rte", "--data-dir", (tmp / "data").string()});
  EXPECT_EQ(bad_row.exit_code, 1);
  EXPECT_NE(bad_row.err.find("rte_validation.jsonl.gz row 0 (line 1): field \"sentence2\": missing"),
            std::string::npos)
      << bad_row.err;
  EXPECT_EQ(bad_row.err.find("block 1/"), std::string::npos) << "pruned before failing:\n" << bad_row.err;
  EXPECT_FALSE(fs::exists(tmp / "bad"));
}

}  // namespace
}  // namespace alps
