// How a block's linears are split among concurrent solves (src/pipeline/schedule.cc).
#include "alps/pipeline/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>

namespace alps::pipeline {
namespace {

// LLaMA-7B's block: q, k, v, o, gate, up, down; q/k/v read one input, gate/up another.
const std::vector<double> kCost = [] {
  auto c = [](double in, double out) { return in * in * out; };
  return std::vector<double>{c(4096, 4096), c(4096, 4096),  c(4096, 4096), c(4096, 4096),
                             c(4096, 11008), c(4096, 11008), c(11008, 4096)};
}();
const std::vector<int> kGroup = {0, 0, 0, 1, 2, 2, 3};

TEST(SolveStreams, LlamaBlockOnTwoStreams) {
  // down_proj (4.96e11) alone outweighs gate/up (3.69e11); q/k/v (2.06e11) then join gate/up, o_proj joins down_proj:
  // 5.65e11 against 5.75e11.
  const auto lists = split_among_streams(kCost, kGroup, 2);
  ASSERT_EQ(lists.size(), 2u);
  EXPECT_EQ(lists[0], (std::vector<size_t>{3, 6}));
  EXPECT_EQ(lists[1], (std::vector<size_t>{0, 1, 2, 4, 5}));
}

TEST(SolveStreams, EveryLinearOnceGroupsTogetherBlockOrder) {
  for (int streams : {1, 2, 3, 4, 9}) {
    const auto lists = split_among_streams(kCost, kGroup, streams);
    EXPECT_EQ(lists.size(), static_cast<size_t>(std::min(streams, 4)));  // four groups: no empty list
    // The costliest group first: run_on_streams runs the first list at the lower priority.
    EXPECT_NE(std::find(lists[0].begin(), lists[0].end(), 6u), lists[0].end());
    std::vector<size_t> seen;
    for (const auto& l : lists) {
      EXPECT_TRUE(std::is_sorted(l.begin(), l.end()));
      for (size_t i : l) {
        seen.push_back(i);
        for (size_t j = 0; j < kGroup.size(); ++j)  // each group lies wholly inside one list
          if (kGroup[j] == kGroup[i]) EXPECT_NE(std::find(l.begin(), l.end(), j), l.end()) << i << " " << j;
      }
    }
    std::sort(seen.begin(), seen.end());
    EXPECT_EQ(seen, (std::vector<size_t>{0, 1, 2, 3, 4, 5, 6}));
  }
  EXPECT_EQ(split_among_streams(kCost, kGroup, 1), (std::vector<std::vector<size_t>>{{0, 1, 2, 3, 4, 5, 6}}));
  EXPECT_TRUE(split_among_streams({}, {}, 2).empty());
}

}  // namespace
}  // namespace alps::pipeline
