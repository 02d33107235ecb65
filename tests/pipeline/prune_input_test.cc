// End-to-end `alps prune` inputs: refused before any work, flags over a recipe, defaults taken from the model.
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
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
using test_prune::model_dir;
using test_prune::prune_args;

TEST(PruneCli, BadInputFailsClearlyBeforeAnyWork) {
  test::TempDir dir;
  struct Case {
    std::vector<std::string> args;
    std::string message;
    int exit_code;  // 2: the command line cannot work; 1: the inputs do not fit it
  };
  const std::vector<Case> cases = {
      {{"--sparsity", "1.5"}, "--sparsity", 2},
      {{"--sparsity", "-0.1"}, "--sparsity", 2},
      {{"--pattern", "0:4"}, "0:M would prune every weight", 2},
      {{"--pattern", "2:4", "--method", "nonsense"}, "--method", 2},
      {{"--sparsity", "0.5", "--nsamples", "0"}, "--nsamples", 2},
      {{"--sparsity", "0.5", "--stop-after", "-2"}, "--stop-after", 2},
      {{"--sparsity", "0.5", "--refine", "cg"}, "--refine", 2},
      {{"--sparsity", "0.5", "--stats-device", "gpu"}, "--stats-device", 2},
      {{"--sparsity", "0.5", "--solve-streams", "-1"}, "--solve-streams", 2},
      {{"--pattern", "2:4", "--sparsity-profile", "owl"}, "--owl-lambda: lambda 0.08 would change no block's count", 2},
      {{"--pattern", "2:4", "--sparsity-profile", "owl", "--owl-lambda", "2"}, "--owl-lambda: lambda 2 would let", 2},
      {{"--sparsity", "0.7", "--sparsity-profile", "owl", "--owl-lambda", "0.35"}, "--owl-lambda", 2},
      {{"--sparsity", "0.7", "--sparsity-profile", "owl", "--owl-m", "0"}, "--owl-m", 2},
      {{"--sparsity", "0.7", "--sparsity-profile", "owl-ish"}, "--sparsity-profile", 2},
      {{"--sparsity", "0.5", "--device", "cuda:7"}, "cuda:7", 1},
      {{"--sparsity", "0.5", "--resume", "--overwrite"}, "excludes", 2},

      {{"--sparsity", "0.5", "--option", "rho0=0.1", "--method", "wanda"}, "unknown option \"rho0\"", 2},
      {{"--sparsity", "0.5", "--option", "rho0=-1"}, "rho0 > 0", 2},
      {{"--sparsity", "0.5", "--device", "gpu"}, "--device: unknown device 'gpu'", 2},
      {{"--sparsity", "0.5", "--dtype", "fp8"}, "--dtype: unknown dtype 'fp8'", 2},
      {{"--sparsity", "0.5", "--seed", "-1"}, "--seed", 2},
      {{"--sparsity", "0.5", "--seed", "18446744073709551616"}, "--seed", 2},
      {{"--sparsity", "0.5", "--eval", ","}, "--eval", 2},
      {{"--sparsity", "0.5", "--eval", "nosuch.txt"}, "unknown dataset 'nosuch.txt'", 2},
      {{"--sparsity", "0.5", "--eval", "arc-easy"}, "(did you mean 'arc_easy'?)", 2},
      {{"--sparsity", "0.5", "--method", "sparsgpt"}, "(did you mean 'sparsegpt'?)", 2},
      // A fraction is not an N:M pattern, and a percentage is not a fraction.
      {{"--pattern", "0.7"}, "(unstructured sparsity is --sparsity 0.7)", 2},
      {{"--sparsity", "70"}, "(for 70% write --sparsity 0.7)", 2},
      // A flag missing for the whole run is named as the flag, not as the first layer that lacks it.
      {{"--method", "wanda"}, "no sparsity or pattern given: pass --sparsity S", 2},
      // A text too short for one evaluation window would stop the run after all its pruning.
      {{"--sparsity", "0.5", "--eval", (dir / "short.txt").string()}, "fewer than one window of 512", 1},
      {{"--sparsity", "0.5", "--calib", (dir / "missing.txt").string()}, "missing.txt", 1},
      // An output the system cannot create names the flag.
      {{"--sparsity", "0.5", "--out", "/proc/alps-test/pruned"}, "--out /proc/alps-test/pruned: cannot create", 1},
      {{"--sparsity", "0.5", "--out", "/proc/pruned"}, "--out /proc/pruned: cannot create /proc/pruned", 1},
      {{"--sparsity", "0.5", "--calib", "c5"},
       "--calib c5: neither a calibration dataset (c4) nor a file (did you mean 'c4'?)",
       2},
      {{"--sparsity", "0.5", "--seqlen", "4096"}, "exceeds the model's 512 positions", 1},
  };
  std::ofstream(dir / "short.txt") << "Once upon a time.";
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    const auto r = test::run_cli(prune_args(dir / "out", c.args));
    EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("model.layers."), std::string::npos) << "a flag's error names no layer: " << r.err;
    EXPECT_EQ(r.err.find(".cc:"), std::string::npos) << "source locations are for --log-level debug: " << r.err;
    EXPECT_FALSE(fs::exists(dir / "out")) << "nothing may be written before the inputs are validated";
  }
  fs::create_directories(dir / "exists");
  std::ofstream(dir / "exists/keep.txt") << "user data";
  const auto r = test::run_cli(prune_args(dir / "exists", {"--sparsity", "0.5"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("holds files that alps did not write (keep.txt)"), std::string::npos) << r.err;
  EXPECT_TRUE(fs::exists(dir / "exists/keep.txt"));
  // A pattern that one layer's shape cannot take names that layer.
  const auto shape = test::run_cli(prune_args(dir / "out", {"--pattern", "2:5"}));
  EXPECT_EQ(shape.exit_code, 1);
  EXPECT_NE(shape.err.find("model.layers.0.self_attn.q_proj: "), std::string::npos) << shape.err;
  EXPECT_NE(shape.err.find("in % 5"), std::string::npos) << shape.err;
  const auto debug = test::run_cli(prune_args(dir / "out", {"--sparsity", "0.5", "--seqlen", "4096", "--log-level",
                                                            "debug"}));
  EXPECT_NE(debug.err.find("run_plan.cc:"), std::string::npos) << "--log-level debug names the source: " << debug.err;
  const auto usage = test::run_cli({"prune", "--model", model_dir().string()});
  EXPECT_EQ(usage.exit_code, 2) << "missing --out is a usage error";

  // Names alps cannot work with are refused before any work: an empty one, and one without room for the suffix of
  // the working copy alps keeps beside --out until it renames it (which failed only at the very end).
  const auto empty = test::run_cli(prune_args("", {"--sparsity", "0.5"}));
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find("--out: expected a directory name"), std::string::npos) << empty.err;
  const fs::path long_name = dir / std::string(245, 'y');
  const auto too_long = test::run_cli(prune_args(long_name, {"--sparsity", "0.5"}));
  EXPECT_EQ(too_long.exit_code, 2);
  EXPECT_NE(too_long.err.find("its last component is 245 bytes long"), std::string::npos) << too_long.err;
  EXPECT_FALSE(fs::exists(long_name));
  const fs::path longest = dir / std::string(NAME_MAX - 26, 'z');  // the longest name alps takes
  const auto fits = test::run_cli(prune_args(longest, {"--method", "magnitude", "--sparsity", "0.5"}));
  EXPECT_EQ(fits.exit_code, 0) << fits.err;
  EXPECT_TRUE(fs::exists(longest / "model.safetensors"));
}

// A flag that changes the method drops the recipe's constants of the old method, in the rules that keep it too;
// --sparsity 0.50 and a recipe's "sparsity": 0.5 are one recipe, so either continues a run started with the other.
TEST(PruneCli, FlagsOverTheRecipeAsDocumented) {
  test::TempDir dir;
  std::ofstream(dir / "r.json") << R"({"method": "sparsegpt", "sparsity": 0.5, "options": {"blocksize": 32},
      "overrides": [{"match": "*.down_proj", "options": {"blocksize": 4}}]})";
  auto r = test::run_cli(prune_args(dir / "a", {"--config", (dir / "r.json").string(), "--method", "wanda"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  std::ofstream(dir / "m.json") << R"({"method": "magnitude", "sparsity": 0.5})";
  r = test::run_cli(prune_args(dir / "b", {"--config", (dir / "m.json").string(), "--stop-after", "1"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = test::run_cli(prune_args(dir / "b", {"--method", "magnitude", "--sparsity", "0.50", "--resume", "--json"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out).at("recipe").at("pattern"), "0.5");
}

// Dense weights in other formats beside the safetensors (TensorFlow, Flax, GGUF, ...) stay out of the pruned
// checkpoint: a loader preferring them would load the unpruned model.
TEST(PruneCli, DenseWeightsInOtherFormatsAreNotCopied) {
  test::TempDir dir;
  const fs::path model = dir / "model";
  fs::create_directories(model);
  for (const auto& e : fs::directory_iterator(model_dir())) fs::copy_file(e.path(), model / e.path().filename());
  for (const char* name : {"tf_model.h5", "flax_model.msgpack", "model.gguf", "pytorch_model.bin",
                           "tf_model.h5.index.json", "rust_model.ot"})
    std::ofstream(model / name) << "dense";
  std::vector<std::string> args = prune_args(dir / "out", {"--method", "magnitude", "--sparsity", "0.5"});
  args[2] = model.string();  // --model
  const auto r = test::run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (const char* name : {"tf_model.h5", "flax_model.msgpack", "model.gguf", "pytorch_model.bin",
                           "tf_model.h5.index.json", "rust_model.ot"})
    EXPECT_FALSE(fs::exists(dir / "out" / name)) << name;
  EXPECT_TRUE(fs::exists(dir / "out/tokenizer.model"));
  EXPECT_TRUE(fs::exists(dir / "out/config.json"));
}

// The output's parents made by a run that fails before saving anything go with it; --dump-problems must be a
// directory.
TEST(PruneCli, AFailedRunLeavesNoDirectoriesAndDumpProblemsIsADirectory) {
  test::TempDir dir;
  std::ofstream(dir / "short.txt") << "Once upon a time.";
  std::vector<std::string> args = prune_args(dir / "new/a/b", {"--method", "wanda", "--sparsity", "0.5"});
  args[6] = (dir / "short.txt").string();  // --calib
  const auto r = test::run_cli(args);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(fs::exists(dir / "new")) << r.err;
  std::ofstream(dir / "afile") << "x";
  const auto f = test::run_cli(prune_args(dir / "out", {"--method", "wanda", "--sparsity", "0.5",
                                                        "--dump-problems", (dir / "afile").string()}));
  EXPECT_EQ(f.exit_code, 1);
  EXPECT_NE(f.err.find("is a file, expected a directory"), std::string::npos) << f.err;
  EXPECT_FALSE(fs::exists(dir / "out"));
}

// The defaults fit the model: calibration windows of min(2048, the model's positions) tokens, said in the log, and a
// model named as the data directory holds it, whatever the working directory.
TEST(PruneCli, DefaultsFitTheModelAndModelsResolveByName) {
  test::TempDir dir;
  const auto r = test::run_cli({"prune", "--model", "stories260K-hf", "--out", "pruned", "--method", "wanda",
                                "--sparsity", "0.5", "--nsamples", "2", "--json"},
                               {dir.path(), {}});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("calibration windows of 512 tokens, the model's 512 positions"), std::string::npos) << r.err;
  const json report = json::parse(r.out);
  EXPECT_EQ(report["recipe"]["calibration"]["seqlen"], 512) << "the report holds the window used, not 0";
  EXPECT_EQ(report["extra"]["calibration"]["seqlen"], 512);
  EXPECT_EQ(fs::path(report["model"].get<std::string>()), model_dir());
  EXPECT_TRUE(fs::exists(dir / "pruned/model.safetensors"));
  // The same command with the window written out is the same run: it resumes the other.
  const auto part = test::run_cli(prune_args(dir / "r", {"--method", "wanda", "--sparsity", "0.5", "--stop-after", "1",
                                                         "--seqlen", "0"}));
  ASSERT_EQ(part.exit_code, 0) << part.err;
  auto resumed = prune_args(dir / "r", {"--method", "wanda", "--sparsity", "0.5", "--resume"});
  resumed[std::find(resumed.begin(), resumed.end(), "--seqlen") - resumed.begin() + 1] = "512";
  const auto rest = test::run_cli(resumed);
  EXPECT_EQ(rest.exit_code, 0) << rest.err;

  const auto missing = test::run_cli({"prune", "--model", "stories260k", "--out", "x", "--sparsity", "0.5"},
                                     {dir.path(), {}});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("--model stories260k: does not exist, nor is it a model of the data directory"),
            std::string::npos)
      << missing.err;
  EXPECT_NE(missing.err.find("(did you mean 'stories260K-hf'?)"), std::string::npos) << missing.err;
}

TEST(PruneCli, TooFewCalibrationTokensForARefitAreSaidOnce) {
  test::TempDir dir;
  // stories260K's widest input is its MLP's 172 neurons; 2 x 16 = 32 tokens are far too few to refit on, 32 x 128
  // enough, and Wanda refits nothing.
  auto run = [&](const std::string& name, std::vector<std::string> flags) {
    flags.insert(flags.end(), {"--sparsity", "0.5", "--stop-after", "0"});
    const auto r = test::run_cli(prune_args(dir / name, flags));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.err;
  };
  const std::string few = run("few", {"--method", "sparsegpt", "--nsamples", "2", "--seqlen", "16"});
  const std::string said = "calibration: 32 tokens (2 x 16) for sparsegpt's refit of inputs up to 172 wide";
  EXPECT_NE(few.find(said), std::string::npos) << few;
  EXPECT_EQ(few.find(said), few.rfind(said)) << few;
  EXPECT_NE(run("refine", {"--method", "wanda", "--refine", "pcg", "--nsamples", "2", "--seqlen", "16"})
                .find("for --refine pcg's refit"),
            std::string::npos);
  EXPECT_EQ(run("wanda", {"--method", "wanda", "--nsamples", "2", "--seqlen", "16"}).find("calibration: 32 tokens"),
            std::string::npos);
  EXPECT_EQ(run("enough", {"--method", "alps", "--nsamples", "32", "--seqlen", "128"}).find("refit of inputs"),
            std::string::npos);
}

}  // namespace
}  // namespace alps
