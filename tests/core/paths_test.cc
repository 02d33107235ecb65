#include "alps/core/paths.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace alps {
namespace {

// Restores an environment variable when the test ends.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_.empty())
      ::unsetenv(name_);
    else
      ::setenv(name_, old_.c_str(), 1);
  }

 private:
  const char* name_;
  std::string old_;
};

// --data-dir, else $ALPS_DATA_DIR, else the directory fixed at build time: never relative to the working directory.
TEST(DataDir, FlagThenEnvironmentThenTheBuiltOne) {
  {
    ScopedEnv env("ALPS_DATA_DIR", "/from/env");
    EXPECT_EQ(find_data_dir("/from/flag").path, "/from/flag");
    EXPECT_EQ(find_data_dir("/from/flag").origin, "--data-dir");
    EXPECT_EQ(find_data_dir().path, "/from/env");
    EXPECT_EQ(find_data_dir().origin, "$ALPS_DATA_DIR");
  }
  ScopedEnv unset("ALPS_DATA_DIR", nullptr);
  const DataDir built = find_data_dir();
  EXPECT_EQ(built.origin, "fixed when alps was built");  // a test binary is not installed
  EXPECT_TRUE(built.path.is_absolute()) << built.path;
  EXPECT_TRUE(std::filesystem::is_directory(built.path / "models" / "stories260K-hf")) << built.path;
  EXPECT_NE(data_dir_hint(built.path).find(built.path.string()), std::string::npos);
}

}  // namespace
}  // namespace alps
