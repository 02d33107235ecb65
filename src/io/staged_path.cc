#include "alps/io/staged_path.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <system_error>

#include "alps/core/error.h"
#include "alps/io/durable.h"

namespace alps::io {

namespace fs = std::filesystem;

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

void StagedPath::commit() {
  ALPS_CHECK(fs::exists(temp_), "nothing was written to ", temp_.string(), " for ", final_.string());
  // Data before name: after a crash the final name must never point at a file whose blocks were not yet written.
  if (fs::is_directory(temp_))
    sync_tree(temp_);
  else
    sync_path(temp_);
  ALPS_CHECK(::rename(temp_.c_str(), final_.c_str()) == 0, "cannot write ", final_.string(), ": ",
             errno == ENOTEMPTY || errno == EEXIST ? "a directory that is not empty is in the way" : std::strerror(errno));
  committed_ = true;
  fs::path dir = final_.parent_path();
  sync_path(dir.empty() ? fs::path(".") : dir);
}

}  // namespace alps::io
