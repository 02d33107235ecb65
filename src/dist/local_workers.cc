#include "alps/dist/local_workers.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "alps/core/error.h"

namespace alps::dist {

namespace {}  // namespace

int free_local_port() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ALPS_CHECK(fd >= 0, "--nproc: cannot open a socket to find a free port: ", std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  close(fd);
  ALPS_CHECK(ok, "--nproc: cannot find a free port on 127.0.0.1: ", std::strerror(errno));
  return ntohs(a.sin_port);
}

namespace {

volatile std::sig_atomic_t g_forward = 0;  // the signal to pass on to the workers, 0 if none
void remember_signal(int sig) { g_forward = sig; }

std::string describe(int status) {
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "stopped";
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

std::vector<std::string> without_nproc_flag(const std::vector<std::string>& argv) {
  std::vector<std::string> out;
  for (size_t i = 0; i < argv.size(); ++i) {
    if (argv[i] == "--nproc") {
      ++i;  // and its value
      continue;
    }
    if (argv[i].rfind("--nproc=", 0) == 0) continue;
    out.push_back(argv[i]);
  }
  return out;
}

namespace {

// Worker `r` of `nproc`: this executable again with `args`, the rank in torchrun's variables, rank 0's store on
// `port`; stdout kept for rank 0 only (one result). Returns its pid.
pid_t start_worker(const std::vector<std::string>& args, int r, int nproc, int port) {
  const pid_t pid = fork();
  ALPS_CHECK(pid >= 0, "--nproc: cannot start worker ", r, ": ", std::strerror(errno));
  if (pid != 0) return pid;
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  setenv("RANK", std::to_string(r).c_str(), 1);
  setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
  setenv("WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  setenv("LOCAL_WORLD_SIZE", std::to_string(nproc).c_str(), 1);
  setenv("MASTER_ADDR", "127.0.0.1", 1);
  setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
  if (r != 0) {
    const int devnull = open("/dev/null", O_WRONLY);
    if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
  }
  std::vector<char*> argv;
  for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  execv("/proc/self/exe", argv.data());
  std::fprintf(stderr, "alps --nproc: cannot start worker %d: %s\n", r, std::strerror(errno));
  _exit(127);
}

// Waits for every worker; forwards Ctrl-C and SIGTERM to them; when one fails, stops the others (SIGTERM, then
// SIGKILL after `grace_seconds`). Returns the first failure's exit code, 0 when all succeed.
int supervise(std::map<pid_t, int> rank_of, int nproc, int grace_seconds) {
  int result = 0;
  bool stopping = false;
  int forwarded = 0;  // the signal the user sent, passed on: workers ended by it did as asked
  auto stop_others = [&](int sig) {
    for (const auto& [pid, r] : rank_of) kill(pid, sig);
  };
  std::chrono::steady_clock::time_point stop_deadline;
  while (!rank_of.empty()) {
    if (g_forward != 0) {  // Ctrl-C or SIGTERM to this process: the workers get it and save what they can
      stop_others(g_forward);
      forwarded = g_forward;
      g_forward = 0;
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0 && rank_of.count(pid) > 0) {
      const int r = rank_of[pid];
      rank_of.erase(pid);
      if (forwarded != 0 && WIFSIGNALED(status) && WTERMSIG(status) == forwarded) {
        if (result == 0) result = exit_code(status);  // interrupted, as the user asked: no error to report
        continue;
      }
      if (status != 0 && result == 0) {
        result = exit_code(status);
        if (!rank_of.empty()) {
          spdlog::error("alps --nproc: worker {} (rank {} of {}) {}; stopping the other workers", pid, r, nproc,
                        describe(status));
          stop_others(SIGTERM);
          stopping = true;
          stop_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(grace_seconds);
        } else {
          spdlog::error("alps --nproc: worker {} (rank {} of {}) {}", pid, r, nproc, describe(status));
        }
      }
      continue;
    }
    if (stopping && std::chrono::steady_clock::now() > stop_deadline) {
      stop_others(SIGKILL);
      stopping = false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return result;
}

}  // namespace

int run_local_workers(const std::vector<std::string>& args, int nproc, int grace_seconds) {
  ALPS_USAGE_CHECK(nproc >= 1, "--nproc must be at least 1, got ", nproc);
  ALPS_USAGE_CHECK(std::getenv("RANK") == nullptr && std::getenv("WORLD_SIZE") == nullptr,
                   "--nproc starts the workers itself, but RANK/WORLD_SIZE are set: this process is already one "
                   "of a distributed run (torchrun); drop --nproc");
  const int port = free_local_port();  // rank 0's store binds it
  struct sigaction sa {};
  sa.sa_handler = remember_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::map<pid_t, int> rank_of;
  for (int r = 0; r < nproc; ++r) rank_of[start_worker(args, r, nproc, port)] = r;
  return supervise(std::move(rank_of), nproc, grace_seconds);
}

}  // namespace alps::dist
