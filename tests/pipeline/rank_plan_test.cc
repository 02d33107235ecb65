// Which ranks solve which linears of a block, whole or in parts of their rows (src/pipeline/schedule.cc).
#include "alps/pipeline/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "alps/core/error.h"

namespace alps::pipeline {
namespace {

// A LLaMA block: q, k, v, o, gate, up, down; q/k/v read one input, gate/up another.
SolveWork llama(int64_t hidden, int64_t kv, int64_t ffn, bool splits = true) {
  SolveWork w;
  w.in = {hidden, hidden, hidden, hidden, hidden, hidden, ffn};
  w.out = {hidden, kv, kv, hidden, ffn, ffn, hidden};
  w.group = {0, 0, 0, 3, 4, 4, 6};
  w.splits.assign(7, splits);
  return w;
}

// The largest rank's load under the cost rank_plan.h states: each group's products divided among its parts, its
// factorization (in^3 / 10) on every part; computed here from the plan alone.
double makespan(const SolveWork& w, const std::vector<std::vector<int>>& ranks, int world) {
  std::map<int, double> products, in;
  for (size_t li = 0; li < w.group.size(); ++li) {
    if (w.out[li] == 0) continue;
    products[w.group[li]] += static_cast<double>(w.in[li]) * static_cast<double>(w.in[li]) * static_cast<double>(w.out[li]);
    in[w.group[li]] = std::max(in[w.group[li]], static_cast<double>(w.in[li]));
  }
  std::vector<double> load(static_cast<size_t>(world), 0.0);
  std::set<int> seen;
  for (size_t li = 0; li < w.group.size(); ++li) {
    const int g = w.group[li];
    if (w.out[li] == 0 || !seen.insert(g).second) continue;
    const auto parts = static_cast<double>(ranks[li].size());
    for (int r : ranks[li]) load[static_cast<size_t>(r)] += products[g] / parts + in[g] * in[g] * in[g] / 10;
  }
  return *std::max_element(load.begin(), load.end());
}

// Every linear of a group on the same ranks, a group's parts on distinct ranks.
void expect_consistent(const SolveWork& w, const std::vector<std::vector<int>>& ranks, int world) {
  for (size_t li = 0; li < w.group.size(); ++li) {
    const auto& rs = ranks[li];
    EXPECT_EQ(rs, ranks[static_cast<size_t>(w.group[li])]) << "linear " << li;
    EXPECT_EQ(std::set<int>(rs.begin(), rs.end()).size(), rs.size()) << "linear " << li;
    for (int r : rs) EXPECT_TRUE(r >= 0 && r < world);
    if (!w.splits[li]) EXPECT_EQ(rs.size(), 1u);
  }
}

TEST(RankPlan, OffGivesEachGroupOneRankByLongestProcessingTime) {
  const SolveWork w = llama(4096, 4096, 11008);
  const auto ranks = plan_ranks(w, 2, SplitRule::kOff);
  expect_consistent(w, ranks, 2);
  // down_proj (with its factorization) first to rank 0, gate/up to rank 1, then q/k/v and o to the lighter one.
  EXPECT_EQ(ranks[6], std::vector<int>{0});
  EXPECT_EQ(ranks[4], std::vector<int>{1});
  for (const auto& rs : ranks) EXPECT_EQ(rs.size(), 1u);
}

TEST(RankPlan, AutoSplitsTheLinearsThatBoundABlockOnManyRanks) {
  // LLaMA-2-70B on 8 ranks: down_proj alone (its products 6.7e12 of the block's 1.2e13) bounds an unsplit block.
  const SolveWork w = llama(8192, 1024, 28672);
  const auto off = plan_ranks(w, 8, SplitRule::kOff);
  const auto ranks = plan_ranks(w, 8, SplitRule::kAuto);
  expect_consistent(w, ranks, 8);
  EXPECT_GE(ranks[6].size(), 2u) << "down_proj";
  EXPECT_LT(makespan(w, ranks, 8), 0.6 * makespan(w, off, 8));
  // A method that cannot split keeps the one-rank plan.
  const SolveWork whole = llama(8192, 1024, 28672, /*splits=*/false);
  EXPECT_EQ(plan_ranks(whole, 8, SplitRule::kAuto), plan_ranks(whole, 8, SplitRule::kOff));
}

TEST(RankPlan, AutoLeavesWholeWhatASplitWouldNotShorten) {
  // SmolLM2-135M (hidden 576, 3 KV heads of 64, ffn 1536) on 2 ranks: down_proj (1.36e9 + 3.6e8 of factorization)
  // against the other six linears (1.53e9 + 5.7e7); halving down_proj repeats its factorization and puts gate/up
  // beside one half: 2.08e9 > 1.72e9, so nothing is split.
  const SolveWork w = llama(576, 192, 1536);
  EXPECT_EQ(plan_ranks(w, 2, SplitRule::kAuto), plan_ranks(w, 2, SplitRule::kOff));
  // On 3 ranks halving down_proj lets q/k/v, o and gate/up fill the third: the block ends sooner.
  const auto three = plan_ranks(w, 3, SplitRule::kAuto);
  expect_consistent(w, three, 3);
  EXPECT_EQ(three[6].size(), 2u);
  EXPECT_LT(makespan(w, three, 3), makespan(w, plan_ranks(w, 3, SplitRule::kOff), 3));
}

TEST(RankPlan, AllSplitsEverySplittableGroupOverEveryRank) {
  SolveWork w = llama(64, 2, 172);
  w.out[3] = 0;  // o_proj left dense: no ranks beyond the default
  const auto ranks = plan_ranks(w, 3, SplitRule::kAll);
  expect_consistent(w, ranks, 3);
  EXPECT_EQ(ranks[0].size(), 2u) << "k/v have 2 rows: as many parts as the group's fewest rows";
  EXPECT_EQ(ranks[3], std::vector<int>{0});
  EXPECT_EQ(ranks[4].size(), 3u);
  EXPECT_EQ(ranks[6].size(), 3u);
  EXPECT_EQ(parse_split_rule("all"), SplitRule::kAll);
  EXPECT_THROW(parse_split_rule("some"), UsageError);
}

}  // namespace
}  // namespace alps::pipeline
