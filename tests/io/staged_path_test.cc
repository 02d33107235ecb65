// StagedPath (io/staged_path.h): an output appears complete or not at all, and a file that appeared at its name
// while alps worked is replaced only when asked.
#include "alps/io/staged_path.h"

#include <gtest/gtest.h>

#include <fstream>

#include "alps/core/error.h"
#include "support.h"

namespace alps::io {
namespace {

namespace fs = std::filesystem;

void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

TEST(StagedPath, CommitMovesTheFileIntoPlaceAndLeavesNoTemporary) {
  test::TempDir tmp;
  const fs::path out = tmp / "samples.jsonl";
  {
    StagedPath staged(out);
    write(staged.temp(), "new");
    EXPECT_FALSE(fs::exists(out));
    staged.commit();
  }
  EXPECT_EQ(test::slurp(out), "new");
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);
}

TEST(StagedPath, AFileThatAppearedMeanwhileIsKeptAndTheOutputLeftUnderItsTemporaryName) {
  test::TempDir tmp;
  const fs::path out = tmp / "samples.jsonl";
  fs::path temp;
  {
    StagedPath staged(out);
    temp = staged.temp();
    write(temp, "alps's output");
    write(out, "the user's notes");  // created while the run worked
    const std::string message = test::error_message([&] { staged.commit(); });
    EXPECT_NE(message.find("appeared while alps was running"), std::string::npos) << message;
    EXPECT_NE(message.find(temp.string()), std::string::npos) << message;
  }
  EXPECT_EQ(test::slurp(out), "the user's notes");
  EXPECT_EQ(test::slurp(temp), "alps's output");  // not removed with the StagedPath: the error names it
}

TEST(StagedPath, ReplaceMeansReplace) {
  test::TempDir tmp;
  const fs::path out = tmp / "state.json";
  write(out, "old");
  StagedPath staged(out);
  write(staged.temp(), "new");
  staged.commit(ExistingFile::kReplace);
  EXPECT_EQ(test::slurp(out), "new");
}

TEST(StagedPath, AnUncommittedOutputLeavesNothing) {
  test::TempDir tmp;
  const fs::path out = tmp / "samples.jsonl";
  {
    StagedPath staged(out);
    write(staged.temp(), "half");
  }
  EXPECT_TRUE(fs::is_empty(tmp.path()));
}

}  // namespace
}  // namespace alps::io
