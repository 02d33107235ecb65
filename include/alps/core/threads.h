#pragma once
// `--threads N`: the cores alps may use, given to every thread pool of the process at once. Matrix products run on
// the BLAS library's pool where it has one (Debian's libtorch calls OpenBLAS, whose pthreads pool is separate from
// libtorch's OpenMP pool); there libtorch's intra-op pool keeps one thread, because a second pool of spinning
// OpenMP workers competes with BLAS for the same cores (on the 2-core development machine ALPS on a 768x768 layer
// took 1.34 s with 2 OpenMP threads and 0.76 s with 1; docs/benchmarks.md). Where BLAS runs inside libtorch's
// OpenMP pool (PyPI's libtorch, MKL), that pool gets the N threads, and an OpenBLAS loaded for alps's direct LAPACK
// calls gets N too. alps's own vector passes (core/parallel.h) get N either way.
#include <string>

namespace alps {

struct ThreadSettings {
  int threads = 0;          ///< the cores alps may use
  int blas = 0;             ///< the BLAS library's own pool (0: it has none; products run on libtorch's pool)
  int intra_op = 0;         ///< libtorch's intra-op (OpenMP) pool
  int passes = 0;           ///< alps's own CPU passes
  std::string blas_library; ///< whose pool `blas` is ("OpenBLAS"), empty without one
};

/// The default of `--threads`: $OMP_NUM_THREADS when it holds a positive number (so that a parent limiting its
/// children, such as a test runner, is obeyed), else the cores this process may run on.
int default_threads();

/// The most threads --threads or $OMP_NUM_THREADS may give: 4x the machine's cores (every pass starts that many
/// threads at once; far beyond the cores they only contend, and 100000 of them exhaust the machine).
int max_threads();

/// Whether ATen's matrix products run on libtorch's intra-op pool (MKL, or no BLAS pool of its own) rather than on
/// OpenBLAS's pool.
bool products_in_intra_op_pool();

/// Sets every pool for `n` cores (n <= 0: default_threads()) and returns what each got.
ThreadSettings configure_threads(int n);

/// The pools as they are now.
ThreadSettings thread_settings();

/// While alive, BLAS products run on their calling thread only (OpenBLAS's pool set to one thread; nothing to do
/// where products run on libtorch's pool), so that alps's own pool can run many small products side by side, one
/// per core, each on data in that core's cache. Restores the pool's size when it ends.
class SerialBlas {
 public:
  SerialBlas();
  ~SerialBlas();
  SerialBlas(const SerialBlas&) = delete;
  SerialBlas& operator=(const SerialBlas&) = delete;

 private:
  int saved_ = 0;
};

/// "2 (OpenBLAS pool 2, libtorch intra-op 1, alps passes 2)".
std::string thread_settings_text(const ThreadSettings& s);

}  // namespace alps
