#include "alps/core/paths.h"

#include <cstdlib>

namespace alps {

std::filesystem::path data_dir(const std::string& flag) {
  if (!flag.empty()) return flag;
  if (const char* env = std::getenv("ALPS_DATA_DIR"); env != nullptr && *env != '\0') return env;
  return std::filesystem::path("..") / "shared" / "data";
}

}  // namespace alps
