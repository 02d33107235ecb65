#include "alps/core/threads.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <sched.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <thread>
#include <utility>

#include "alps/core/parallel.h"

namespace alps {

namespace {

// OpenBLAS is reached through libblas.so.3 at run time (Debian's alternatives), so its thread control is looked
// up in the loaded process rather than linked.
using SetThreads = void (*)(int);
using GetThreads = int (*)();
SetThreads openblas_set() { return reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads")); }
GetThreads openblas_get() { return reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads")); }

int affinity_cores() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

int& configured() {
  static int n = 0;
  return n;
}

}  // namespace

int max_threads() { return 4 * static_cast<int>(std::max(1U, std::thread::hardware_concurrency())); }

int default_threads() {
  if (const char* env = std::getenv("OMP_NUM_THREADS")) {
    const long cap = max_threads();
    char* end = nullptr;
    const long n = std::strtol(env, &end, 10);
    if (end != env && *end == '\0' && n > 0 && n <= cap) return static_cast<int>(n);
    static bool warned = false;  // asked for again when the pools are set; one warning is the news
    if (!std::exchange(warned, true))
      spdlog::warn("OMP_NUM_THREADS={} ignored (expected 1 to {}, 4x the cores); using the {} cores available", env,
                   cap, affinity_cores());
  }
  return affinity_cores();
}

bool products_in_intra_op_pool() {
  // PyPI's libtorch runs ATen's products on MKL inside its own OpenMP pool; an OpenBLAS loaded beside it (for
  // alps's direct LAPACK calls) then serves those calls only.
  return at::hasMKL() || openblas_set() == nullptr;
}

ThreadSettings configure_threads(int n) {
  if (n <= 0) n = default_threads();
  configured() = n;
  if (SetThreads set = openblas_set()) set(n);
  at::set_num_threads(products_in_intra_op_pool() ? n : 1);
  parallel_threads_cap() = n;
  return thread_settings();
}

ThreadSettings thread_settings() {
  ThreadSettings s;
  s.intra_op = at::get_num_threads();
  if (GetThreads get = openblas_get()) {
    s.blas = get();
    s.blas_library = "OpenBLAS";
  }
  s.passes = parallel_threads(int64_t{1} << 40);
  s.threads = configured() > 0 ? configured() : std::max(s.blas, s.intra_op);
  return s;
}

SerialBlas::SerialBlas() {
  GetThreads get = openblas_get();
  SetThreads set = openblas_set();
  if (get == nullptr || set == nullptr || products_in_intra_op_pool()) return;
  saved_ = get();
  if (saved_ > 1) set(1);
}

SerialBlas::~SerialBlas() {
  if (saved_ > 1) openblas_set()(saved_);
}

std::string thread_settings_text(const ThreadSettings& s) {
  std::string out = std::to_string(s.threads) + " (";
  if (!s.blas_library.empty()) out += s.blas_library + " pool " + std::to_string(s.blas) + ", ";
  return out + "libtorch intra-op " + std::to_string(s.intra_op) + ", alps passes " + std::to_string(s.passes) + ")";
}

}  // namespace alps
