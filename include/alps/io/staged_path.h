#pragma once
#include <filesystem>

namespace alps::io {

/// A file or directory written under a temporary sibling name and renamed into place by commit(), so a
/// half-written output never looks finished. If commit() is never reached the temporary is removed.
class StagedPath {
 public:
  explicit StagedPath(std::filesystem::path final_path);
  StagedPath(const StagedPath&) = delete;
  StagedPath& operator=(const StagedPath&) = delete;
  ~StagedPath();

  /// Where to write: "<dir>/.<name>.tmp-<pid>".
  const std::filesystem::path& temp() const { return temp_; }
  const std::filesystem::path& final_path() const { return final_; }
  /// Syncs temp() to disk and renames it onto final_path(): atomically replacing a file there, while a directory
  /// is only ever moved onto a missing or empty one (a non-empty directory is an error, never deleted).
  void commit();

 private:
  std::filesystem::path final_;
  std::filesystem::path temp_;
  bool committed_ = false;
};

}  // namespace alps::io
