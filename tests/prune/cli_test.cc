// `alps solve-layer` and `alps make-problem` end to end through the built executable.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>

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

TEST(SolveLayerCli, OutputFilesAreNeverReplacedUnlessAsked) {
  alps::test::TempDir dir;
  const std::string problem = make(dir, "p.safetensors", "8", "16");
  const std::string before = alps::test::slurp(problem);
  auto again = run_cli({"make-problem", "--out", problem, "--rows", "4", "--cols", "4", "--tokens", "10"});
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.err.find("already exists"), std::string::npos) << again.err;
  EXPECT_TRUE(alps::test::slurp(problem) == before) << "the existing file must be left as it was";

  const std::string user = (dir / "user.safetensors").string();
  std::ofstream(user) << "the user's file";
  auto solve = run_cli({"solve-layer", "--problem", problem, "--method", "magnitude", "--sparsity", "0.5", "--device",
                        "cpu", "--out", user});
  EXPECT_EQ(solve.exit_code, 1);
  EXPECT_NE(solve.err.find("--out " + user + " already exists"), std::string::npos) << solve.err;
  EXPECT_EQ(alps::test::slurp(user), "the user's file");
  solve = run_cli({"solve-layer", "--problem", problem, "--method", "magnitude", "--sparsity", "0.5", "--device", "cpu",
                   "--out", user, "--overwrite"});
  EXPECT_EQ(solve.exit_code, 0) << solve.err;
  EXPECT_EQ(load_problem(user).rows(), 8);
  auto to_dir = run_cli({"make-problem", "--out", dir.path().string(), "--rows", "4", "--cols", "4", "--tokens", "10"});
  EXPECT_EQ(to_dir.exit_code, 1);
  EXPECT_NE(to_dir.err.find("is a directory"), std::string::npos) << to_dir.err;
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
  // Without --json the result is a line on stdout, as every command's results (logs go to stderr).
  auto text = run_cli({"solve-layer", "--problem", problem, "--method", "wanda", "--sparsity", "0.5", "-q"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("wanda 0.5 on " + problem + " [32 x 64]: sparsity 0.5000, rel_error "), std::string::npos)
      << text.out;
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
  EXPECT_EQ(big.exit_code, 2);  // a flag value out of range is a usage error
  EXPECT_NE(big.err.find("--sparsity"), std::string::npos) << big.err;
  EXPECT_NE(big.err.find("[0, 1)"), std::string::npos) << big.err;
  auto option = run_cli({"solve-layer", "--problem", problem, "--method", "alps", "--sparsity", "0.5", "--option",
                         "rho=3"});
  EXPECT_EQ(option.exit_code, 2);  // method constants are part of the command: no input makes them work
  EXPECT_NE(option.err.find("unknown option \"rho\""), std::string::npos) << option.err;
  auto neither = run_cli({"solve-layer", "--problem", problem, "--method", "alps"});
  EXPECT_EQ(neither.exit_code, 2);
  EXPECT_NE(neither.err.find("exactly one of --sparsity"), std::string::npos) << neither.err;
  auto method = run_cli({"solve-layer", "--problem", problem, "--method", "obs", "--sparsity", "0.5"});
  EXPECT_EQ(method.exit_code, 2);  // usage error from the CLI parser
  auto empty = run_cli({"make-problem", "--out", (dir / "x.safetensors").string(), "--rows", "0", "--cols", "4",
                        "--tokens", "10"});
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.err.find("--rows"), std::string::npos) << empty.err;
}

// Flag values outside their range are usage errors (exit 2) naming the flag, before anything is read or written;
// problems with the files stay exit 1.
TEST(SolveLayerCli, FlagValuesOutOfRangeAreUsageErrors) {
  alps::test::TempDir dir;
  const std::string problem = make(dir, "p.safetensors", "8", "16");
  const std::string out = (dir / "x.safetensors").string();
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"solve-layer", "--problem", problem, "--method", "magnitude", "--pattern", "0:4"}, "0:M would prune every"},
      {{"solve-layer", "--problem", problem, "--method", "magnitude", "--pattern", "5:4"}, "--pattern"},
      {{"solve-layer", "--problem", problem, "--method", "magnitude", "--sparsity", "1"}, "--sparsity"},
      {{"solve-layer", "--problem", problem, "--method", "magnitude", "--sparsity", "nan"}, "--sparsity"},
      {{"solve-layer", "--problem", problem, "--method", "alps", "--sparsity", "0.5", "--refine", "pgc"}, "--refine"},
      {{"solve-layer", "--problem", problem, "--method", "alps", "--sparsity", "0.5", "--refine", "pcg",
        "--refine-iterations", "-1"},
       "--refine-iterations"},
      {{"solve-layer", "--problem", problem, "--method", "alps", "--sparsity", "0.5", "--option", "rho0"}, "key=value"},
      {{"make-problem", "--out", out, "--rows", "4", "--cols", "-4", "--tokens", "10"}, "--cols"},
      {{"make-problem", "--out", out, "--rows", "4", "--cols", "4", "--tokens", "0"}, "--tokens"},
      {{"make-problem", "--out", out, "--rows", "4", "--cols", "4", "--tokens", "10", "--outlier-fraction", "1.5"},
       "--outlier-fraction"},
      {{"make-problem", "--out", out, "--rows", "4", "--cols", "4", "--tokens", "10", "--outlier-scale", "0"},
       "--outlier-scale"},
      {{"--threads", "100000", "solve-layer", "--problem", problem, "--method", "magnitude", "--sparsity", "0.5"},
       "--threads"},
      {{"--threads", "-1", "--version"}, "--threads"},
      {{"--log-level", "loud", "--version"}, "--log-level"},
  };
  for (const auto& [args, flag] : cases) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << args[1] << " " << flag << ": " << r.err;
    EXPECT_NE(r.err.find(flag), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(out));
  // In range: --threads up to 4x the cores; a missing file is a data error.
  EXPECT_EQ(run_cli({"--threads", "1", "--version"}).exit_code, 0);
  EXPECT_EQ(run_cli({"solve-layer", "--problem", (dir / "none.safetensors").string(), "--method", "magnitude",
                     "--pattern", "1:4"})
                .exit_code,
            1);
}

// A gram that is not a Gram matrix (edited, corrupted) is refused by every method, ALPS included, rather than
// solved into huge weights and negative errors.
TEST(SolveLayerCli, GramThatIsNotPositiveSemidefiniteIsRefused) {
  alps::test::TempDir dir;
  const std::string problem = make(dir, "p.safetensors", "16", "32");
  LayerProblem p = load_problem(problem);
  // G_01 = G_10 = 2 sqrt(G_00 G_11) keeps the diagonal and symmetry but makes the [0, 1] minor negative
  // (determinant -3 G_00 G_11): an eigenvalue of about -min(G_00, G_11), far beyond rounding.
  const double off = 2 * std::sqrt(p.G[0][0].item<double>() * p.G[1][1].item<double>());
  p.G[0][1] = off;
  p.G[1][0] = off;
  save_problem(dir / "indefinite.safetensors", p);
  for (const char* method : {"alps", "sparsegpt", "wanda", "dsnot", "magnitude"}) {
    const auto r = run_cli({"solve-layer", "--problem", (dir / "indefinite.safetensors").string(), "--method", method,
                            "--sparsity", "0.5", "--json"});
    EXPECT_EQ(r.exit_code, 1) << method << ": " << r.out;
    EXPECT_NE(r.err.find("gram of model.layers.0.self_attn.q_proj"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("indefinite.safetensors"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("is not positive semi-definite: smallest eigenvalue -"), std::string::npos) << r.err;
    EXPECT_TRUE(r.out.empty()) << r.out;
  }
}

// A result says what computed it: --version, the prune report and eval's JSON name the source revision, a commit of
// this repository (checked against its history, where git and the history are there) or "unknown" outside a checkout.
TEST(VersionCli, NamesTheSourceRevisionAndReportsCarryIt) {
  const auto version = run_cli({"--version"});
  ASSERT_EQ(version.exit_code, 0) << version.err;
  std::smatch m;
  const std::string first = version.out.substr(0, version.out.find('\n'));
  ASSERT_TRUE(std::regex_match(first, m, std::regex(R"(alps \S+ \(source (([0-9a-f]{7,40})(-dirty)?|unknown)\))")))
      << first;
  const std::string commit = m[2];
  const std::string git = "git -C '" + alps::test::source_dir().string() + "'";
  if (!commit.empty() && std::system((git + " rev-parse --git-dir >/dev/null 2>&1").c_str()) == 0)
    EXPECT_EQ(std::system((git + " cat-file -e " + commit + "^{commit} 2>/dev/null").c_str()), 0)
        << commit << " is not a commit of " << alps::test::source_dir();
  const std::string revision = m[1];
  const auto eval =
      run_cli({"eval", "--model", (alps::test::committed_data_dir() / "models/stories260K-hf").string(), "--ppl",
               (alps::test::committed_data_dir() / "text/tinystories/tinystories_sample.txt").string(), "--seqlen",
               "64", "--max-windows", "1", "--json"});
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  const auto doc = nlohmann::json::parse(eval.out);
  EXPECT_EQ(doc["software"]["source_revision"], revision);
  EXPECT_GE(doc["hardware"]["cores"].get<int>(), 1);
}

// --quiet drops the info log, not the progress lines; inspect numbers layers as the checkpoint does.
TEST(Cli, QuietKeepsProgressAndInspectNumbersLayersAsTheCheckpoint) {
  test::TempDir dir;
  const auto r = run_cli({"prune", "--model", test::committed_data_dir().string() + "/models/stories260K-hf", "--out",
                          (dir / "out").string(), "--method", "magnitude", "--sparsity", "0.5", "--quiet"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("block 5/5 (7 linears) | elapsed "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("[info]"), std::string::npos) << r.err;
  const auto text = run_cli({"inspect", "--model", (dir / "out").string()});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("\nlayer     sparsity\n0 "), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("\n5  "), std::string::npos) << text.out;
}

TEST(MethodsCli, ListsEveryMethodWithItsOptionsAndDefaults) {
  const auto json = run_cli({"methods", "--json"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto doc = nlohmann::json::parse(json.out);
  ASSERT_EQ(doc.size(), 9u);  // six methods, three structured ones
  EXPECT_EQ(doc[8]["kind"], "structured");
  const auto text = run_cli({"methods", "alps"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find("alps: ADMM"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("rho0              number   0.1"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("max_iterations    integer  300"), std::string::npos) << text.out;
  EXPECT_EQ(text.out.find("sparsegpt"), std::string::npos) << text.out;
  const auto ria = run_cli({"methods", "ria"});
  ASSERT_EQ(ria.exit_code, 0) << ria.err;
  EXPECT_NE(ria.out.find("permutation       string   \"none\""), std::string::npos) << ria.out;
  const auto osscar = run_cli({"methods", "osscar"});
  ASSERT_EQ(osscar.exit_code, 0) << osscar.err;
  EXPECT_NE(osscar.out.find("--structured-option key=value"), std::string::npos) << osscar.out;
  EXPECT_NE(osscar.out.find("iterations        integer  30"), std::string::npos) << osscar.out;
  EXPECT_EQ(run_cli({"methods", "optimal"}).exit_code, 2);
  // prune's --help shows the recipe's live defaults next to each knob.
  const auto help = run_cli({"prune", "--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  for (const char* shown : {"sparsegpt,wanda}=alps", ">= 1=128", "0 or INT >= 2=0", "{compute,cpu}=compute"})
    EXPECT_NE(help.out.find(shown), std::string::npos) << shown << "\n" << help.out;
  // --model names every architecture of the table, in every command that takes it.
  for (const char* command : {"prune", "eval", "inspect", "generate"}) {
    const auto h = run_cli({command, "--help"});
    EXPECT_NE(h.out.find("(Gemma2ForCausalLM, Gemma3ForCausalLM, Gemma3ForConditionalGeneration, "
                         "LlamaForCausalLM, MistralForCausalLM, MixtralForCausalLM, OPTForCausalLM, Olmo2ForCausalLM, "
                         "OlmoeForCausalLM, Phi3ForCausalLM, Qwen2ForCausalLM, Qwen2MoeForCausalLM, Qwen3ForCausalLM, "
                         "Qwen3MoeForCausalLM)"),
              std::string::npos)
        << command << "\n" << h.out;
  }
}

// A mistyped subcommand or flag gets CLI11's message and the closest name, and exits 2; nothing close, no guess.
TEST(Cli, MistypedFlagsAndSubcommandsGetTheClosestName) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"prun", "--model", "m"}, "alps: 'prun' is not a subcommand: did you mean `alps prune`?"},
      {{"prune", "--model", "m", "--out", "o", "--sparsty", "0.5"},
       "alps: --sparsty is not a flag of this command: did you mean --sparsity?"},
      {{"prune", "--model", "m", "--out", "o", "--methd=wanda"},
       "alps: --methd is not a flag of this command: did you mean --method?"},
      {{"eval", "--model", "m", "--pp", "wikitext2"}, "did you mean --ppl?"},
      {{"--vesion"}, "did you mean --version?"},
  };
  for (const auto& [args, hint] : cases) {
    const auto r = run_cli(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find(hint), std::string::npos) << r.err;
  }
  const auto far = run_cli({"prune", "--model", "m", "--out", "o", "--zzzzzzzz"});
  EXPECT_EQ(far.exit_code, 2);
  EXPECT_EQ(far.err.find("did you mean"), std::string::npos) << far.err;
}

}  // namespace
}  // namespace alps::prune
