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

TEST(Log, FormatsDurations) {
  EXPECT_EQ(format_duration(3.21), "3.2s");
  EXPECT_EQ(format_duration(65), "1m05s");
  EXPECT_EQ(format_duration(3720), "1h02m");
}

}  // namespace alps
