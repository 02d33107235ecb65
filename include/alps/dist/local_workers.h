#pragma once
// `alps prune --nproc N`: N processes of this program on this host, started as torchrun starts them (RANK,
// LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, MASTER_PORT a free port), so that one machine
// needs no Python. The first worker to fail stops the others.
#include <string>
#include <vector>

namespace alps::dist {

/// Runs `args` (args[0] is ignored: this program runs again) as `nproc` workers and waits for them. Only rank 0
/// keeps stdout. When a worker fails (non-zero exit, or killed), the others get SIGTERM, then SIGKILL after
/// `grace_seconds`; the error names the worker. SIGINT and SIGTERM sent to this process are passed on to the
/// workers. Returns the exit status to leave with: 0 when all succeeded, else the first failed worker's.
int run_local_workers(const std::vector<std::string>& args, int nproc, int grace_seconds = 30);

/// A TCP port of 127.0.0.1 that nothing listens on now (the kernel's choice).
int free_local_port();

/// `argv` without `--nproc N` / `--nproc=N` (what each worker runs).
std::vector<std::string> without_nproc_flag(const std::vector<std::string>& argv);

}  // namespace alps::dist
