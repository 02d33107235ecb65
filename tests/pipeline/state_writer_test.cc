// The resume state written on its own thread: what a save leaves on disk is what StateDir::save leaves (read back by
// StateDir::load), a failed save is raised where the run waits for it, the writes of one save never overlap the
// next, and the tensors handed over are read while the caller goes on.
#include "alps/pipeline/state_writer.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "alps/core/error.h"
#include "support.h"

namespace alps::pipeline {
namespace {

namespace fs = std::filesystem;

ResumeState state_before(int64_t next_block) {
  ResumeState s;
  s.key = {{"model", "m"}};
  s.next_block = next_block;
  return s;
}

TEST(StateWriter, SavesInTheBackgroundWhatStateDirReadsBack) {
  test::TempDir tmp;
  StateDir dir(tmp / "state");
  fs::create_directories(tmp / "state");
  const at::Tensor x0 = at::randn({4, 8, 16}), x1 = at::randn({4, 8, 16});
  const at::Tensor w = at::randn({16, 16});
  {
    StateWriter writer(dir);
    writer.start(state_before(0), {}, x0);
    writer.start(state_before(1), {{"model.layers.0.mlp.weight", w}}, x1);  // waits for the first save
    EXPECT_GE(writer.wait(), 0.0);
    EXPECT_EQ(writer.wait(), 0.0);  // nothing in flight
    EXPECT_GT(writer.seconds_writing(), 0.0);
  }
  const ResumeState s = dir.load();
  EXPECT_EQ(s.next_block, 1);
  EXPECT_TRUE(dir.load_inputs(s).equal(x1));
  const auto block = dir.load_block(0);
  ASSERT_EQ(block.size(), 1u);
  EXPECT_TRUE(block[0].second.equal(w));
  EXPECT_FALSE(fs::exists(tmp / "state" / "inputs-00000.safetensors"));  // superseded, removed
}

// A save that cannot write (here its directory is a file; a full disk alike) is the caller's error at the next wait,
// with the message the save itself gave; the writer is usable again afterwards.
TEST(StateWriter, AFailedSaveIsRaisedWhereTheRunWaits) {
  test::TempDir tmp;
  std::ofstream(tmp / "not-a-directory") << "x";
  StateDir bad(tmp / "not-a-directory");
  StateWriter writer(bad);
  writer.start(state_before(0), {}, at::zeros({2, 2, 2}));
  EXPECT_THROW(writer.wait(), Error);
  EXPECT_EQ(writer.wait(), 0.0);
  writer.start(state_before(0), {}, at::zeros({2, 2, 2}));
  EXPECT_THROW(writer.wait(), Error);  // raised once per failed save, not lost in the destructor
}

}  // namespace
}  // namespace alps::pipeline
