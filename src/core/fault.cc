#include "alps/core/fault.h"

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <thread>

namespace alps {

bool fault_enabled(std::string_view name) {
  const char* env = std::getenv("ALPS_TEST_FAULT");
  if (env == nullptr) return false;
  const std::string_view list(env);
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = std::min(list.find(',', start), list.size());
    if (list.substr(start, end - start) == name) return true;
    start = end + 1;
  }
  return false;
}

void crash_point(std::string_view name) {
  if (std::getenv("ALPS_TEST_FAULT") == nullptr) return;
  // "crash:NAME" fires the first time the point is reached, "crash:NAME@K" the K-th time; "interrupt:NAME[@K]"
  // raises SIGINT there instead, as Ctrl-C would.
  // Points are reached on the resume state's writer thread too.
  static std::mutex mutex;
  static std::map<std::string, int, std::less<>> reached;
  int k = 0;
  {
    std::lock_guard<std::mutex> lock(mutex);
    k = ++reached[std::string(name)];
  }
  // "...#R" (after the name or the count): only in the process of rank R of a distributed run ($RANK).
  const char* rank = std::getenv("RANK");
  auto listed = [&](const std::string& point) {
    return fault_enabled(point) || (rank != nullptr && fault_enabled(point + "#" + rank));
  };
  auto fires = [&](const char* kind) {
    const std::string point = kind + std::string(name);
    return (k == 1 && listed(point)) || listed(point + "@" + std::to_string(k));
  };
  if (fires("crash:")) std::raise(SIGKILL);
  if (fires("interrupt:")) std::raise(SIGINT);
  if (fires("hang:"))  // a process that stops answering without dying: only a timeout elsewhere notices
    for (;;) std::this_thread::sleep_for(std::chrono::hours(1));
}

}  // namespace alps
