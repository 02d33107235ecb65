#include "alps/io/staged_path.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <system_error>

#include "alps/core/error.h"
#include "alps/io/durable.h"

namespace alps::io {

namespace fs = std::filesystem;

namespace {

// rename(2) that fails with EEXIST instead of replacing a file. File systems without RENAME_NOREPLACE get link(2),
// which refuses an existing name the same way, and then the temporary name is dropped.
bool rename_no_replace(const fs::path& from, const fs::path& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return true;
  if (errno != EINVAL && errno != ENOSYS) return false;
  if (::link(from.c_str(), to.c_str()) != 0) return false;
  ::unlink(from.c_str());
  return true;
}

}  // namespace

StagedPath::StagedPath(fs::path final_path) : final_(std::move(final_path)) {
  ALPS_CHECK(final_.has_filename(), "cannot write ", final_.string(), ": not a file name");
  fs::path dir = final_.parent_path();
  if (dir.empty()) dir = ".";
  ALPS_CHECK(fs::is_directory(dir), "cannot write ", final_.string(), ": directory ", dir.string(), " does not exist");
  temp_ = dir / ("." + final_.filename().string() + ".tmp-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(temp_, ec);  // this pid's own, from a run that died with the same pid
}

StagedPath::~StagedPath() {
  if (committed_) return;
  std::error_code ec;  // best effort: a destructor must not throw while an error is already propagating
  fs::remove_all(temp_, ec);
}

void StagedPath::commit(ExistingFile existing) {
  ALPS_CHECK(fs::exists(temp_), "nothing was written to ", temp_.string(), " for ", final_.string());
  // Data before name: after a crash the final name must never point at a file whose blocks were not yet written.
  const bool directory = fs::is_directory(temp_);
  if (directory)
    sync_tree(temp_);
  else
    sync_path(temp_);
  if (directory || existing == ExistingFile::kReplace) {
    ALPS_CHECK(::rename(temp_.c_str(), final_.c_str()) == 0, "cannot write ", final_.string(), ": ",
               errno == ENOTEMPTY || errno == EEXIST ? "a directory that is not empty is in the way"
                                                     : std::strerror(errno));
  } else if (!rename_no_replace(temp_, final_)) {
    const int err = errno;
    if (err == EEXIST) committed_ = true;  // the output stays under its temporary name, as the error says
    ALPS_CHECK(err != EEXIST, "cannot write ", final_.string(),
               ": a file by that name appeared while alps was running; alps does not replace files unless told to "
               "(--overwrite). The output is in ", temp_.string());
    ALPS_FAIL("cannot write ", final_.string(), ": ", std::strerror(err));
  }
  committed_ = true;
  fs::path dir = final_.parent_path();
  sync_path(dir.empty() ? fs::path(".") : dir);
}

void write_text_staged(const std::filesystem::path& path, const std::string& text, ExistingFile existing) {
  StagedPath staged(path);
  {
    std::ofstream out(staged.temp());
    out << text;
    ALPS_CHECK(out.good(), "write error on ", staged.temp().string());
  }
  staged.commit(existing);
}

}  // namespace alps::io
