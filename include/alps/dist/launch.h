#pragma once
// Where this process stands in a run of several: its rank, the world size and the rank-0 host, as torchrun (RANK,
// WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT), Slurm's srun (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID,
// SLURM_JOB_NODELIST) or `alps prune --nproc` (which sets torchrun's variables) describe it. docs/distributed.md.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

namespace alps::dist {

struct Launch {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;       ///< the rank among the processes of this host: its GPU is cuda:local_rank
  std::string master_addr;  ///< the host of rank 0, where the rendezvous store listens
  int master_port = 0;
  std::string launcher = "none";  ///< "none", "torchrun" (the variables, whoever set them) or "slurm"
  /// torchrun's agent already serves the store at MASTER_ADDR:MASTER_PORT (TORCHELASTIC_USE_AGENT_STORE): rank 0
  /// connects to it like the others instead of opening one.
  bool agent_store = false;
  /// Which start of the workers this is (torchrun restarts them: TORCHELASTIC_RESTART_COUNT); the store's keys of
  /// one start are not another's.
  int restart = 0;
  /// True when a launcher started this process as one of a group (even a group of one).
  bool launched() const { return launcher != "none"; }
};

/// Reads a variable of the environment: nullopt when unset.
using Environment = std::function<std::optional<std::string>(const std::string& name)>;
/// The process's own environment.
Environment process_environment();

/// The launch described by `env`; a process no launcher started is rank 0 of 1. Throws alps::UsageError naming
/// the variable for an incomplete or inconsistent description (RANK without WORLD_SIZE, a rank at or beyond the
/// world size, a port out of range, ...).
Launch launch_from_environment(const Environment& env);

/// One run, one log: ranks other than 0 log only warnings and errors, each line naming the rank.
void log_as_rank(const Launch& launch);

/// This host's name (gethostname), for reports and errors.
std::string host_name();

/// The first host of a Slurm node list: "gpu[003-004,010],cpu1" -> "gpu003".
std::string first_host_of_nodelist(const std::string& nodelist);

/// The windows [begin, end) of `windows` that `rank` of `world_size` holds: contiguous, sizes differing by at most
/// one, the larger shares first.
std::pair<int64_t, int64_t> share_of(int64_t windows, int rank, int world_size);

}  // namespace alps::dist
