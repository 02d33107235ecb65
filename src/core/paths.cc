#include "alps/core/paths.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

#include "alps/core/error.h"
#include "alps/core/suggest.h"

#ifndef ALPS_BUILT_DATA_DIR
#define ALPS_BUILT_DATA_DIR ""
#endif

namespace alps {

namespace fs = std::filesystem;

fs::path executable_dir() {
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

DataDir find_data_dir(const std::string& flag) {
  if (!flag.empty()) return {flag, "--data-dir"};
  if (const char* env = std::getenv("ALPS_DATA_DIR"); env != nullptr && *env != '\0') return {env, "$ALPS_DATA_DIR"};
  // `cmake --install` puts the executable in <prefix>/bin and the shipped data in <prefix>/share/alps/data; a build
  // tree has no such directory beside its executable.
  if (const fs::path exe = executable_dir(); !exe.empty()) {
    const fs::path installed = exe.parent_path() / "share" / "alps" / "data";
    std::error_code ec;
    if (fs::is_directory(installed, ec)) return {installed, "installed with alps"};
  }
  return {ALPS_BUILT_DATA_DIR, "fixed when alps was built"};
}

fs::path cache_dir() {
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v != nullptr ? v : "";
  };
  if (!env("ALPS_CACHE_DIR").empty()) return env("ALPS_CACHE_DIR");
  if (!env("XDG_CACHE_HOME").empty()) return fs::path(env("XDG_CACHE_HOME")) / "alps";
  if (!env("HOME").empty()) return fs::path(env("HOME")) / ".cache" / "alps";
  return {};
}

fs::path data_dir(const std::string& flag) { return find_data_dir(flag).path; }

std::string data_dir_hint(const fs::path& dir) {
  return "; looked in the data directory " + dir.string() +
         " (--data-dir DIR or $ALPS_DATA_DIR names another; `alps --version` shows which one is used)";
}

fs::path resolve_model_dir(const std::string& flag, const fs::path& data_dir) {
  if (fs::exists(flag)) return flag;
  const fs::path models = data_dir / "models";
  if (flag.find('/') == std::string::npos && fs::is_directory(models / flag)) {
    spdlog::info("model {}: {} (from the data directory)", flag, (models / flag).string());
    return models / flag;
  }
  std::vector<std::string> names;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(models, ec))
    if (e.is_directory()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  ALPS_FAIL("--model ", flag, ": does not exist, nor is it a model of the data directory (", models.string(),
            names.empty() ? " holds none" : " holds " + join_names(names), ")", did_you_mean(flag, names));
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
