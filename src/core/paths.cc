#include "alps/core/paths.h"

#include <cstdlib>

#include "alps/core/error.h"

namespace alps {

namespace fs = std::filesystem;

fs::path data_dir(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("ALPS_DATA_DIR"); env != nullptr && *env != '\0') return env;
  return fs::path("..") / "shared" / "data";
}

void require_regular_file(const fs::path& path, const std::string& what) {
  const std::string name = (what.empty() ? std::string("file") : what) + " " + path.string();
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  ALPS_CHECK(fs::exists(st), name, " does not exist");
  ALPS_CHECK(!fs::is_directory(st), name, " is a directory, expected a file");
  ALPS_CHECK(fs::is_regular_file(st), name, " is not a regular file");
}

}  // namespace alps
