#pragma once
#include <filesystem>
#include <string>

namespace alps::io {

/// What commit() does with a file found at the final path: one that a user or another run put there while alps
/// was working (the name was checked when the run started) is kept unless the user asked for replacement
/// (`--overwrite`) or the file is alps's own (a run's resume state, rewritten block after block).
enum class ExistingFile { kKeep, kReplace };

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
  /// Syncs temp() to disk and renames it onto final_path(). A directory is only ever moved onto a missing or empty
  /// one (a non-empty directory is an error, never deleted). A file replaces one already there atomically with
  /// ExistingFile::kReplace; with kKeep, the check and the rename are one step, and if a file is there the error
  /// names it and where the output was left (temp() is then kept, not removed).
  void commit(ExistingFile existing = ExistingFile::kKeep);

 private:
  std::filesystem::path final_;
  std::filesystem::path temp_;
  bool committed_ = false;
};

/// Writes `text` to `path` through a StagedPath: the file appears complete or not at all.
void write_text_staged(const std::filesystem::path& path, const std::string& text, ExistingFile existing);

}  // namespace alps::io
