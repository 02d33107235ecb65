#include "alps/io/dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "alps/core/error.h"

namespace alps::io {

std::optional<DirLock> DirLock::try_lock(const std::filesystem::path& dir) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ALPS_CHECK(fd >= 0, "cannot open directory ", dir.string(), ": ", std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK) return std::nullopt;
      ALPS_FAIL("cannot lock ", dir.string(), ": ", std::strerror(err));
    }
    // A run that finishes replaces the directory by renaming: a lock on the old inode would guard nothing.
    struct stat held{}, named{};
    if (::fstat(fd, &held) == 0 && ::stat(dir.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
        held.st_ino == named.st_ino)
      return DirLock(fd);
    ::close(fd);
  }
  ALPS_FAIL("cannot lock ", dir.string(), ": it keeps being replaced by another process");
}

DirLock::DirLock(DirLock&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}

DirLock& DirLock::operator=(DirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

DirLock::~DirLock() {
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace alps::io
