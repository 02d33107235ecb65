// The launch variables of torchrun, Slurm and --nproc, and the refusal of every incomplete or inconsistent set.
#include "alps/dist/launch.h"

#include <gtest/gtest.h>

#include <map>
#include <numeric>

#include "alps/dist/local_workers.h"
#include "support.h"

namespace alps::dist {
namespace {

Environment env_of(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string refusal(std::map<std::string, std::string> vars) {
  return test::error_message([&] { launch_from_environment(env_of(std::move(vars))); });
}

TEST(Launch, NoLauncherIsRankZeroOfOne) {
  const Launch l = launch_from_environment(env_of({{"HOME", "/root"}}));
  EXPECT_FALSE(l.launched());
  EXPECT_EQ(l.rank, 0);
  EXPECT_EQ(l.world_size, 1);
}

TEST(Launch, ReadsTorchrunsVariables) {
  const Launch l = launch_from_environment(env_of({{"RANK", "5"}, {"WORLD_SIZE", "16"}, {"LOCAL_RANK", "1"},
                                                   {"MASTER_ADDR", "node7"}, {"MASTER_PORT", "29400"}}));
  EXPECT_EQ(l.launcher, "torchrun");
  EXPECT_EQ(l.rank, 5);
  EXPECT_EQ(l.world_size, 16);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.master_addr, "node7");
  EXPECT_EQ(l.master_port, 29400);
  // Started by hand on one host: the local rank is the rank.
  EXPECT_EQ(launch_from_environment(env_of({{"RANK", "2"}, {"WORLD_SIZE", "3"}, {"MASTER_ADDR", "127.0.0.1"},
                                            {"MASTER_PORT", "29500"}}))
                .local_rank,
            2);
  // A group of one (torchrun --nproc-per-node 1) is still a launched run: it meets itself.
  const Launch one = launch_from_environment(env_of({{"RANK", "0"}, {"WORLD_SIZE", "1"}}));
  EXPECT_TRUE(one.launched());
  EXPECT_EQ(one.master_addr, "127.0.0.1");
}

TEST(Launch, RefusesIncompleteOrInconsistentVariablesNamingThem) {
  EXPECT_NE(refusal({{"RANK", "0"}}).find("WORLD_SIZE is not set"), std::string::npos);
  EXPECT_NE(refusal({{"WORLD_SIZE", "2"}}).find("RANK is not set"), std::string::npos);
  EXPECT_NE(refusal({{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "1"}})
                .find("RANK=2 is not a rank of a world of 2"),
            std::string::npos);
  EXPECT_NE(refusal({{"RANK", "-1"}, {"WORLD_SIZE", "2"}}).find("RANK=-1"), std::string::npos);
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "0"}}).find("WORLD_SIZE=0 must be at least 1"), std::string::npos);
  EXPECT_NE(refusal({{"RANK", "one"}, {"WORLD_SIZE", "2"}}).find("RANK='one' is not an integer"), std::string::npos);
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_PORT", "29500"}}).find("MASTER_ADDR is not set"),
            std::string::npos);
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}}).find("MASTER_PORT is not set"),
            std::string::npos);
  EXPECT_NE(refusal({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "h"}, {"MASTER_PORT", "70000"}})
                .find("MASTER_PORT=70000 is not a TCP port"),
            std::string::npos);
}

TEST(Launch, ReadsSlurmsVariablesAndItsNodeList) {
  const Launch l = launch_from_environment(env_of({{"SLURM_PROCID", "9"}, {"SLURM_NTASKS", "16"},
                                                   {"SLURM_LOCALID", "1"}, {"SLURM_JOB_ID", "123456"},
                                                   {"SLURM_JOB_NODELIST", "gpu[003-004,010],cpu1"}}));
  EXPECT_EQ(l.launcher, "slurm");
  EXPECT_EQ(l.rank, 9);
  EXPECT_EQ(l.world_size, 16);
  EXPECT_EQ(l.local_rank, 1);
  EXPECT_EQ(l.master_addr, "gpu003");
  EXPECT_EQ(l.master_port, 20000 + 123456 % 20000);  // jobs sharing a host do not share a port
  // MASTER_ADDR and MASTER_PORT, when set, win; torchrun's variables win over Slurm's (torchrun under srun).
  const Launch m = launch_from_environment(env_of({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"},
                                                   {"SLURM_JOB_NODELIST", "a1"}, {"MASTER_ADDR", "head"},
                                                   {"MASTER_PORT", "1234"}}));
  EXPECT_EQ(m.master_addr, "head");
  EXPECT_EQ(m.master_port, 1234);
  EXPECT_EQ(launch_from_environment(env_of({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}, {"RANK", "0"},
                                            {"WORLD_SIZE", "1"}}))
                .launcher,
            "torchrun");
  // One task has nobody to meet.
  EXPECT_FALSE(launch_from_environment(env_of({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}})).launched());
  EXPECT_NE(refusal({{"SLURM_PROCID", "3"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "a"}})
                .find("SLURM_PROCID=3 is not a rank of a world of 2 (SLURM_NTASKS)"),
            std::string::npos);
  EXPECT_NE(refusal({{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}}).find("SLURM_JOB_NODELIST"), std::string::npos);

  EXPECT_EQ(first_host_of_nodelist("node17"), "node17");
  EXPECT_EQ(first_host_of_nodelist("a,b"), "a");
  EXPECT_EQ(first_host_of_nodelist("n[1-3]"), "n1");
  EXPECT_EQ(first_host_of_nodelist("x1,n[1-3]"), "x1");
  EXPECT_EQ(first_host_of_nodelist("gpu-a[07,09]"), "gpu-a07");
}

TEST(Launch, SharesCoverTheWindowsOnceLargerFirst) {
  for (int64_t windows : {1, 7, 8, 128, 130})
    for (int world = 1; world <= std::min<int64_t>(windows, 9); ++world) {
      int64_t next = 0;
      for (int r = 0; r < world; ++r) {
        const auto [b, e] = share_of(windows, r, world);
        EXPECT_EQ(b, next);
        EXPECT_GE(e - b, windows / world);
        EXPECT_LE(e - b, windows / world + 1);
        if (r > 0) EXPECT_LE(e - b, share_of(windows, r - 1, world).second - share_of(windows, r - 1, world).first);
        next = e;
      }
      EXPECT_EQ(next, windows);
    }
}

TEST(Launch, WorkersRunTheCommandLineWithoutNproc) {
  EXPECT_EQ(without_nproc_flag({"alps", "prune", "--nproc", "3", "--out", "o", "--nproc=2", "--json"}),
            (std::vector<std::string>{"alps", "prune", "--out", "o", "--json"}));
}

}  // namespace
}  // namespace alps::dist
