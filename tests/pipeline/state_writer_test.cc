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

// After the last block the state holds no inputs (nothing reads them): none written, none asked for on loading; a
// state of the previous format, which always held them, still loads.
TEST(StateWriter, TheStateAfterTheLastBlockHoldsNoInputs) {
  test::TempDir tmp;
  fs::create_directories(tmp / "state");
  StateDir dir(tmp / "state");
  {
    StateWriter writer(dir);
    writer.start(state_before(1), {}, at::randn({2, 4, 8}));
    writer.start(state_before(2), {{"w", at::randn({4, 4})}}, at::Tensor());
  }
  ResumeState s = dir.load();
  EXPECT_EQ(s.next_block, 2);
  EXPECT_FALSE(s.has_inputs);
  EXPECT_FALSE(dir.load_inputs(s).defined());
  for (const auto& e : fs::directory_iterator(tmp / "state"))
    EXPECT_EQ(e.path().filename().string().rfind("inputs-", 0), std::string::npos) << e.path();

  // Format 2: the same fields, no "inputs", and the inputs file beside it.
  const char* format2_state = R"({"format": 2, "key": {"model": "m"}, "next_block": 2, "layers": [],)"
                              R"( "phase_seconds": {}, "calibration": {}})";
  std::ofstream(tmp / "state" / "state.json") << format2_state;
  EXPECT_THROW(dir.load(), Error);  // names the missing inputs file
  {
    StateWriter writer(dir);
    writer.start(state_before(2), {{"w", at::randn({4, 4})}}, at::ones({2, 4, 8}));
  }
  std::ofstream(tmp / "state" / "state.json") << format2_state;
  s = dir.load();
  EXPECT_TRUE(s.has_inputs);
  EXPECT_TRUE(dir.load_inputs(s).equal(at::ones({2, 4, 8})));
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
