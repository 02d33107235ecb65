#include "alps/io/staged_path.h"

#include <unistd.h>

#include <system_error>

#include "alps/core/error.h"

namespace alps::io {

namespace fs = std::filesystem;

StagedPath::StagedPath(fs::path final_path) : final_(std::move(final_path)) {
  fs::path dir = final_.parent_path();
  if (dir.empty()) dir = ".";
  ALPS_CHECK(fs::is_directory(dir), "cannot write ", final_, ": directory ", dir, " does not exist");
  temp_ = dir / ("." + final_.filename().string() + ".tmp-" + std::to_string(::getpid()));
  std::error_code ec;
  fs::remove_all(temp_, ec);
}

StagedPath::~StagedPath() {
  if (committed_) return;
  std::error_code ec;  // best effort: a destructor must not throw while an error is already propagating
  fs::remove_all(temp_, ec);
}

void StagedPath::commit() {
  ALPS_CHECK(fs::exists(temp_), "nothing was written to ", temp_, " for ", final_);
  std::error_code ec;
  if (fs::is_directory(final_) && !fs::is_symlink(final_)) {
    fs::remove_all(final_, ec);
    ALPS_CHECK(!ec, "cannot replace ", final_, ": ", ec.message());
  }
  fs::rename(temp_, final_, ec);
  ALPS_CHECK(!ec, "cannot rename ", temp_, " to ", final_, ": ", ec.message());
  committed_ = true;
}

}  // namespace alps::io
