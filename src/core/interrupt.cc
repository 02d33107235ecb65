#include "alps/core/interrupt.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>

namespace alps {

namespace {

// Two buffers: the handler reads the one published last while the next line is written into the other, so it never
// sees a line half written.
constexpr size_t kCapacity = 1024;
char g_lines[2][kCapacity];
std::atomic<int> g_published{-1};

void on_signal(int sig) {
  const int i = g_published.load();
  if (i >= 0) {
    const char* line = g_lines[i];
    ssize_t unused = ::write(STDERR_FILENO, "\n", 1);
    unused = ::write(STDERR_FILENO, line, std::strlen(line));
    (void)unused;
  }
  // SA_RESETHAND restored the default action: the process ends as the signal ends it.
  ::raise(sig);
}

}  // namespace

void install_interrupt_notice() {
  static std::atomic<bool> installed{false};
  if (installed.exchange(true)) return;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM}) ::sigaction(sig, &sa, nullptr);
}

void set_interrupt_notice(const std::string& line) {
  if (line.empty()) {
    g_published.store(-1);
    return;
  }
  const int next = g_published.load() == 0 ? 1 : 0;
  const size_t n = std::min(line.size(), kCapacity - 2);
  std::memcpy(g_lines[next], line.data(), n);
  g_lines[next][n] = '\n';
  g_lines[next][n + 1] = '\0';
  g_published.store(next);
}

}  // namespace alps
