// `alps solve-layer` and `alps make-problem` end to end through the built executable.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "alps/prune/pattern.h"
#include "alps/prune/problem.h"
#include "support.h"

namespace alps::prune {
namespace {

using alps::test::run_cli;

std::string make(const alps::test::TempDir& dir, const std::string& file, const std::string& rows,
                 const std::string& cols) {
  const std::string path = (dir / file).string();
  auto r = run_cli({"make-problem", "--out", path, "--rows", rows, "--cols", cols, "--tokens", "400", "--seed", "3",
                    "--name", "model.layers.0.self_attn.q_proj", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);
  EXPECT_EQ(doc["rows"], std::stoi(rows));
  return path;
}

TEST(SolveLayerCli, SolvesRefinesAndWritesTheSolution) {
  alps::test::TempDir dir;
  const std::string problem = make(dir, "p.safetensors", "32", "64");
  const LayerProblem p = load_problem(problem);
  EXPECT_EQ(p.rows(), 32);
  EXPECT_EQ(p.tokens, 400);
  EXPECT_EQ(p.name, "model.layers.0.self_attn.q_proj");

  auto r = run_cli({"solve-layer", "--problem", problem, "--method", "alps", "--sparsity", "0.7", "--refine", "exact",
                    "--device", "cpu", "--out", (dir / "sol.safetensors").string(), "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto doc = nlohmann::json::parse(r.out);  // exactly one JSON document on stdout
  EXPECT_EQ(doc["method"], "alps");
  EXPECT_EQ(doc["pattern"], "0.7");
  EXPECT_NEAR(doc["sparsity"].get<double>(), 0.7, 1.0 / (32 * 64));
  EXPECT_GT(doc["iterations"].get<int>(), 0);
  EXPECT_GT(doc["rho"].get<double>(), 0);
  EXPECT_GE(doc["seconds"].get<double>(), 0);
  EXPECT_GE(doc["refine_seconds"].get<double>(), 0);
  EXPECT_LE(doc["rel_error"].get<double>(), doc["rel_error_before_refine"].get<double>() * (1 + 1e-6));
  // The written solution is the problem form with the pruned weight: its error is what was reported.
  LayerProblem sol = load_problem(dir / "sol.safetensors");
  EXPECT_TRUE(sol.G.equal(p.G));
  EXPECT_TRUE(satisfies(sol.W0, Pattern::unstructured(0.7)));
  EXPECT_NEAR(relative_error(p, sol.W0), doc["rel_error"].get<double>(), 1e-9);

  for (const char* method : {"sparsegpt", "wanda", "dsnot", "magnitude"}) {
    auto m = run_cli({"solve-layer", "--problem", problem, "--method", method, "--pattern", "2:4", "--json"});
    ASSERT_EQ(m.exit_code, 0) << method << ": " << m.err;
    auto d = nlohmann::json::parse(m.out);
    EXPECT_EQ(d["pattern"], "2:4");
    EXPECT_DOUBLE_EQ(d["sparsity"].get<double>(), 0.5);
    EXPECT_FALSE(d.contains("rel_error_before_refine"));
  }
  auto opt = run_cli({"solve-layer", "--problem", problem, "--method", "alps", "--sparsity", "0.5", "--option",
                      "max_iterations=6", "--json"});
  ASSERT_EQ(opt.exit_code, 0) << opt.err;
  EXPECT_EQ(nlohmann::json::parse(opt.out)["iterations"], 6);
}

TEST(SolveLayerCli, BadInputExitsWithAClearMessage) {
  alps::test::TempDir dir;
  const std::string problem = make(dir, "p6.safetensors", "8", "6");
  auto missing = run_cli({"solve-layer", "--problem", (dir / "nope.safetensors").string(), "--method", "wanda",
                          "--sparsity", "0.5"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("nope.safetensors"), std::string::npos) << missing.err;
  auto nm = run_cli({"solve-layer", "--problem", problem, "--method", "sparsegpt", "--pattern", "2:4"});
  EXPECT_EQ(nm.exit_code, 1);
  EXPECT_NE(nm.err.find("2:4 needs in % 4 == 0, got in = 6"), std::string::npos) << nm.err;
  auto big = run_cli({"solve-layer", "--problem", problem, "--method", "alps", "--sparsity", "1.5"});
  EXPECT_EQ(big.exit_code, 1);
  EXPECT_NE(big.err.find("[0, 1)"), std::string::npos) << big.err;
  auto option = run_cli({"solve-layer", "--problem", problem, "--method", "alps", "--sparsity", "0.5", "--option",
                         "rho=3"});
  EXPECT_EQ(option.exit_code, 1);
  EXPECT_NE(option.err.find("unknown option \"rho\""), std::string::npos) << option.err;
  auto neither = run_cli({"solve-layer", "--problem", problem, "--method", "alps"});
  EXPECT_EQ(neither.exit_code, 1);
  EXPECT_NE(neither.err.find("exactly one of --sparsity"), std::string::npos) << neither.err;
  auto method = run_cli({"solve-layer", "--problem", problem, "--method", "obs", "--sparsity", "0.5"});
  EXPECT_EQ(method.exit_code, 2);  // usage error from the CLI parser
  auto empty = run_cli({"make-problem", "--out", (dir / "x.safetensors").string(), "--rows", "0", "--cols", "4",
                        "--tokens", "10"});
  EXPECT_EQ(empty.exit_code, 1);
}

}  // namespace
}  // namespace alps::prune
