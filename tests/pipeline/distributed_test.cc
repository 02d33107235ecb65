// `alps prune` as a distributed run of several processes on this host (--nproc, and the launch variables set by
// hand as torchrun sets them), Gloo between them: the same checkpoint as one process, resumable with another world
// size, a killed worker stopping the run, and the refusal of every bad setup before any work.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>

#include "alps/dist/local_workers.h"
#include "prune_cli_support.h"
#include "support.h"

namespace alps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path model_dir() { return test::committed_data_dir() / "models/stories260K-hf"; }

constexpr int64_t kWindows = 8, kSeqlen = 128;

std::vector<std::string> prune_args(const fs::path& out, std::vector<std::string> extra) {
  std::vector<std::string> a = {
      "prune",    "--model",    model_dir().string(),
      "--out",    out.string(), "--calib",
      (test::committed_data_dir() / "text/tinystories/tinystories.train.first200.txt").string(),
      "--nsamples", std::to_string(kWindows), "--seqlen", std::to_string(kSeqlen), "--device", "cpu", "--json"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

// The run's report; the run must succeed.
json run(const fs::path& out, const std::vector<std::string>& extra, const test::CliContext& context = {}) {
  const auto r = test::run_cli(prune_args(out, extra), context);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return r.exit_code == 0 ? json::parse(r.out) : json::object();
}

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(Distributed, MagnitudeAndWandaGiveTheOneProcessCheckpointForEveryWorldSize) {
  for (const std::string method : {"magnitude", "wanda"}) {
    SCOPED_TRACE(method);
    test::TempDir dir;
    const std::vector<std::string> args = {"--method", method, "--sparsity", "0.5"};
    const json one = run(dir / "1", args);
    EXPECT_FALSE(one.at("extra").contains("distributed"));
    for (const std::string n : {"2", "3"}) {
      const json rep = run(dir / n, with(args, {"--nproc", n}));
      // Magnitude reads no statistics. Wanda keeps each row's largest |W_ij| ||X_j||: the ranks' partial sums of
      // ||X_j||^2 round otherwise than one process's running sum (a relative 1e-7 here), which could only swap
      // two scores of a row lying that close; none do in this model, so its masks, and its checkpoint, are equal.
      EXPECT_TRUE(test::slurp(dir / "1/model.safetensors") == test::slurp(dir / (n + "/model.safetensors")))
          << "world size " << n;
      const json& d = rep.at("extra").at("distributed");
      EXPECT_EQ(d.at("world_size"), std::stoi(n));
      EXPECT_EQ(d.at("backend"), "gloo");
      EXPECT_EQ(d.at("launcher"), "torchrun");
      EXPECT_EQ(d.at("ranks").size(), static_cast<size_t>(std::stoi(n)));
      if (method == "wanda") {
        EXPECT_GT(d.at("bytes_per_block").at("reduce"), 0);
        EXPECT_GT(rep.at("phase_seconds").at("reduce_statistics"), 0);
      }
      EXPECT_EQ(rep.at("layers").size(), one.at("layers").size());  // every rank's linears in rank 0's report
    }
  }
}

TEST(Distributed, OwlMeasuresTheOutliersOverEveryRanksWindows) {
  test::TempDir dir;
  const std::vector<std::string> args = {"--method", "wanda", "--sparsity", "0.6", "--sparsity-profile", "owl"};
  const json one = run(dir / "1", args);
  const json two = run(dir / "2", with(args, {"--nproc", "2"}));
  // The columns' sums of squares are summed over the ranks before the scores are counted: a block's outlier
  // fraction could move only by a score within the sums' rounding (1e-7 relative) of M times the mean; none is.
  EXPECT_EQ(two.at("extra").at("sparsity_profile"), one.at("extra").at("sparsity_profile"));
  EXPECT_TRUE(test::slurp(dir / "1/model.safetensors") == test::slurp(dir / "2/model.safetensors"));
}

TEST(Distributed, SolvesAgreeWithOneProcessWithinTheRoundingOfTheirStatistics) {
  test::TempDir dir;
  // SparseGPT is a deterministic function of G: its layer errors move by the rounding of G's summation order.
  // Each G entry sums T = windows * seqlen products in fp32, within gamma_T of exact by either order.
  const std::vector<std::string> sgpt = {"--method", "sparsegpt", "--sparsity", "0.5"};
  const json one = run(dir / "sgpt-1", sgpt);
  const json three = run(dir / "sgpt-3", with(sgpt, {"--nproc", "3"}));
  for (size_t i = 0; i < one.at("layers").size(); ++i) {
    const double e1 = one.at("layers")[i].at("rel_error"), e3 = three.at("layers")[i].at("rel_error");
    EXPECT_NEAR(e3, e1, test::rounding_bound(kWindows * kSeqlen, e1)) << one.at("layers")[i].at("name");
    EXPECT_EQ(three.at("layers")[i].at("sparsity"), one.at("layers")[i].at("sparsity"));
  }
  // ALPS's support comes out of a nonconvex ADMM path that rounding-level changes send to other local solutions
  // (tests/prune/methods_test.cc). Its reference spread: one process with another batch size, which changes only
  // the rounding of the forward passes and the statistics. Two and three ranks must land within three times it.
  // A bound on every wait between ranks, so that a fault in the parts' meetings fails here instead of hanging.
  const std::vector<std::string> alps = {"--method", "alps", "--sparsity", "0.5", "--dist-timeout", "300"};
  const json ref = run(dir / "alps-1", alps);
  const double spread =
      test_prune::mean_relative_difference(run(dir / "alps-b1", with(alps, {"--batch-size", "1"})), ref);
  // --dist-split all: every linear's rows solved in parts, one per rank, the parts adding their sums at every
  // iteration (tests/prune/row_split_test.cc: the same solution to rounding); the same bound.
  for (const std::string n : {"2", "3"}) {
    for (const std::string split : {"auto", "all"}) {
      SCOPED_TRACE("world size " + n + ", --dist-split " + split);
      const json rep = run(dir / ("alps-" + n + split), with(alps, {"--nproc", n, "--dist-split", split}));
      EXPECT_LE(test_prune::mean_relative_difference(rep, ref), 3 * std::max(spread, 1e-4));
      for (size_t i = 0; i < ref.at("layers").size(); ++i) {
        const json& layer = rep.at("layers")[i];
        EXPECT_EQ(layer.at("sparsity"), ref.at("layers")[i].at("sparsity"));
        // auto splits on GPUs only (a split measured 1.6x slower on CPUs: docs/distributed.md).
        EXPECT_EQ(layer.value("parts", 1), split == "all" ? std::stoi(n) : 1) << layer.at("name");
      }
      if (split == "all") EXPECT_GT(rep.at("extra").at("distributed").at("bytes_per_block").at("within_parts"), 0);
    }
  }
}

TEST(Distributed, StructuredStepsChooseOnEveryRanksWindowsAndEveryRankTakesTheChoice) {
  test::TempDir dir;
  // Rank 0 chooses the neurons and heads on the statistics summed from every rank; the solves after read what is left
  // of them on their own ranks (at three ranks a block's down_proj is solved by another rank than rank 0).
  const std::vector<std::string> args = {"--remove-neurons", "0.25",      "--remove-heads", "0.5",
                                         "--method",         "sparsegpt", "--sparsity",     "0.5"};
  const json one = run(dir / "1", args);
  const json three = run(dir / "3", with(args, {"--nproc", "3"}));
  const json& steps1 = one.at("extra").at("structured").at("blocks");
  const json& steps3 = three.at("extra").at("structured").at("blocks");
  ASSERT_EQ(steps3.size(), steps1.size());
  const double T = kWindows * kSeqlen;
  for (size_t i = 0; i < steps1.size(); ++i) {
    SCOPED_TRACE(steps1[i].at("linear").get<std::string>() + " " + steps1[i].at("structure").get<std::string>());
    EXPECT_EQ(steps3[i].at("kept_units"), steps1[i].at("kept_units"));
    const double e1 = steps1[i].at("rel_error");
    EXPECT_NEAR(steps3[i].at("rel_error").get<double>(), e1, test::rounding_bound(T, e1));
  }
  ASSERT_EQ(three.at("layers").size(), one.at("layers").size());
  for (size_t i = 0; i < one.at("layers").size(); ++i) {
    const json &l1 = one.at("layers")[i], &l3 = three.at("layers")[i];
    EXPECT_EQ(l3.at("shape"), l1.at("shape")) << l1.at("name");
    EXPECT_EQ(l3.at("sparsity"), l1.at("sparsity")) << l1.at("name");
    const double e1 = l1.at("rel_error");
    EXPECT_NEAR(l3.at("rel_error").get<double>(), e1, test::rounding_bound(T, e1)) << l1.at("name");
  }
  EXPECT_EQ(test::slurp(dir / "3/config.json"), test::slurp(dir / "1/config.json"));
  // Interrupted after two blocks and resumed at the same world size: the same checkpoint bit for bit.
  run(dir / "legs", with(args, {"--nproc", "3", "--stop-after", "2"}));
  run(dir / "legs", with(args, {"--nproc", "3", "--resume"}));
  EXPECT_TRUE(test::slurp(dir / "3/model.safetensors") == test::slurp(dir / "legs/model.safetensors"));
}

TEST(Distributed, ResumesWithAnotherWorldSize) {
  test::TempDir dir;
  const std::vector<std::string> args = {"--method", "wanda", "--sparsity", "0.6"};
  run(dir / "whole", args);
  // Two ranks stop after 2 blocks (each saved its shard of the inputs); three continue, reading windows from both.
  run(dir / "a", with(args, {"--nproc", "2", "--stop-after", "2"}));
  const json state = json::parse(test::slurp(dir / "a/.alps-state/state.json"));
  EXPECT_EQ(state.at("input_shards"), json::parse("[[0, 4], [4, 8]]"));
  run(dir / "a", with(args, {"--nproc", "3", "--resume"}));
  EXPECT_TRUE(test::slurp(dir / "whole/model.safetensors") == test::slurp(dir / "a/model.safetensors"));
  // Three ranks stop after 1 block; one process continues.
  run(dir / "b", with(args, {"--nproc", "3", "--stop-after", "1"}));
  run(dir / "b", with(args, {"--resume"}));
  EXPECT_TRUE(test::slurp(dir / "whole/model.safetensors") == test::slurp(dir / "b/model.safetensors"));
  EXPECT_FALSE(fs::exists(dir / "b/.alps-state"));
}

TEST(Distributed, AKilledWorkerStopsEveryRankAndTheRunResumesWithAnotherWorldSize) {
  test::TempDir dir;
  const std::vector<std::string> args = {"--method", "wanda", "--sparsity", "0.6", "--nproc", "2"};
  run(dir / "whole", {"--method", "wanda", "--sparsity", "0.6"});
  // Rank 1 dies (SIGKILL) as it saves its shard of block 3's inputs; rank 0 may be anywhere in block 3.
  test::CliContext kill;
  kill.env = {"ALPS_TEST_FAULT=crash:state-inputs-saved@3#1"};
  const auto killed = test::run_cli(prune_args(dir / "out", args), kill);
  EXPECT_NE(killed.exit_code, 0);
  EXPECT_NE(killed.err.find("(rank 1 of 2) was killed by signal 9"), std::string::npos) << killed.err;
  EXPECT_FALSE(fs::exists(dir / "out/model.safetensors"));
  EXPECT_TRUE(fs::exists(dir / "out/.alps-state/state.json"));
  // Resumed by three ranks: they read their windows from the two shards the killed run's ranks saved.
  const auto resumed = test::run_cli(prune_args(dir / "out", {"--method", "wanda", "--sparsity", "0.6", "--nproc", "3",
                                                              "--resume"}));
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
  EXPECT_TRUE(test::slurp(dir / "whole/model.safetensors") == test::slurp(dir / "out/model.safetensors"));
}

TEST(Distributed, AHungWorkerStopsTheOthersAfterTheTimeout) {
  test::TempDir dir;
  // Rank 1 stops answering (alive, asleep) as it saves its shard of block 2's inputs; rank 0 waits for that shard
  // before it may write the state that names it, and gives up after --dist-timeout.
  test::CliContext hang;
  hang.env = {"ALPS_TEST_FAULT=hang:state-inputs-saved@2#1"};
  const auto t0 = std::chrono::steady_clock::now();
  const auto r = test::run_cli(
      prune_args(dir / "out", {"--method", "wanda", "--sparsity", "0.6", "--nproc", "2", "--dist-timeout", "3"}), hang);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("rank 0 of 2 stopped while waiting for the ranks' shards of the inputs of block 2"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("--dist-timeout 3 s"), std::string::npos) << r.err;
  EXPECT_LT(seconds, 60);  // the timeout, then the launcher's SIGTERM to the hung worker
  EXPECT_TRUE(fs::exists(dir / "out/.alps-state/state.json"));  // block 1's state: resumable
}

// Ranks launched by their environment variables, each with its own command line and files as a cluster gives them.
struct TwoRanks {
  test::CliResult rank0, rank1;
};
TwoRanks launch_two(const std::vector<std::string>& args0, const std::vector<std::string>& args1) {
  const std::string port = std::to_string(dist::free_local_port());
  auto launch = [port](int rank, const std::vector<std::string>& args) {
    test::CliContext c;
    c.env = {"RANK=" + std::to_string(rank), "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port};
    return test::run_cli(args, c);
  };
  auto rank1 = std::async(std::launch::async, launch, 1, args1);
  TwoRanks r;
  r.rank0 = launch(0, args0);
  r.rank1 = rank1.get();
  return r;
}

// `args` reading the model in `model` instead.
std::vector<std::string> on_model(std::vector<std::string> args, const fs::path& model) {
  args[2] = model.string();  // prune_args: "prune", "--model", DIR, ...
  return args;
}

// Ranks given different jobs (another --sparsity or --stop-after; a copy of the checkpoint that differs in one byte
// of its tensor data, with the same size and header) stop before any work, every rank naming what differs and where;
// nothing is written. Copies with the same bytes made at other times (node-local copies) are one job.
TEST(Distributed, RanksGivenDifferentJobsStopBeforeAnyWork) {
  test::TempDir dir;
  const std::vector<std::string> args = prune_args(dir / "out", {"--method", "wanda", "--sparsity", "0.5"});
  auto refused = [&](const TwoRanks& r, const std::string& what) {
    for (const auto* rank : {&r.rank0, &r.rank1}) {
      EXPECT_EQ(rank->exit_code, 1) << rank->err;
      EXPECT_NE(rank->err.find("the ranks of this distributed run were given different jobs"), std::string::npos)
          << rank->err;
      EXPECT_NE(rank->err.find(what), std::string::npos) << rank->err;
    }
    EXPECT_FALSE(fs::exists(dir / "out")) << "ranks that disagree wrote their output";
  };
  refused(launch_two(args, with(args, {"--sparsity", "0.6"})),
          "--sparsity/--pattern (recipe \"pattern\"): rank 0 has \"0.5\", rank 1 has \"0.6\"");
  refused(launch_two(args, with(args, {"--stop-after", "1"})), "--stop-after: rank 0 has -1, rank 1 has 1");

  for (const char* copy : {"a", "b", "c"}) fs::copy(model_dir(), dir / copy, fs::copy_options::recursive);
  {  // b: one byte of the last tensor's data changed, in place
    std::fstream f(dir / "b/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-3, std::ios::end);
    const char byte = static_cast<char>(f.get() ^ 0x01);
    f.seekp(-3, std::ios::end);
    f.put(byte);
  }
  ASSERT_EQ(fs::file_size(dir / "a/model.safetensors"), fs::file_size(dir / "b/model.safetensors"));
  refused(launch_two(on_model(args, dir / "a"), on_model(args, dir / "b")),
          "rank 1's model file model.safetensors: content changed");

  // c: the same bytes as a, another modification time.
  fs::last_write_time(dir / "c/model.safetensors",
                      fs::last_write_time(dir / "a/model.safetensors") - std::chrono::hours(24));
  const TwoRanks same = launch_two(on_model(args, dir / "a"), on_model(args, dir / "c"));
  EXPECT_EQ(same.rank0.exit_code, 0) << same.rank0.err;
  EXPECT_EQ(same.rank1.exit_code, 0) << same.rank1.err;
  EXPECT_TRUE(fs::exists(dir / "out/model.safetensors"));
}

TEST(Distributed, RefusesBadSetupsBeforeAnyWorkNamingTheCause) {
  test::TempDir dir;
  auto refused = [&](const std::vector<std::string>& extra, const std::vector<std::string>& env) {
    test::CliContext c;
    c.env = env;
    const auto r = test::run_cli(prune_args(dir / "out", with({"--method", "wanda", "--sparsity", "0.5"}, extra)), c);
    EXPECT_NE(r.exit_code, 0);
    EXPECT_FALSE(fs::exists(dir / "out")) << "a refused run created its output";
    return r.err;
  };
  // Checked by the launcher, once, before any worker starts.
  const std::string shared = refused({"--nproc", "9"}, {});
  const std::string said = "--nproc 9 processes share --nsamples 8 calibration windows";
  EXPECT_NE(shared.find(said), std::string::npos) << shared;
  EXPECT_EQ(shared.find(said), shared.rfind(said)) << shared;
  EXPECT_NE(refused({}, {"RANK=0"}).find("WORLD_SIZE is not set"), std::string::npos);
  EXPECT_NE(refused({}, {"RANK=2", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=29500"})
                .find("RANK=2 is not a rank of a world of 2"),
            std::string::npos);
  EXPECT_NE(refused({"--nproc", "2"}, {"RANK=0", "WORLD_SIZE=1"}).find("drop --nproc"), std::string::npos);
  EXPECT_NE(refused({"--nproc", "2", "--dist-backend", "nccl"}, {}).find("--dist-backend nccl"), std::string::npos);
  // RIA's channel orders stay with the rank that solved the linear.
  const auto permuted = test::run_cli(
      prune_args(dir / "out", {"--method", "ria", "--pattern", "2:4", "--option", "permutation=lsa", "--nproc", "2"}));
  EXPECT_EQ(permuted.exit_code, 2);
  EXPECT_NE(permuted.err.find("--option permutation (model.layers.0.self_attn.q_proj): ria's channel permutation runs "
                              "in one process; drop --nproc"),
            std::string::npos)
      << permuted.err;
  EXPECT_FALSE(fs::exists(dir / "out"));
  // A worker whose rank 0 never comes stops after --dist-timeout, naming where it waited.
  const std::string port = std::to_string(dist::free_local_port());
  EXPECT_NE(refused({"--dist-timeout", "2"}, {"RANK=1", "WORLD_SIZE=2", "MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + port})
                .find("did not all meet at 127.0.0.1:" + port),
            std::string::npos);
}

}  // namespace
}  // namespace alps
