#include "alps/core/error.h"

#include <gtest/gtest.h>

#include "alps/core/device.h"
#include "alps/core/log.h"

namespace alps {

TEST(Error, CarriesMessageAndSite) {
  try {
    ALPS_CHECK(1 + 1 == 3, "expected ", 3, ", got ", 2);
    FAIL() << "ALPS_CHECK did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "expected 3, got 2");
    EXPECT_NE(e.where().find("error_test.cc:"), std::string::npos) << e.where();
  }
}

TEST(Device, ParsesNamesAndRejectsUnknown) {
  EXPECT_EQ(resolve_device("cpu"), c10::Device(c10::kCPU));
  EXPECT_THROW(resolve_device("tpu"), Error);
  EXPECT_EQ(parse_dtype("bf16"), c10::kBFloat16);
  EXPECT_THROW(parse_dtype("int4"), Error);
}

// What libtorch throws when a device's memory runs out: the allocator's own error, and cuBLAS / cuSOLVER statuses
// (torch's messages) for handles and workspaces, which the pipeline must turn into the same advice.
TEST(Device, RecognisesOutOfMemoryErrors) {
  const c10::SourceLocation here{__func__, __FILE__, static_cast<uint32_t>(__LINE__)};
  EXPECT_TRUE(is_device_out_of_memory(c10::OutOfMemoryError(here, "CUDA out of memory. Tried to allocate 2.00 GiB")));
  EXPECT_TRUE(is_device_out_of_memory(
      c10::Error(here, "CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`")));
  EXPECT_TRUE(is_device_out_of_memory(c10::Error(here, "cusolver error: CUSOLVER_STATUS_ALLOC_FAILED, when calling "
                                                       "`cusolverDnCreate(&handle)`")));
  EXPECT_FALSE(is_device_out_of_memory(c10::Error(here, "CUDA error: an illegal memory access was encountered")));
  EXPECT_FALSE(is_device_out_of_memory(c10::Error(here, "expected scalar type Float but found Double")));
}

TEST(Log, FormatsDurations) {
  EXPECT_EQ(format_duration(3.21), "3.2s");
  EXPECT_EQ(format_duration(65), "1m05s");
  EXPECT_EQ(format_duration(3720), "1h02m");
}

}  // namespace alps
