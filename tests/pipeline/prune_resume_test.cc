// End-to-end `alps prune` runs stopped, interrupted or failed, and resumed; the layer problems a run dumps.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "alps/io/safetensors.h"
#include "prune_cli_support.h"
#include "support.h"

namespace alps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::slurp;
using test_prune::model_dir;
using test_prune::prune_args;

TEST(PruneCli, ResumeAfterInterruptionGivesByteIdenticalTensors) {
  test::TempDir dir;
  const std::vector<std::string> recipe = {"--method", "alps", "--sparsity", "0.6", "--batch-size", "3"};
  auto whole = prune_args(dir / "whole", recipe);
  ASSERT_EQ(test::run_cli(whole).exit_code, 0);

  auto part = prune_args(dir / "part", recipe);
  part.insert(part.end(), {"--stop-after", "2"});
  const auto first = test::run_cli(part);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_FALSE(json::parse(first.out)["complete"].get<bool>());
  EXPECT_FALSE(fs::exists(dir / "part/config.json")) << "an unfinished output must not look like a checkpoint";
  EXPECT_FALSE(fs::exists(dir / "part/model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "part/alps-report.json"));

  // A second interruption, then the rest.
  part.back() = "1";
  part.push_back("--resume");
  ASSERT_EQ(test::run_cli(part).exit_code, 0);
  part.erase(part.end() - 3, part.end() - 1);  // drop --stop-after 1
  const auto last = test::run_cli(part);
  ASSERT_EQ(last.exit_code, 0) << last.err;
  const json report = json::parse(last.out);
  EXPECT_TRUE(report["complete"].get<bool>());
  EXPECT_EQ(report["layers"].size(), 35u);
  EXPECT_EQ(slurp(dir / "part/model.safetensors"), slurp(dir / "whole/model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "part/.alps-state")) << "resume state must not outlive the run";
}

TEST(PruneCli, ResumeRefusesADifferentRecipe) {
  test::TempDir dir;
  auto part = prune_args(dir / "o", {"--method", "wanda", "--sparsity", "0.5", "--stop-after", "1"});
  ASSERT_EQ(test::run_cli(part).exit_code, 0);
  const auto r = test::run_cli(prune_args(dir / "o", {"--method", "wanda", "--sparsity", "0.6", "--resume"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--sparsity/--pattern (recipe \"pattern\"): the interrupted run used \"0.5\", this command "
                       "gives \"0.6\""),
            std::string::npos)
      << r.err;
}

// Where and in what batches the passes run changes rounding only: a run stopped (say, out of GPU memory) continues on
// another device, with smaller batches, fewer concurrent solves or with the statistics on the host.
TEST(PruneCli, ResumeAcceptsAnotherDeviceBatchSizeAndStatisticsDevice) {
  test::TempDir dir;
  ASSERT_EQ(
      test::run_cli(prune_args(dir / "o", {"--sparsity", "0.5", "--stop-after", "1", "--device", "cpu"})).exit_code, 0);
  const auto r = test::run_cli(prune_args(dir / "o", {"--sparsity", "0.5", "--resume", "--device", "auto",
                                                      "--batch-size", "1", "--stats-device", "cpu", "--json",
                                                      "--solve-streams", "3"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto report = nlohmann::json::parse(r.out);
  EXPECT_TRUE(report.at("complete").get<bool>());
  EXPECT_EQ(report.at("recipe").at("stats_device"), "cpu");
  EXPECT_EQ(report.at("recipe").at("batch_size"), 1);
  EXPECT_GT(report.at("extra").at("memory_estimate").at("device_total_gib_at_most").get<double>(), 0.0);
  EXPECT_EQ(report.at("extra").at("memory_estimate").at("device_statistics_gib_at_most").get<double>(), 0.0);
}

TEST(PruneCli, DumpsProblems) {
  test::TempDir dir;
  const auto r = test::run_cli(prune_args(dir / "out", {"--method", "wanda", "--sparsity", "0.5",
                                                        "--dump-problems", (dir / "problems").string()}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "out/model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "out/tokenizer.model"));
  const io::SafetensorsFile p(dir / "problems/model.layers.2.mlp.down_proj.safetensors");
  EXPECT_EQ(p.entry("weight").shape, (std::vector<int64_t>{64, 172}));
  EXPECT_EQ(p.entry("gram").shape, (std::vector<int64_t>{172, 172}));
  EXPECT_EQ(p.metadata().at("tokens"), "1024");  // 8 windows x 128 tokens
  // A second dump into the same directory would overwrite those files: refused before any work.
  const auto again = test::run_cli(prune_args(dir / "out2", {"--method", "wanda", "--sparsity", "0.5",
                                                             "--dump-problems", (dir / "problems").string()}));
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("already holds model.layers.0."), std::string::npos) << again.err;
  EXPECT_FALSE(fs::exists(dir / "out2"));
  // Magnitude pruning reads no calibration data, so it has no problems to write.
  const auto none = test::run_cli(prune_args(dir / "out3", {"--method", "magnitude", "--sparsity", "0.5",
                                                            "--dump-problems", (dir / "none").string()}));
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("--dump-problems writes layer problems"), std::string::npos) << none.err;
}

// A resumed run finds the problem files its interrupted run wrote: the same command continues.
TEST(PruneCli, DumpProblemsResumes) {
  test::TempDir dir;
  const std::vector<std::string> flags = {"--method", "wanda", "--sparsity", "0.5", "--dump-problems",
                                          (dir / "problems").string()};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> f = flags;
    f.insert(f.end(), extra.begin(), extra.end());
    return prune_args(dir / "out", f);
  };
  ASSERT_EQ(test::run_cli(with({"--stop-after", "2"})).exit_code, 0);
  EXPECT_TRUE(fs::exists(dir / "problems/model.layers.1.mlp.down_proj.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "problems/model.layers.2.mlp.down_proj.safetensors"));
  const auto r = test::run_cli(with({"--resume"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "problems/model.layers.4.mlp.down_proj.safetensors"));
}

// An evaluation that fails after the pruning (here the final norm overflows the forward pass) says that every block
// is saved and how to write the checkpoint; --resume without --eval then does.
TEST(PruneCli, AFailedEvaluationKeepsThePrunedBlocks) {
  test::TempDir dir;
  const fs::path model = dir / "model";
  fs::copy(model_dir(), model);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  {
    io::SafetensorsFile f(model_dir() / "model.safetensors");
    for (const auto& e : f.entries())
      tensors.emplace_back(e.name, e.name == "model.norm.weight" ? at::full_like(f.tensor(e.name), 3e38)
                                                                  : f.tensor(e.name).clone());
  }
  io::save_safetensors(model / "model.safetensors", tensors, {}, io::ExistingFile::kReplace);
  std::vector<std::string> args = prune_args(dir / "out", {"--method", "magnitude", "--sparsity", "0.5"});
  args[2] = model.string();  // --model
  std::vector<std::string> with_eval = args;
  for (const char* a : {"--eval", "tinystories", "--eval-max-windows", "1", "--eval-seqlen", "64"})
    with_eval.push_back(a);
  auto r = test::run_cli(with_eval);  // the committed data has TinyStories: no optional data needed
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("every block is pruned and saved"), std::string::npos) << r.err;
  args.push_back("--resume");
  r = test::run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(dir / "out/model.safetensors"));
}

// Ctrl-C (here SIGINT raised after block 1 was saved) says how far the run got and how to go on, and the process
// ends as the signal ends it; the command it names continues the run.
TEST(PruneCli, AnInterruptedRunSaysHowToContinue) {
  test::TempDir dir;
  const auto args = prune_args(dir / "out", {"--method", "wanda", "--sparsity", "0.5"});
  const auto r = test::run_cli(args, {{}, {"ALPS_TEST_FAULT=interrupt:state-json-saved@2"}});
  EXPECT_TRUE(r.exit_code == 130 || r.exit_code == -1) << r.exit_code;  // the shell's 128 + SIGINT, or the signal
  EXPECT_NE(r.err.find("alps: interrupted after block 1/5; the same command with --resume continues"),
            std::string::npos)
      << r.err;
  auto resume = args;
  resume.push_back("--resume");
  const auto rest = test::run_cli(resume);
  EXPECT_EQ(rest.exit_code, 0) << rest.err;
  EXPECT_NE(rest.err.find("resuming at block 2/5"), std::string::npos) << rest.err;
}

}  // namespace
}  // namespace alps
