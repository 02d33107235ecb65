#include "alps/core/error.h"

#include <cstring>

namespace alps::detail {

std::string where(const char* file, int line) {
  // Keep the path from the project root: "src/io/safetensors.cc:42" is enough to find the check.
  const char* rel = std::strstr(file, "/src/");
  if (rel == nullptr) rel = std::strstr(file, "/apps/");
  return std::string(rel != nullptr ? rel + 1 : file) + ":" + std::to_string(line);
}

}  // namespace alps::detail
