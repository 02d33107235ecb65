#include "alps/pipeline/output_dir.h"

#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstring>
#include <string_view>
#include <nlohmann/json.hpp>
#include <map>

#include "alps/core/error.h"
#include "alps/core/fault.h"
#include "alps/io/durable.h"
#include "alps/io/text_files.h"

namespace alps::pipeline {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kStateFile = "state.json";

// `inner` lies strictly below `outer` (both canonical).
bool strictly_inside(const fs::path& inner, const fs::path& outer) {
  auto [o, i] = std::mismatch(outer.begin(), outer.end(), inner.begin(), inner.end());
  return o == outer.end() && i != inner.end();
}

bool same_or_inside(const fs::path& inner, const fs::path& outer) {
  return inner == outer || strictly_inside(inner, outer);
}

std::string join_names(const std::vector<std::string>& names, size_t at_most) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < at_most; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > at_most) out += fmt::format(" and {} more", names.size() - at_most);
  return out;
}

bool process_alive(pid_t pid) { return ::kill(pid, 0) == 0 || errno == EPERM; }

// state.json first: a removal cut short must never leave a state.json that names files already gone.
void discard_state(const fs::path& state_dir) {
  std::error_code ec;
  fs::remove(state_dir / kStateFile, ec);
  crash_point("discard-state");
  fs::remove_all(state_dir, ec);
  if (ec) spdlog::warn("could not remove {}: {}", state_dir.string(), ec.message());
}

// A staging or replaced output directory of alps's: its state goes first, as above.
void remove_output_tree(const fs::path& dir) {
  discard_state(dir / kStateDir);
  std::error_code ec;
  fs::remove_all(dir, ec);
  if (ec) spdlog::warn("could not remove {}: {}", dir.string(), ec.message());
}

enum class Start { kFresh, kResume, kNothingToResume };

// What this run does with the output it finds; refuses whatever would lose data or work.
Start decide_start(const fs::path& p, const OutputContents& c, const OutputRequest& req) {
  ALPS_CHECK(c.foreign.empty(), "output directory ", p.string(), " holds files that alps did not write (",
             join_names(c.foreign, 5), "); alps replaces only its own outputs: move them away or choose another --out");
  if (req.resume) {
    if (c.has_state) return Start::kResume;
    ALPS_CHECK(!c.complete, "--resume: ", p.string(),
               " holds a complete pruned checkpoint and no interrupted run; pass --overwrite to prune again");
    return Start::kNothingToResume;
  }
  if (req.overwrite) return Start::kFresh;
  ALPS_CHECK(!(c.has_state && c.blocks_saved != 0), "output directory ", p.string(), " holds an interrupted run (",
             c.blocks_saved < 0 ? "its state.json cannot be read"
                                : fmt::format("{} block{} done", c.blocks_saved, c.blocks_saved == 1 ? "" : "s"),
             "): pass --resume to continue it or --overwrite to start over");
  ALPS_CHECK(!c.complete, "output directory ", p.string(),
             " already holds a pruned checkpoint: pass --overwrite to replace it (the old one stays until the new one "
             "is complete)");
  return Start::kFresh;
}

// Staging and replaced directories of runs on `p`: ".<name>.alps-<kind>-<pid>" beside it.
struct Leftover {
  fs::path path;
  std::string kind;
  pid_t pid;
};

std::vector<Leftover> leftovers_of(const fs::path& p) {
  std::vector<Leftover> out;
  const std::string prefix = "." + p.filename().string() + ".alps-";
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(p.parent_path(), ec)) {
    const std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    const size_t dash = rest.find('-');
    if (dash == std::string::npos) continue;
    const std::string kind = rest.substr(0, dash), digits = rest.substr(dash + 1);
    if ((kind != "staging" && kind != "old") || digits.empty() || digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), ::isdigit))
      continue;
    out.push_back({e.path(), kind, static_cast<pid_t>(std::stol(digits))});
  }
  return out;
}

void clean_leftovers(const fs::path& p) {
  std::vector<Leftover> dead;
  for (auto& l : leftovers_of(p))
    if (l.pid != ::getpid() && !process_alive(l.pid)) dead.push_back(std::move(l));
  if (dead.empty()) return;
  std::error_code ec;
  if (!fs::exists(p)) {
    // A run died between moving its previous output aside and renaming the new one in (file systems without an
    // atomic exchange): its staged checkpoint is complete once the move-aside happened, so finish that commit.
    auto staged = std::find_if(dead.begin(), dead.end(), [](const Leftover& l) {
      return l.kind == "staging" && fs::exists(l.path / kReportFile);
    });
    auto old = std::find_if(dead.begin(), dead.end(), [](const Leftover& l) { return l.kind == "old"; });
    auto chosen = staged != dead.end() ? staged : old;
    if (chosen != dead.end()) {
      fs::rename(chosen->path, p, ec);
      if (!ec) {
        spdlog::warn("{}: completed the interrupted commit of a run that died (pid {}) from {}", p.string(),
                     chosen->pid, chosen->path.filename().string());
        dead.erase(chosen);
      }
    }
  }
  for (const auto& l : dead) {
    spdlog::info("removing {}, left by an alps run that died (pid {})", l.path.string(), l.pid);
    remove_output_tree(l.path);
  }
}

}  // namespace

fs::path normalize_output_path(const fs::path& out) {
  fs::path p = fs::absolute(out).lexically_normal();
  if (!p.has_filename() && p.has_relative_path()) p = p.parent_path();  // "dir/" -> "dir"
  return p;
}

OutputContents inspect_output(const fs::path& out) {
  OutputContents c;
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(out, ec))) return c;
  c.exists = true;
  std::map<std::string, int64_t> listed;  // name -> bytes alps wrote (-1: a directory of alps's)
  const fs::path report = out / kReportFile;
  if (fs::is_regular_file(report)) {
    try {
      const json r = io::read_json_file(report);
      for (const auto& f : r.at("files")) listed[f.at("name").get<std::string>()] = f.at("bytes").get<int64_t>();
      listed[kReportFile] = -2;
      c.complete = r.at("complete").get<bool>();
    } catch (const std::exception&) {
      listed.clear();  // a report that does not list what alps wrote proves nothing about the other files
    }
  }
  const fs::path state = out / kStateDir;
  if (fs::is_directory(fs::symlink_status(state, ec))) {
    listed[kStateDir] = -1;
    if (fs::is_regular_file(state / kStateFile)) {
      try {
        c.blocks_saved = io::read_json_file(state / kStateFile).at("next_block").get<int64_t>();
        c.has_state = true;
      } catch (const std::exception&) {
        c.has_state = true;  // damaged: --resume says what is wrong, --overwrite replaces it, nothing else guesses
        c.blocks_saved = -1;
      }
    }
  }
  for (const auto& e : fs::directory_iterator(out)) {
    const std::string name = e.path().filename().string();
    const auto it = listed.find(name);
    const bool dir = e.is_directory() && !e.is_symlink();
    if (it == listed.end() || (it->second >= 0 && (dir || !e.is_regular_file())))
      c.foreign.push_back(name + (dir ? "/" : ""));
    else if (it->second >= 0 && static_cast<int64_t>(e.file_size()) != it->second)
      c.foreign.push_back(name + " (changed since alps wrote it)");
  }
  if (!c.foreign.empty()) c.complete = false;
  return c;
}

void check_output_request(const OutputRequest& req) {
  const std::string shown = req.out.string();
  ALPS_USAGE_CHECK(!shown.empty(), "--out: expected a directory name, got an empty one");
  const fs::path p = normalize_output_path(req.out);
  // alps works beside --out, in ".NAME.alps-staging-PID", and renames that over --out at the end: a name the file
  // system takes without room for the suffix would fail after all the work, and on every resume.
  const size_t suffix = std::string_view(".alps-staging-").size() + 2 + 10;  // the dot, the pid's digits, spare
  const size_t name = p.filename().string().size();
  ALPS_USAGE_CHECK(name + suffix <= NAME_MAX, "--out ", shown, ": its last component is ", name,
                   " bytes long, and alps needs ", suffix, " more for its working copy beside it (at most ",
                   NAME_MAX - suffix, " bytes on this system)");
  ALPS_USAGE_CHECK(p.string().size() + suffix + 64 <= PATH_MAX, "--out ", shown, ": the path is ", p.string().size(),
                   " bytes long; alps's files under it would exceed the system's limit of ", PATH_MAX, " bytes");
  ALPS_CHECK(p.has_filename() && p.has_relative_path(), "--out ", shown,
             " cannot be an output directory: alps replaces --out as a whole when the run completes");
  std::error_code ec;
  const auto st = fs::symlink_status(p, ec);
  ALPS_CHECK(!fs::is_symlink(st), "--out ", shown,
             " is a symbolic link: give the directory itself (alps replaces --out as a whole, link included)");
  const bool exists = fs::exists(st);
  ALPS_CHECK(!exists || fs::is_directory(st), "--out ", shown, " is a file, not a directory");

  const fs::path cp = fs::weakly_canonical(p);
  if (fs::exists(req.model_dir)) {
    const fs::path model = fs::canonical(req.model_dir);
    ALPS_CHECK(cp != model, "--out ", shown, " is the input model directory; alps never writes its input");
    ALPS_CHECK(!strictly_inside(model, cp), "--out ", shown, " contains the input model directory ", model.string(),
               "; alps never replaces a directory holding its input");
    ALPS_CHECK(!strictly_inside(cp, model), "--out ", shown, " is inside the input model directory ", model.string(),
               "; alps never writes there");
    if (!req.dump_problems.empty())
      ALPS_CHECK(!same_or_inside(fs::weakly_canonical(fs::absolute(req.dump_problems)), model), "--dump-problems ",
                 req.dump_problems.string(), " is inside the input model directory; alps never writes there");
  }
  const fs::path cwd = fs::canonical(fs::current_path());
  ALPS_CHECK(!same_or_inside(cwd, cp), "--out ", shown,
             " is the current directory or contains it; alps replaces --out as a whole when the run completes: choose "
             "a new directory");
  if (!req.dump_problems.empty()) {
    ALPS_CHECK(!same_or_inside(fs::weakly_canonical(fs::absolute(req.dump_problems)), cp), "--dump-problems ",
               req.dump_problems.string(), " is inside --out, which is replaced as a whole when the run completes");
    ALPS_CHECK(!fs::exists(req.dump_problems) || fs::is_directory(req.dump_problems), "--dump-problems ",
               req.dump_problems.string(), " is a file, expected a directory");
  }

  fs::path existing = p.parent_path();
  while (!fs::exists(existing)) existing = existing.parent_path();
  ALPS_CHECK(fs::is_directory(existing), "cannot create --out ", shown, ": ", existing.string(), " is a file");
  ALPS_CHECK(::access(existing.c_str(), W_OK | X_OK) == 0, "cannot create --out ", shown,
             ": no permission to write in ", existing.string());
  if (existing == p.parent_path()) clean_leftovers(p);
  if (!fs::exists(p)) return;
  ALPS_CHECK(::access(p.c_str(), R_OK | W_OK | X_OK) == 0, "--out ", shown, ": no permission to write in it");
  struct stat self{}, parent{};
  if (::stat(p.c_str(), &self) == 0 && ::stat(p.parent_path().c_str(), &parent) == 0)
    ALPS_CHECK(self.st_dev == parent.st_dev, "--out ", shown,
               " is a mount point; alps replaces --out by a rename in its parent directory, which cannot cross file "
               "systems: use a directory inside it");
  decide_start(p, inspect_output(p), req);
}

OutputDir::OutputDir(const OutputRequest& req) : path_(normalize_output_path(req.out)) {
  check_output_request(req);
  const fs::path& p = path_;
  if (!fs::exists(p)) {
    // The parents this run makes go again with the output if the run saves nothing.
    for (fs::path q = p.parent_path(); !q.empty() && !fs::exists(q); q = q.parent_path()) created_parents_.push_back(q);
    try {
      fs::create_directories(p.parent_path());
    } catch (const fs::filesystem_error& e) {
      ALPS_FAIL("--out ", req.out.string(), ": cannot create ", e.path1().string(), ": ", e.code().message());
    }
    created_ = ::mkdir(p.c_str(), 0777) == 0;
    ALPS_CHECK(created_ || errno == EEXIST, "--out ", req.out.string(), ": cannot create ", p.string(), ": ",
               std::strerror(errno));
  }
  lock_ = io::DirLock::try_lock(p);
  if (!lock_) {
    remove_created();
    ALPS_FAIL("another alps run is writing to ", p.string(),
              " (it holds the lock on that directory): wait for it to finish or choose another --out");
  }
  Start start;
  try {
    start = decide_start(p, inspect_output(p), req);  // again under the lock: the directory may have changed
  } catch (...) {
    remove_created();
    throw;
  }
  resume_ = start == Start::kResume;
  if (start == Start::kNothingToResume)
    spdlog::warn("--resume: {} holds no saved block; starting from the first block", p.string());
}

void OutputDir::begin_fresh_state() {
  ALPS_CHECK(!resume_, "internal: a resumed run keeps its state");
  discard_state(state_dir());  // an abandoned run's, when the flags or its emptiness allow starting over
  fs::create_directory(state_dir());
}

OutputDir::~OutputDir() {
  if (committed_) return;
  std::error_code ec;
  if (!staging_.empty() && !keep_staging_) fs::remove_all(staging_, ec);
  // A run that fails before saving anything leaves the output as it found it.
  if (!fs::exists(state_dir() / kStateFile, ec)) {
    fs::remove_all(state_dir(), ec);
    remove_created();
  }
}

void OutputDir::remove_created() const {
  if (!created_) return;
  ::rmdir(path_.c_str());
  for (const fs::path& q : created_parents_) ::rmdir(q.c_str());  // innermost first; fails harmlessly if not empty
}

fs::path OutputDir::sibling(const char* kind) const {
  return path_.parent_path() / fmt::format(".{}.alps-{}-{}", path_.filename().string(), kind, ::getpid());
}

fs::path OutputDir::begin_staging() {
  staging_ = sibling("staging");
  remove_output_tree(staging_);  // only ever one of this pid's
  fs::create_directory(staging_);
  staging_lock_ = io::DirLock::try_lock(staging_);
  ALPS_CHECK(staging_lock_.has_value(), "cannot lock ", staging_.string());
  return staging_;
}

void OutputDir::commit() {
  ALPS_CHECK(!staging_.empty() && fs::is_regular_file(staging_ / kReportFile), "internal: nothing staged for ",
             path_.string());
  // The output was checked for files alps did not write when the run started; one put there since would be
  // replaced with the directory.
  if (const OutputContents now = inspect_output(path_); !now.foreign.empty()) {
    keep_staging_ = true;
    ALPS_FAIL("output directory ", path_.string(), " now holds files that alps did not write (",
              join_names(now.foreign, 5), "), put there while the run worked; nothing was replaced. The new checkpoint "
              "is complete in ", staging_.string(), ": move those files away, then run the same command with --resume "
              "(or rename that directory yourself)");
  }
  struct stat st{};
  if (::stat(path_.c_str(), &st) == 0) ::chmod(staging_.c_str(), st.st_mode & 07777);  // keep the user's mode
  io::sync_tree(staging_);
  crash_point("commit-staged");
  const fs::path parent = path_.parent_path();
  fs::path replaced = staging_;
  if (!fault_enabled("no-exchange") && io::exchange_paths(staging_, path_)) {
    io::sync_path(parent);
    crash_point("commit-exchanged");
  } else {
    // Without an atomic exchange the path is briefly empty; a run that dies there is completed by the next one
    // (clean_leftovers), since both directories are complete and named after this pid.
    replaced = sibling("old");
    io::rename_path(path_, replaced);
    crash_point("commit-moved-aside");
    try {
      io::rename_path(staging_, path_);
    } catch (...) {
      std::error_code ec;
      fs::rename(replaced, path_, ec);  // put the previous output back; the state in it allows --resume
      throw;
    }
    io::sync_path(parent);
    crash_point("commit-renamed");
  }
  committed_ = true;
  discard_state(replaced / kStateDir);
  crash_point("commit-state-removed");
  // A file put into the output between the check above and the swap is in the replaced directory now.
  if (const OutputContents left = inspect_output(replaced); !left.foreign.empty()) {
    const fs::path kept = parent / fmt::format("{}.alps-kept-{}", path_.filename().string(), ::getpid());
    std::error_code ec;
    fs::rename(replaced, kept, ec);
    spdlog::warn("{} received files that alps did not write ({}) while the new checkpoint was moved in; the previous "
                 "output with them is kept in {}", path_.string(), join_names(left.foreign, 5),
                 (ec ? replaced : kept).string());
  } else {
    remove_output_tree(replaced);
  }
  io::sync_path(parent);
}

}  // namespace alps::pipeline
