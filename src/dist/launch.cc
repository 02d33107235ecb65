#include "alps/dist/launch.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstdlib>

#include "alps/core/error.h"

namespace alps::dist {

namespace {

// The integer value of variable `name` (unset: nullopt), refused with its name when it is not one.
std::optional<int64_t> integer(const Environment& env, const std::string& name) {
  const auto v = env(name);
  if (!v) return std::nullopt;
  size_t used = 0;
  int64_t n = -1;
  try {
    n = std::stoll(*v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  ALPS_USAGE_CHECK(!v->empty() && used == v->size(), "environment variable ", name, "='", *v,
                   "' is not an integer");
  return n;
}

int required_integer(const Environment& env, const std::string& name, const std::string& because) {
  const auto v = integer(env, name);
  ALPS_USAGE_CHECK(v.has_value(), "environment variable ", name, " is not set, but ", because);
  return static_cast<int>(*v);
}

void check_ranks(const Launch& l, const std::string& rank_var, const std::string& world_var) {
  ALPS_USAGE_CHECK(l.world_size >= 1, "environment variable ", world_var, "=", l.world_size, " must be at least 1");
  ALPS_USAGE_CHECK(l.rank >= 0 && l.rank < l.world_size, "environment variable ", rank_var, "=", l.rank,
                   " is not a rank of a world of ", l.world_size, " (", world_var, "): ranks are 0 to ",
                   l.world_size - 1);
  ALPS_USAGE_CHECK(l.local_rank >= 0, "the local rank must be >= 0, got ", l.local_rank);
}

void check_port(int port, const std::string& var) {
  ALPS_USAGE_CHECK(port >= 1 && port <= 65535, "environment variable ", var, "=", port,
                   " is not a TCP port (1 to 65535)");
}

}  // namespace

Environment process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

void log_as_rank(const Launch& launch) {
  if (launch.rank == 0) return;
  if (spdlog::get_level() < spdlog::level::warn) spdlog::set_level(spdlog::level::warn);
  spdlog::set_pattern(fmt::format("[%H:%M:%S] [%^%l%$] [rank {}] %v", launch.rank));
}

std::string host_name() {
  char name[256] = {0};
  return gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : std::string("?");
}

std::string first_host_of_nodelist(const std::string& nodelist) {
  // Hosts are separated by commas outside brackets; a bracket holds the suffixes of one prefix.
  const size_t comma = nodelist.find(',');
  const size_t bracket = nodelist.find('[');
  if (bracket == std::string::npos || (comma != std::string::npos && comma < bracket))
    return nodelist.substr(0, comma);
  const std::string prefix = nodelist.substr(0, bracket);
  const size_t end = nodelist.find_first_of(",-]", bracket + 1);
  ALPS_USAGE_CHECK(end != std::string::npos && end > bracket + 1, "cannot read the Slurm node list '", nodelist,
                   "' (SLURM_JOB_NODELIST): set MASTER_ADDR to the host of rank 0");
  return prefix + nodelist.substr(bracket + 1, end - bracket - 1);
}

Launch launch_from_environment(const Environment& env) {
  Launch l;
  const bool torchrun = env("RANK").has_value() || env("WORLD_SIZE").has_value();
  if (torchrun) {
    l.launcher = "torchrun";
    l.rank = required_integer(env, "RANK", "WORLD_SIZE is: a process of a distributed run needs both");
    l.world_size = required_integer(env, "WORLD_SIZE", "RANK is: a process of a distributed run needs both");
    // torchrun sets LOCAL_RANK; one started by hand on a single host is its own local rank.
    l.local_rank = static_cast<int>(integer(env, "LOCAL_RANK").value_or(l.rank));
    check_ranks(l, "RANK", "WORLD_SIZE");
    l.agent_store = env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True";
    l.restart = static_cast<int>(integer(env, "TORCHELASTIC_RESTART_COUNT").value_or(0));
    if (l.world_size > 1 || l.agent_store) {
      const auto addr = env("MASTER_ADDR");
      ALPS_USAGE_CHECK(addr && !addr->empty(), "environment variable MASTER_ADDR is not set: the ", l.world_size,
                       " ranks (WORLD_SIZE) meet at rank 0's host, MASTER_ADDR:MASTER_PORT");
      l.master_addr = *addr;
      l.master_port = required_integer(env, "MASTER_PORT", "the ranks meet at MASTER_ADDR:MASTER_PORT");
      check_port(l.master_port, "MASTER_PORT");
    } else {
      l.master_addr = env("MASTER_ADDR").value_or("127.0.0.1");
      l.master_port = static_cast<int>(integer(env, "MASTER_PORT").value_or(29500));
      check_port(l.master_port, "MASTER_PORT");
    }
    return l;
  }
  if (env("SLURM_PROCID").has_value() && env("SLURM_NTASKS").has_value()) {
    l.launcher = "slurm";
    l.rank = required_integer(env, "SLURM_PROCID", "");
    l.world_size = required_integer(env, "SLURM_NTASKS", "");
    l.local_rank = static_cast<int>(integer(env, "SLURM_LOCALID").value_or(0));
    check_ranks(l, "SLURM_PROCID", "SLURM_NTASKS");
    if (l.world_size == 1) {  // one task: nobody to meet
      l.launcher = "none";
      return l;
    }
    if (const auto addr = env("MASTER_ADDR"); addr && !addr->empty()) {
      l.master_addr = *addr;
    } else {
      const auto nodes = env("SLURM_JOB_NODELIST") ? env("SLURM_JOB_NODELIST") : env("SLURM_NODELIST");
      ALPS_USAGE_CHECK(nodes.has_value(), "neither MASTER_ADDR nor SLURM_JOB_NODELIST is set: the ranks of a Slurm "
                       "job meet at the first host of its node list, or at MASTER_ADDR");
      l.master_addr = first_host_of_nodelist(*nodes);
    }
    // Jobs sharing a host listen on different ports unless MASTER_PORT says otherwise.
    const auto job = integer(env, "SLURM_JOB_ID");
    l.master_port = static_cast<int>(integer(env, "MASTER_PORT").value_or(job ? 20000 + *job % 20000 : 29500));
    check_port(l.master_port, "MASTER_PORT");
    return l;
  }
  return l;
}

std::pair<int64_t, int64_t> share_of(int64_t windows, int rank, int world_size) {
  const int64_t base = windows / world_size, extra = windows % world_size;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

}  // namespace alps::dist
