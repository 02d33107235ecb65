// End-to-end `alps prune` of every method: exact sparsity, a checkpoint that reloads, on the CPU and the GPU.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "alps/io/safetensors.h"
#include "alps/model/causal_lm.h"
#include "alps/prune/pattern.h"
#include "checkpoint_names.h"
#include "prune_cli_support.h"
#include "support.h"

namespace alps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::slurp;
using test_prune::model_dir;
using test_prune::prune_args;

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
      if (method == "magnitude" || method == "wanda" || method == "ria")
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

// RIA's channel permutation: every linear is 2:4 in the order channel_orders.safetensors gives for it, keeps the
// input's weights in the model's order (the same function), and a run stopped after 2 blocks and resumed writes the
// same orders and weights.
TEST(PruneCli, RiaChannelPermutationWritesItsOrdersAndResumes) {
  const auto dense = model::CausalLM::load(model_dir());
  test::TempDir dir;
  const std::vector<std::string> args = {"--method", "ria", "--pattern", "2:4", "--option", "permutation=lsa"};
  const auto r = test::run_cli(prune_args(dir / "whole", args));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json report = json::parse(r.out);
  EXPECT_EQ(report["extra"]["channel_orders"]["linears"], 35);
  const auto pruned = model::CausalLM::load(dir / "whole");
  io::SafetensorsFile orders(dir / "whole" / "channel_orders.safetensors");
  ASSERT_EQ(orders.entries().size(), 35u);
  for (const auto& layer : report["layers"]) {
    const std::string name = layer["name"].get<std::string>() + ".weight";
    const at::Tensor W = pruned.tensor(name), order = orders.tensor(name);
    EXPECT_TRUE(std::get<0>(order.sort()).equal(at::arange(W.size(1), at::kLong))) << name;
    EXPECT_TRUE(prune::satisfies(W.index_select(1, order), prune::Pattern::n_m(2, 4))) << name;
    EXPECT_EQ(W.eq(0).sum().item<int64_t>(), W.numel() / 2) << name;
    EXPECT_TRUE(W.eq(0).logical_or(W.eq(dense.tensor(name))).all().item<bool>()) << name;
    EXPECT_TRUE(layer.contains("kept_score_gain")) << name;
  }
  test_prune::stopped_and_resumed(dir.path(), args);
  EXPECT_TRUE(slurp(dir / "whole/channel_orders.safetensors") == slurp(dir / "resumed/channel_orders.safetensors"));
}

INSTANTIATE_TEST_SUITE_P(AllMethods, PruneMethods,
                         ::testing::Values("magnitude", "wanda", "sparsegpt", "dsnot", "alps", "ria"));

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

}  // namespace
}  // namespace alps
