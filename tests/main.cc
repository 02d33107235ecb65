// Test entry point: the same binaries pass on CPU-only machines, where tests named *_CUDA are filtered out.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include <cstdlib>
#include <string>

#include "alps/core/threads.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  spdlog::set_level(spdlog::level::warn);
  // ctest runs test processes side by side (-j), about one per core. A libtorch whose OpenMP pool has a thread per
  // core (PyPI's; Debian's has one) then oversubscribes the cores, and OpenMP's spin-waiting turns that into runs ten
  // times slower. One thread per test process, and per alps process it starts (they inherit the variable), unless
  // the caller chose otherwise. The pools of this process are then set as alps sets its own from the variable
  // (OpenBLAS read it when it was loaded, before it was set here), so that a test comparing its result with an alps
  // process's runs the same arithmetic: on some CPUs OpenBLAS's products round differently with another thread count.
  setenv("OMP_NUM_THREADS", "1", /*overwrite=*/0);
  alps::configure_threads(0);
  if (!torch::cuda::is_available()) {
    std::string filter = ::testing::GTEST_FLAG(filter);
    filter += (filter.find('-') == std::string::npos ? "-" : ":") + std::string("*_CUDA");
    ::testing::GTEST_FLAG(filter) = filter;
  }
  return RUN_ALL_TESTS();
}
