// `alps prune --out`: what alps may replace, one run per output, resume only on the same inputs, and a commit that
// leaves the previous or the new output whole wherever the process is killed (fault injection, ALPS_TEST_FAULT).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "alps/core/error.h"
#include "alps/pipeline/output_dir.h"
#include "support.h"

namespace alps {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path model_dir() { return test::committed_data_dir() / "models/stories260K-hf"; }
fs::path calib_file() { return test::committed_data_dir() / "text/tinystories/tinystories.train.first200.txt"; }

std::vector<std::string> prune_args(const fs::path& out, std::vector<std::string> extra,
                                    const fs::path& model = model_dir(), const fs::path& calib = calib_file()) {
  std::vector<std::string> a = {"prune",    "--model",  model.string(), "--out",    out.string(),
                                "--calib",  calib.string(), "--nsamples", "4", "--seqlen", "64",
                                "--device", "cpu",      "--method", "sparsegpt"};
  a.insert(a.end(), extra.begin(), extra.end());
  return a;
}

using test::slurp;

// Every path below `root` with its content (directories as "/"): a refused run must leave this unchanged.
std::map<std::string, std::string> snapshot(const fs::path& root) {
  std::map<std::string, std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    const std::string rel = fs::relative(e.path(), root).string();
    out[rel] = e.is_directory() ? "/" : e.is_symlink() ? "->" + fs::read_symlink(e.path()).string() : slurp(e.path());
  }
  return out;
}

void copy_model(const fs::path& to) {
  fs::create_directories(to);
  for (const auto& e : fs::directory_iterator(model_dir())) fs::copy_file(e.path(), to / e.path().filename());
}

std::vector<std::string> siblings_left(const fs::path& out) {
  std::vector<std::string> left;
  const std::string prefix = "." + out.filename().string() + ".";
  for (const auto& e : fs::directory_iterator(out.parent_path()))
    if (e.path().filename().string().rfind(prefix, 0) == 0) left.push_back(e.path().filename().string());
  return left;
}

json report_of(const fs::path& out) { return json::parse(slurp(out / "alps-report.json")); }

void expect_refused(const test::CliResult& r, const std::string& message) {
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find(message), std::string::npos) << "expected \"" << message << "\" in:\n" << r.err;
}

TEST(OutputSafety, RefusesEveryOutputThatIsNotAlpsToReplaceAndTouchesNothing) {
  test::TempDir tmp;
  const fs::path root = tmp.path();
  copy_model(root / "parent/model");
  fs::create_directories(root / "work");
  std::ofstream(root / "work/user.txt") << "the user's notes";
  fs::create_directories(root / "data");
  std::ofstream(root / "data/user.txt") << "the user's data";
  std::ofstream(root / "afile") << "a file";
  fs::create_directory_symlink(root / "data", root / "link");
  const auto before = snapshot(root);
  const fs::path model = root / "parent/model";

  struct Case {
    std::vector<std::string> args;
    fs::path cwd;
    std::string message;
  };
  const std::vector<Case> cases = {
      {prune_args(".", {"--sparsity", "0.5", "--overwrite"}), root / "work", "is the current directory or contains it"},
      {prune_args("..", {"--sparsity", "0.5", "--overwrite"}), root / "work",
       "is the current directory or contains it"},
      {prune_args((root / "data").string() + "/", {"--sparsity", "0.5", "--overwrite"}), {}, "user.txt"},
      {prune_args(root / "data", {"--sparsity", "0.5", "--overwrite"}), {}, "holds files that alps did not write"},
      {prune_args(root / "parent", {"--sparsity", "0.5", "--overwrite"}, model), {}, "contains the input model"},
      {prune_args(root, {"--sparsity", "0.5", "--overwrite"}, model), {}, "contains the input model"},
      {prune_args(model, {"--sparsity", "0.5", "--overwrite"}, model), {}, "is the input model directory"},
      {prune_args(model / "pruned", {"--sparsity", "0.5"}, model), {}, "is inside the input model directory"},
      {prune_args(root / "afile", {"--sparsity", "0.5", "--overwrite"}), {}, "is a file, not a directory"},
      {prune_args(root / "afile/out", {"--sparsity", "0.5"}), {}, "is a file"},
      {prune_args(root / "link", {"--sparsity", "0.5", "--overwrite"}), {}, "is a symbolic link"},
      {prune_args(root / "new", {"--sparsity", "0.5", "--dump-problems", (root / "new/problems").string()}),
       {},
       "--dump-problems"},
      {prune_args(root / "new", {"--sparsity", "0.5", "--dump-problems", (model / "p").string()}, model),
       {},
       "inside the input model directory"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.message);
    expect_refused(test::run_cli(c.args, {c.cwd, {}}), c.message);
    EXPECT_EQ(snapshot(root), before) << "a refused run must not write, move or delete anything";
  }
}

TEST(OutputSafety, AcceptsAnEmptyDirectoryAndCreatesMissingParents) {
  test::TempDir tmp;
  fs::create_directories(tmp / "empty");
  auto r = test::run_cli(prune_args(tmp / "empty", {"--sparsity", "0.5"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(report_of(tmp / "empty")["complete"].get<bool>());
  r = test::run_cli(prune_args(tmp / "a/b/c", {"--sparsity", "0.5"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::exists(tmp / "a/b/c/model.safetensors"));
  EXPECT_FALSE(fs::exists(tmp / "a/b/c/.alps-state"));
  EXPECT_TRUE(siblings_left(tmp / "a/b/c").empty());
}

TEST(OutputSafety, OverwriteReplacesOnlyFilesAlpsWroteAndOnlyWhenTheNewOutputIsComplete) {
  test::TempDir tmp;
  const fs::path out = tmp / "out";
  ASSERT_EQ(test::run_cli(prune_args(out, {"--sparsity", "0.5"})).exit_code, 0);
  const std::string first = slurp(out / "model.safetensors");
  const auto files = report_of(out)["files"];
  ASSERT_FALSE(files.empty());
  expect_refused(test::run_cli(prune_args(out, {"--sparsity", "0.7"})), "already holds a pruned checkpoint");

  // Stopped half way, the previous output stays whole and usable next to the new run's state.
  auto r = test::run_cli(prune_args(out, {"--sparsity", "0.7", "--overwrite", "--stop-after", "2"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(slurp(out / "model.safetensors") == first) << "weights differ from first";
  EXPECT_TRUE(report_of(out)["complete"].get<bool>());
  EXPECT_EQ(test::run_cli({"inspect", "--model", out.string()}).exit_code, 0);
  expect_refused(test::run_cli(prune_args(out, {"--sparsity", "0.7"})), "holds an interrupted run (2 blocks done)");
  r = test::run_cli(prune_args(out, {"--sparsity", "0.7", "--resume"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(slurp(out / "model.safetensors") == first);
  EXPECT_EQ(report_of(out)["recipe"]["pattern"], "0.7");
  EXPECT_FALSE(fs::exists(out / ".alps-state"));
  EXPECT_TRUE(siblings_left(out).empty());

  // A file the user added, or one changed after alps wrote it, makes the directory no longer alps's alone.
  std::ofstream(out / "notes.txt") << "mine";
  expect_refused(test::run_cli(prune_args(out, {"--sparsity", "0.5", "--overwrite"})), "notes.txt");
  EXPECT_TRUE(fs::exists(out / "notes.txt"));
  fs::remove(out / "notes.txt");
  std::ofstream(out / "config.json", std::ios::app) << "\n\n";
  expect_refused(test::run_cli(prune_args(out, {"--sparsity", "0.5", "--overwrite"})),
                 "config.json (changed since alps wrote it)");
}

// A user's file put into --out while the run works: the commit replaces the directory as a whole, so it must stop
// there, keeping the file, the finished checkpoint (named in the error) and the state that --resume continues from.
TEST(OutputSafety, AFileAddedDuringTheRunStopsTheCommitAndNothingIsLost) {
  test::TempDir tmp;
  const fs::path out = tmp / "out";
  {
    pipeline::OutputDir dir({out, model_dir(), {}, false, false});
    dir.begin_fresh_state();
    std::ofstream(dir.state_dir() / "state.json") << "{}";
    const fs::path staging = dir.begin_staging();
    std::ofstream(staging / pipeline::kReportFile) << "{}";
    std::ofstream(out / "notes.txt") << "mine";
    const std::string message = test::error_message([&] { dir.commit(); });
    EXPECT_NE(message.find("notes.txt"), std::string::npos) << message;
    EXPECT_NE(message.find(staging.string()), std::string::npos) << message;
    EXPECT_TRUE(fs::exists(staging / pipeline::kReportFile));
  }
  EXPECT_EQ(slurp(out / "notes.txt"), "mine");
  EXPECT_TRUE(fs::exists(out / ".alps-state/state.json"));

  // Through the command: the file moved away, the same command with --resume writes the output.
  const fs::path run = tmp / "run";
  // Killed as it commits: every block is saved, the output is left to write.
  ASSERT_NE(
      test::run_cli(prune_args(run, {"--sparsity", "0.5"}), {{}, {"ALPS_TEST_FAULT=crash:commit-staged"}}).exit_code,
      0);
  std::ofstream(run / "notes.txt") << "mine";
  expect_refused(test::run_cli(prune_args(run, {"--sparsity", "0.5", "--resume"})), "notes.txt");
  EXPECT_EQ(slurp(run / "notes.txt"), "mine");
  fs::remove(run / "notes.txt");
  const auto r = test::run_cli(prune_args(run, {"--sparsity", "0.5", "--resume"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(report_of(run)["complete"].get<bool>());
  EXPECT_TRUE(siblings_left(run).empty());
}

// --overwrite starts over, but only once the new run's inputs are good: a bad calibration text must leave the
// interrupted run's blocks to resume.
TEST(OutputSafety, OverwriteWithABadInputKeepsTheInterruptedRun) {
  test::TempDir tmp;
  const fs::path out = tmp / "out";
  ASSERT_EQ(test::run_cli(prune_args(out, {"--sparsity", "0.5", "--stop-after", "2"})).exit_code, 0);
  const auto before = snapshot(out);
  std::ofstream(tmp / "short.txt") << "Once upon a time.";
  expect_refused(test::run_cli(prune_args(out, {"--sparsity", "0.5", "--overwrite"}, model_dir(), tmp / "short.txt")),
                 "no document is longer than seqlen");
  EXPECT_EQ(snapshot(out), before);
  const auto r = test::run_cli(prune_args(out, {"--sparsity", "0.5", "--resume"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

TEST(OutputSafety, ASecondRunOnALockedOutputIsRefused) {
  test::TempDir tmp;
  const fs::path out = tmp / "out";
  fs::create_directories(out);
  // The lock another alps process would hold: flock on the directory, exactly what alps takes.
  const int fd = ::open(out.c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::flock(fd, LOCK_EX | LOCK_NB), 0);
  expect_refused(test::run_cli(prune_args(out, {"--sparsity", "0.5"})), "another alps run is writing to");
  EXPECT_TRUE(fs::is_empty(out)) << "the refused run must not have written into the locked directory";
  ::close(fd);  // released as the kernel releases a dead process's lock
  const auto r = test::run_cli(prune_args(out, {"--sparsity", "0.5"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(OutputSafety, ResumeNamesTheInputThatChanged) {
  test::TempDir tmp;
  copy_model(tmp / "model");
  fs::copy_file(calib_file(), tmp / "calib.txt");
  const fs::path out = tmp / "out";
  auto args = [&](std::vector<std::string> extra) { return prune_args(out, extra, tmp / "model", tmp / "calib.txt"); };
  ASSERT_EQ(test::run_cli(args({"--sparsity", "0.5", "--stop-after", "1"})).exit_code, 0);

  expect_refused(test::run_cli(args({"--sparsity", "0.6", "--resume"})), "--sparsity/--pattern (recipe \"pattern\")");
  // A method constant at its default value is the same run; another value is not.
  expect_refused(test::run_cli(args({"--sparsity", "0.5", "--option", "damp=0.02", "--resume", "--stop-after", "1"})),
                 "--option damp (recipe \"options.damp\")");
  const auto same =
      test::run_cli(args({"--sparsity", "0.5", "--option", "damp=0.01", "--resume", "--stop-after", "1"}));
  EXPECT_EQ(same.exit_code, 0) << same.err;
  expect_refused(test::run_cli(args({"--sparsity", "0.5", "--seed", "3", "--resume"})),
                 "--seed (recipe \"calibration.seed\")");

  const std::string calib = slurp(tmp / "calib.txt");
  std::ofstream(tmp / "calib.txt", std::ios::app) << " One more sentence.";
  expect_refused(test::run_cli(args({"--sparsity", "0.5", "--resume"})), "calibration file");
  std::ofstream(tmp / "calib.txt", std::ios::trunc) << std::string(calib.size(), 'x');  // same size, other bytes
  expect_refused(test::run_cli(args({"--sparsity", "0.5", "--resume"})), "content changed");
  std::ofstream(tmp / "calib.txt", std::ios::trunc) << calib;  // same content, new modification time

  // Tensor data is not hashed: a safetensors file with the same header and a new time is refused.
  const auto st = fs::last_write_time(tmp / "model/model.safetensors");
  fs::last_write_time(tmp / "model/model.safetensors", st + std::chrono::seconds(5));
  expect_refused(test::run_cli(args({"--sparsity", "0.5", "--resume"})),
                 "model file model.safetensors: modified since");
  fs::last_write_time(tmp / "model/model.safetensors", st);

  fs::remove(tmp / "calib.txt");  // gone: the saved inputs stand in for it
  const std::string config = slurp(tmp / "model/config.json");
  std::ofstream(tmp / "model/config.json", std::ios::app) << " ";
  expect_refused(test::run_cli(args({"--sparsity", "0.5", "--resume"})), "model file config.json: size");

  // Files hashed whole and rewritten with the same bytes (a copy, a restore) are the same inputs: the run resumes.
  std::ofstream(tmp / "model/config.json", std::ios::trunc) << config;
  std::ofstream(tmp / "calib.txt", std::ios::trunc) << calib;
  const auto r = test::run_cli(args({"--sparsity", "0.5", "--resume"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(OutputSafety, ARunStoppedOrKilledBeforeItsFirstBlockCanBeResumedOrRerun) {
  test::TempDir tmp;
  ASSERT_EQ(test::run_cli(prune_args(tmp / "whole", {"--sparsity", "0.6"})).exit_code, 0);
  const std::string whole = slurp(tmp / "whole/model.safetensors");

  ASSERT_EQ(test::run_cli(prune_args(tmp / "a", {"--sparsity", "0.6", "--stop-after", "0"})).exit_code, 0);
  auto r = test::run_cli(prune_args(tmp / "a", {"--sparsity", "0.6", "--resume"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(slurp(tmp / "a/model.safetensors") == whole) << "weights differ from whole";

  ASSERT_EQ(test::run_cli(prune_args(tmp / "b", {"--sparsity", "0.6", "--stop-after", "0"})).exit_code, 0);
  r = test::run_cli(prune_args(tmp / "b", {"--sparsity", "0.6"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(slurp(tmp / "b/model.safetensors") == whole) << "weights differ from whole";

  for (const char* point : {"crash:state-inputs-saved", "crash:discard-state"}) {
    SCOPED_TRACE(point);
    const fs::path out = tmp / "c";
    fs::remove_all(out);
    r = test::run_cli(prune_args(out, {"--sparsity", "0.6"}), {{}, {std::string("ALPS_TEST_FAULT=") + point}});
    ASSERT_NE(r.exit_code, 0);
    r = test::run_cli(prune_args(out, {"--sparsity", "0.6", "--resume"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(slurp(out / "model.safetensors") == whole) << "weights differ from whole";
  }
}

TEST(OutputSafety, AKillWhileSavingTheStateNeverCorruptsTheResumedResult) {
  test::TempDir tmp;
  ASSERT_EQ(test::run_cli(prune_args(tmp / "whole", {"--sparsity", "0.6"})).exit_code, 0);
  const std::string whole = slurp(tmp / "whole/model.safetensors");
  // @3: during the state save after block 2 (the first save is the one before block 1); @6: the save after the last
  // of stories260K's 5 blocks, which holds no inputs.
  for (const char* point : {"state-block-saved@3", "state-inputs-saved@3", "state-json-saved@3", "state-block-saved@6",
                            "state-json-saved@6"}) {
    SCOPED_TRACE(point);
    const fs::path out = tmp / point;
    auto r =
        test::run_cli(prune_args(out, {"--sparsity", "0.6"}), {{}, {std::string("ALPS_TEST_FAULT=crash:") + point}});
    ASSERT_NE(r.exit_code, 0) << "the fault did not fire";
    r = test::run_cli(prune_args(out, {"--sparsity", "0.6", "--resume"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(slurp(out / "model.safetensors") == whole) << "weights differ from whole";
    EXPECT_FALSE(fs::exists(out / ".alps-state"));
  }
}

// Killed at each step of the final commit, replacing a previous output: the path holds the previous output or the
// new one, complete, and the next run on it ends with the new one and nothing left over.
struct CommitCrash {
  const char* name;
  const char* faults;
  bool new_visible;  // what the path holds right after the kill
};

// Named by its faults, so that test listings show them rather than the struct's bytes.
void PrintTo(const CommitCrash& c, std::ostream* os) { *os << c.faults; }

class CommitCrashes : public ::testing::TestWithParam<CommitCrash> {};

TEST_P(CommitCrashes, LeaveThePreviousOrTheNewOutputWhole) {
  const CommitCrash c = GetParam();
  test::TempDir tmp;
  ASSERT_EQ(test::run_cli(prune_args(tmp / "fresh", {"--sparsity", "0.7"})).exit_code, 0);
  const std::string fresh = slurp(tmp / "fresh/model.safetensors");
  const fs::path out = tmp / "out";
  ASSERT_EQ(test::run_cli(prune_args(out, {"--sparsity", "0.5"})).exit_code, 0);
  const std::string previous = slurp(out / "model.safetensors");

  auto r = test::run_cli(prune_args(out, {"--sparsity", "0.7", "--overwrite"}),
                         {{}, {std::string("ALPS_TEST_FAULT=") + c.faults}});
  ASSERT_NE(r.exit_code, 0) << "the fault did not fire";
  const bool gap = std::string(c.faults).find("moved-aside") != std::string::npos;
  if (gap) {
    // Without an atomic exchange the path is empty between two renames; both directories are whole beside it.
    EXPECT_FALSE(fs::exists(out));
  } else {
    ASSERT_TRUE(report_of(out)["complete"].get<bool>());
    EXPECT_TRUE(slurp(out / "model.safetensors") == (c.new_visible ? fresh : previous))
        << (c.new_visible ? "expected the new output" : "expected the previous output");
    EXPECT_EQ(test::run_cli({"inspect", "--model", out.string()}).exit_code, 0);
  }

  // The next run: --resume where the state survived, else any run on the path, which cleans up what is left.
  if (fs::exists(out / ".alps-state/state.json")) {
    r = test::run_cli(prune_args(out, {"--sparsity", "0.7", "--resume"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
  } else {
    r = test::run_cli(prune_args(out, {"--sparsity", "0.7"}));
    expect_refused(r, "already holds a pruned checkpoint");
  }
  EXPECT_TRUE(slurp(out / "model.safetensors") == fresh) << "weights differ from fresh";
  EXPECT_EQ(report_of(out)["recipe"]["pattern"], "0.7");
  EXPECT_FALSE(fs::exists(out / ".alps-state"));
  EXPECT_TRUE(siblings_left(out).empty()) << siblings_left(out).front();
}

INSTANTIATE_TEST_SUITE_P(
    EachStep, CommitCrashes,
    ::testing::Values(CommitCrash{"Staged", "crash:commit-staged", false},
                      CommitCrash{"Exchanged", "crash:commit-exchanged", true},
                      CommitCrash{"StateRemoved", "crash:commit-state-removed", true},
                      CommitCrash{"FallbackMovedAside", "no-exchange,crash:commit-moved-aside", true},
                      CommitCrash{"FallbackRenamed", "no-exchange,crash:commit-renamed", true},
                      CommitCrash{"FallbackStateRemoved", "no-exchange,crash:commit-state-removed", true}),
    [](const ::testing::TestParamInfo<CommitCrash>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace alps
