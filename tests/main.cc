// Test entry point: the same binaries pass on CPU-only machines, where tests named *_CUDA are filtered out.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>
#include <torch/cuda.h>

#include <string>

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  spdlog::set_level(spdlog::level::warn);
  if (!torch::cuda::is_available()) {
    std::string filter = ::testing::GTEST_FLAG(filter);
    filter += (filter.find('-') == std::string::npos ? "-" : ":") + std::string("*_CUDA");
    ::testing::GTEST_FLAG(filter) = filter;
  }
  return RUN_ALL_TESTS();
}
