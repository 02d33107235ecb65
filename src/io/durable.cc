#include "alps/io/durable.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "alps/core/error.h"

namespace alps::io {

namespace fs = std::filesystem;

void sync_path(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  ALPS_CHECK(fd >= 0, "cannot open ", path.string(), " to sync it: ", std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  // Some file systems (and directories on a few) cannot fsync; the data is then as safe as they make it.
  ALPS_CHECK(rc == 0 || err == EINVAL || err == EROFS, "cannot sync ", path.string(), ": ", std::strerror(err));
}

void sync_tree(const fs::path& dir) {
  std::vector<fs::path> dirs;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_symlink()) continue;
    if (e.is_directory())
      dirs.push_back(e.path());
    else if (e.is_regular_file())
      sync_path(e.path());
  }
  // Children before parents: a directory entry is only durable once its parent directory is synced.
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) sync_path(*it);
  sync_path(dir);
}

bool exchange_paths(const fs::path& a, const fs::path& b) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) return true;
  const int err = errno;
  if (err == EINVAL || err == ENOSYS || err == ENOTSUP) return false;
  ALPS_FAIL("cannot exchange ", a.string(), " and ", b.string(), ": ", std::strerror(err));
}

void rename_path(const fs::path& from, const fs::path& to) {
  ALPS_CHECK(::rename(from.c_str(), to.c_str()) == 0, "cannot rename ", from.string(), " to ", to.string(), ": ",
             std::strerror(errno));
}

}  // namespace alps::io
