// End-to-end `alps prune` on the real stories260K checkpoint with TinyStories calibration text.
#include <ATen/ATen.h>
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "alps/io/safetensors.h"
#include "alps/model/causal_lm.h"
#include "alps/prune/pattern.h"
#include "checkpoint_names.h"
#include "support.h"

namespace alps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path model_dir() { return test::committed_data_dir() / "models/stories260K-hf"; }
std::string calib() {
  return (test::committed_data_dir() / "text/tinystories/tinystories.train.first200.txt").string();
}

std::vector<std::string> prune_args(const fs::path& out, std::vector<std::string> extra) {
  std::vector<std::string> a = {"prune",      "--model", model_dir().string(), "--out", out.string(), "--calib",
                                calib(),      "--nsamples", "8",   "--seqlen", "128",      "--device", "cpu",
                                "--json"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

using test::slurp;

// Zeros a method must leave in a [rows, cols] layer at unstructured sparsity s (docs/algorithms.md).
int64_t expected_zeros(const std::string& method, double s, int64_t rows, int64_t cols) {
  if (method == "wanda" || method == "dsnot") return rows * static_cast<int64_t>(std::floor(s * cols));
  if (method == "sparsegpt") {  // one threshold per block of 128 columns
    int64_t z = 0;
    for (int64_t c = 0; c < cols; c += 128)
      z += static_cast<int64_t>(std::floor(s * rows * std::min<int64_t>(128, cols - c)));
    return z;
  }
  return static_cast<int64_t>(std::floor(s * rows * cols));
}

class PruneMethods : public ::testing::TestWithParam<std::string> {};

TEST_P(PruneMethods, ExactSparsityInEveryLayerAndTheCheckpointReloads) {
  const std::string method = GetParam();
  const auto dense = model::CausalLM::load(model_dir());
  for (const std::string pattern : {"0.7", "2:4"}) {
    SCOPED_TRACE(method + " " + pattern);
    test::TempDir dir;
    const fs::path out = dir / "pruned";
    const bool nm = pattern == "2:4";
    const auto r = test::run_cli(prune_args(out, {"--method", method, nm ? "--pattern" : "--sparsity", pattern}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const json report = json::parse(r.out);
    EXPECT_TRUE(report["complete"].get<bool>());
    EXPECT_EQ(report["layers"].size(), 35u);  // 5 blocks x 7 linears
    EXPECT_EQ(json::parse(slurp(out / "alps-report.json"))["layers"], report["layers"]);
    EXPECT_FALSE(report["software"]["source_revision"].get<std::string>().empty());  // what computed it

    const auto pruned = model::CausalLM::load(out);
    for (const auto& layer : report["layers"]) {
      const std::string name = layer["name"].get<std::string>() + ".weight";
      const at::Tensor W = pruned.tensor(name);
      const at::Tensor W0 = dense.tensor(name);
      const int64_t rows = W.size(0), cols = W.size(1);
      const int64_t zeros = W.eq(0).sum().item<int64_t>();
      if (nm) {
        const at::Tensor kept = W.ne(0).reshape({rows, cols / 4, 4}).sum(-1);
        EXPECT_EQ(kept.max().item<int64_t>(), 2) << name;
        EXPECT_EQ(zeros, rows * cols / 2) << name;
      } else {
        EXPECT_EQ(zeros, expected_zeros(method, 0.7, rows, cols)) << name;
      }
      EXPECT_NEAR(layer["sparsity"].get<double>(), static_cast<double>(zeros) / (rows * cols), 1e-12) << name;
      if (method == "magnitude") {  // it reads no calibration data: nothing to measure an error on
        EXPECT_TRUE(layer["rel_error"].is_null()) << name;
      } else {
        EXPECT_GE(layer["rel_error"].get<double>(), 0) << name;
        EXPECT_LT(layer["rel_error"].get<double>(), 1.5) << name;
      }
      // Kept weights: unchanged for methods that only choose a mask, refit by the others.
      if (method == "magnitude" || method == "wanda")
        EXPECT_TRUE(W.eq(0).logical_or(W.eq(W0)).all().item<bool>()) << name;
      if (method == "alps") {
        EXPECT_GT(layer["iterations"].get<int64_t>(), 0) << name;
        EXPECT_GT(layer["rho"].get<double>(), 0) << name;
      }
    }
    // Everything that is not a pruned linear is byte-for-byte the input's.
    for (const auto& name : test::checkpoint_tensor_names(dense.dir())) {
      if (name.find("_proj.weight") != std::string::npos) continue;
      EXPECT_TRUE(pruned.tensor(name).equal(dense.tensor(name))) << name;
    }
    EXPECT_TRUE(at::isfinite(pruned.forward(at::arange(1, 20).view({1, -1}))).all().item<bool>());
  }
}

INSTANTIATE_TEST_SUITE_P(AllMethods, PruneMethods,
                         ::testing::Values("magnitude", "wanda", "sparsegpt", "dsnot", "alps"));

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

// A whole run on the GPU, with its measured device peak against the estimate printed before it. Magnitude pruning
// keeps the same weights on either device; with a refit, which reads the statistics, the errors of those weights
// differ only by the rounding of G: 1024 fp32 products summed in another order move each entry by at most
// ~1024 u = 6e-5 of sqrt(G_ii G_jj), and the error ratio by about twice that; 1e-3 leaves a margin.
TEST(PruneCli, PrunesOnTheGpu_CUDA) {
  test::TempDir dir;
  const std::vector<std::string> recipe = {"--method", "magnitude", "--sparsity", "0.5", "--json", "--device"};
  auto with = [&](const char* device) {
    std::vector<std::string> a = recipe;
    a.push_back(device);
    return a;
  };
  const auto gpu = test::run_cli(prune_args(dir / "gpu", with("cuda")));
  ASSERT_EQ(gpu.exit_code, 0) << gpu.err;
  const auto cpu = test::run_cli(prune_args(dir / "cpu", with("cpu")));
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  const auto g = nlohmann::json::parse(gpu.out);
  const auto& est = g.at("extra").at("memory_estimate");
  EXPECT_GT(est.at("device_peak_gib_measured").get<double>(), 0.0);
  EXPECT_LE(est.at("device_peak_gib_measured").get<double>(), est.at("device_total_gib_at_most").get<double>());
  EXPECT_TRUE(test::slurp(dir / "gpu/model.safetensors") == test::slurp(dir / "cpu/model.safetensors"));
  auto refit = [&](const char* device) {
    std::vector<std::string> a = with(device);
    a.insert(a.end(), {"--refine", "pcg"});
    const auto r = test::run_cli(prune_args(dir / (std::string("refit-") + device), a));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  const auto gr = refit("cuda"), cr = refit("cpu");
  ASSERT_EQ(gr.at("layers").size(), cr.at("layers").size());
  for (size_t i = 0; i < cr.at("layers").size(); ++i) {
    const double want = cr["layers"][i].at("rel_error").get<double>();
    EXPECT_NEAR(gr["layers"][i].at("rel_error").get<double>(), want, 1e-3 * want) << cr["layers"][i].at("name");
  }
}

// Solves running concurrently on streams of their own change when kernels run, not what they compute: ALPS (whose
// support path amplifies any rounding difference) gives the same checkpoint, byte for byte, one linear at a time and
// three at once, and the report names what ran.
TEST(PruneCli, ConcurrentSolvesGiveTheSameCheckpoint_CUDA) {
  test::TempDir dir;
  auto run = [&](const char* streams) {
    const auto r = test::run_cli(prune_args(dir / streams, {"--sparsity", "0.6", "--device", "cuda", "--solve-streams",
                                                            streams}));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out);
  };
  EXPECT_EQ(run("1").at("recipe").at("solve_streams"), 1);
  EXPECT_EQ(run("3").at("recipe").at("solve_streams"), 3);
  EXPECT_TRUE(test::slurp(dir / "1/model.safetensors") == test::slurp(dir / "3/model.safetensors"));
}

// The run of `args` stopped after 2 blocks in dir/resumed and resumed there gives dir/whole's checkpoint, byte for
// byte; returns the resumed run's report.
json stopped_and_resumed(const test::TempDir& dir, const std::vector<std::string>& args) {
  std::vector<std::string> stop = args;
  stop.insert(stop.end(), {"--stop-after", "2"});
  EXPECT_EQ(test::run_cli(prune_args(dir / "resumed", stop)).exit_code, 0);
  std::vector<std::string> resume = args;
  resume.push_back("--resume");
  const auto resumed = test::run_cli(prune_args(dir / "resumed", resume));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(test::slurp(dir / "whole/model.safetensors") == test::slurp(dir / "resumed/model.safetensors"));
  return resumed.exit_code == 0 ? json::parse(resumed.out) : json::object();
}

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
  EXPECT_EQ(stopped_and_resumed(dir, owl).at("extra").at("sparsity_profile"), profile);
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
  stopped_and_resumed(dir, owl);
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

// Magnitude pruning reads the weights alone: no calibration text is read (a missing one is no error, and the run
// says that it reads none), no activations are held, and the report has no errors it could not measure.
TEST(PruneCli, MagnitudeReadsNoCalibrationData) {
  test::TempDir dir;
  auto args = prune_args(dir / "out", {"--method", "magnitude", "--sparsity", "0.5"});
  args[std::find(args.begin(), args.end(), "--calib") - args.begin() + 1] = (dir / "missing.txt").string();
  args.erase(std::find(args.begin(), args.end(), "--json"));
  const auto r = test::run_cli(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no method of this run reads calibration data"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("not measured"), std::string::npos) << r.out;
  const json report = json::parse(slurp(dir / "out/alps-report.json"));
  EXPECT_EQ(report["extra"]["calibration"]["windows"], 0);
  EXPECT_EQ(report["extra"]["memory_estimate"]["host_activations_gib"], 0.0);
  EXPECT_FALSE(report["phase_seconds"].contains("statistics"));
  // A refit reads the statistics: magnitude with one needs the calibration text again.
  args[std::find(args.begin(), args.end(), "--out") - args.begin() + 1] = (dir / "refit").string();
  args.insert(args.end(), {"--refine", "pcg"});
  const auto refit = test::run_cli(args);
  EXPECT_EQ(refit.exit_code, 1);
  EXPECT_NE(refit.err.find("missing.txt"), std::string::npos) << refit.err;
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
