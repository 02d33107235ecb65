#pragma once
// The output directory of `alps prune` and the rules that keep users' data safe around it:
// - alps replaces only what it wrote: an empty directory, or one holding an alps checkpoint (its report lists every
//   file alps put there) and/or the resume state of an interrupted run; anything else is refused before any work;
// - never the input model, anything containing it or inside it, nor the current directory or one of its parents;
// - one run per output directory (an flock on it, released by the kernel when the process dies);
// - the new checkpoint is built in a staging directory beside the output and swapped in by one atomic rename, so at
//   every instant the path holds either the previous output or the new one, complete;
// - staging or replaced directories left by runs that died are recognised by name and owner pid and cleaned.
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "alps/io/dir_lock.h"

namespace alps::pipeline {

/// Name of the resume-state subdirectory inside the output directory.
inline constexpr const char* kStateDir = ".alps-state";
/// The run report, written into the checkpoint directory; its "files" list is what alps may later replace.
inline constexpr const char* kReportFile = "alps-report.json";
/// Beside the weights when a method formed N:M groups in another order of a linear's inputs: for each such weight
/// (its checkpoint name), the int64 order in which its inputs are N:M (RunState::input_orders).
inline constexpr const char* kChannelOrdersFile = "channel_orders.safetensors";

struct OutputRequest {
  std::filesystem::path out;
  std::filesystem::path model_dir;      ///< never written, nor anything containing it
  std::filesystem::path dump_problems;  ///< optional; must lie outside `out` (it would be replaced with it)
  bool overwrite = false;
  bool resume = false;
};

/// What an output path holds today.
struct OutputContents {
  bool exists = false;
  bool complete = false;      ///< an alps checkpoint with its report
  bool has_state = false;     ///< resume state (state.json) of an interrupted run
  int64_t blocks_saved = 0;   ///< blocks that state covers; -1 when its state.json cannot be read
  std::vector<std::string> foreign;  ///< entries alps did not write (refused even with --overwrite)
};
OutputContents inspect_output(const std::filesystem::path& out);

/// Absolute and lexically normal, without a trailing separator: "out/", "./out/." and "a/../out" name "out".
std::filesystem::path normalize_output_path(const std::filesystem::path& out);

/// Every check on the output path that needs no lock, done before any work; throws alps::Error saying why. It
/// writes nothing, except that it removes (or completes the commit of) what dead alps runs left beside the output.
void check_output_request(const OutputRequest& req);

class OutputDir {
 public:
  /// Checks the request again, creates the output directory (and missing parents), locks it and decides, from what
  /// it holds and the flags, whether this run resumes (resume()) or starts afresh (begin_fresh_state()).
  explicit OutputDir(const OutputRequest& req);

  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;
  ~OutputDir();

  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path state_dir() const { return path_ / kStateDir; }
  bool resume() const { return resume_; }
  /// For a run that starts afresh: removes an abandoned run's state (one that --overwrite replaces) and leaves an
  /// empty state directory. Called once the new run's inputs are ready, so that a bad input found before that
  /// (a calibration text too short, not UTF-8) fails with the interrupted run's blocks still there to resume.
  void begin_fresh_state();

  /// An empty directory beside the output (same file system, so the final rename is atomic) to write the new
  /// checkpoint into.
  std::filesystem::path begin_staging();
  /// Makes the staged checkpoint the output in one atomic step, then removes what it replaced, resume state included.
  /// Files that a user put into the output directory while the run worked are never removed: found before the
  /// swap, they stop it (the staged checkpoint is kept and named, the resume state too); appearing during it, the
  /// replaced directory is kept beside the output, named in a warning.
  void commit();

 private:
  std::filesystem::path sibling(const char* kind) const;
  void remove_created() const;  // the output directory and the parents this run created, if still empty

  std::filesystem::path path_;
  std::optional<io::DirLock> lock_;
  std::optional<io::DirLock> staging_lock_;
  std::filesystem::path staging_;
  bool created_ = false;    // this run made the directory: remove it again if the run saves nothing
  std::vector<std::filesystem::path> created_parents_;  // and these parents, innermost first
  bool resume_ = false;
  bool committed_ = false;
  bool keep_staging_ = false;  // a commit refused because of foreign files: the staged checkpoint is the user's now
};

}  // namespace alps::pipeline
