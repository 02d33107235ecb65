#pragma once
// An exclusive advisory lock (flock) on a directory, held for the life of the object. The kernel releases it when the
// process dies however it dies, so a killed run never leaves a stale lock behind.
#include <filesystem>
#include <optional>

namespace alps::io {

class DirLock {
 public:
  /// Locks the directory `dir` without waiting; std::nullopt when another process holds the lock. The lock is taken
  /// on the directory that `dir` names once locked: a directory renamed away meanwhile is let go and `dir` retried.
  static std::optional<DirLock> try_lock(const std::filesystem::path& dir);

  DirLock(DirLock&& other) noexcept;
  DirLock& operator=(DirLock&& other) noexcept;
  DirLock(const DirLock&) = delete;
  DirLock& operator=(const DirLock&) = delete;
  ~DirLock();

 private:
  explicit DirLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

}  // namespace alps::io
