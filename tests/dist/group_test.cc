// The Group on c10d's Gloo between ranks run as threads of this process (each with its own store client and
// process group, as separate processes would have): what the collectives compute, and how a rank that fails, or
// never comes, stops the others.
#include "alps/dist/group.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <functional>
#include <thread>

#include "alps/dist/local_workers.h"
#include "support.h"

namespace alps::dist {
namespace {

Launch rank_of(int rank, int world, int port) {
  Launch l;
  l.rank = rank;
  l.world_size = world;
  l.local_rank = rank;
  l.master_addr = "127.0.0.1";
  l.master_port = port;
  l.launcher = "torchrun";
  return l;
}

// body(group) on `world` ranks at once; returns each rank's error message ("" when it returned).
std::vector<std::string> on_ranks(int world, const std::function<void(Group&)>& body, int timeout_s = 20) {
  const int port = free_local_port();
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      try {
        GroupOptions o;
        o.backend = "gloo";
        o.timeout = std::chrono::seconds(timeout_s);
        auto g = join(rank_of(r, world, port), c10::Device(c10::kCPU), o);
        body(*g);
      } catch (const std::exception& e) {
        errors[static_cast<size_t>(r)] = e.what();
      }
    });
  for (auto& t : threads) t.join();
  return errors;
}

TEST(Group, OneProcessLeavesEverythingAsItIs) {
  auto g = single_process();
  at::Tensor t = at::arange(4, at::kFloat);
  g->reduce_sum(t, 0, "x");
  g->broadcast(t, 0, "x");
  g->all_reduce_sum(t, "x");
  EXPECT_TRUE(t.equal(at::arange(4, at::kFloat)));
  EXPECT_EQ(g->all_gather("a", "x"), std::vector<std::string>{"a"});
  EXPECT_EQ(g->backend(), "none");
}

TEST(Group, ReducesBroadcastsAndGathersWhatEachRankHolds) {
  const int world = 3;
  const auto errors = on_ranks(world, [&](Group& g) {
    const int r = g.rank();
    // Small integers: their sums are exact in any order.
    at::Tensor f = at::full({5, 3}, static_cast<float>(r + 1));
    const int64_t before = g.bytes_reduced();
    g.reduce_sum(f, 1, "reducing");
    EXPECT_EQ(g.bytes_reduced() - before, 5 * 3 * 4);  // what the report's bytes per block add up
    if (r == 1) EXPECT_TRUE(f.equal(at::full({5, 3}, 6.0f)));
    at::Tensor d = at::full({2}, static_cast<double>(r), at::kDouble);
    at::Tensor n = at::full({1}, int64_t{10} * r, at::kLong);
    g.all_reduce_sum(d, "all-reducing");
    g.all_reduce_sum(n, "all-reducing");
    EXPECT_TRUE(d.equal(at::full({2}, 3.0, at::kDouble)));
    EXPECT_EQ(n.item<int64_t>(), 30);
    // A broadcast moves the bits of any dtype, bf16 included, and of a non-contiguous tensor.
    at::Tensor b = r == 2 ? at::randn({4, 6}).to(at::kBFloat16) : at::zeros({4, 6}, at::kBFloat16);
    g.broadcast(b, 2, "broadcasting");
    at::Tensor all = b.to(at::kFloat).contiguous();
    g.all_reduce_sum(all, "comparing");
    EXPECT_TRUE(all.equal(b.to(at::kFloat) * 3));
    at::Tensor strided = r == 0 ? at::arange(12, at::kFloat).reshape({3, 4}).t() : at::zeros({4, 3});
    g.broadcast(strided, 0, "broadcasting");
    EXPECT_TRUE(strided.equal(at::arange(12, at::kFloat).reshape({3, 4}).t()));
    // Strings of any length, the empty one too, in rank order.
    const std::vector<std::string> mine = {"rank zero", "", std::string(1000, 'x')};
    EXPECT_EQ(g.all_gather(mine[static_cast<size_t>(r)], "gathering"), mine);
    // Markers: each waits for the others'.
    g.publish("done/" + std::to_string(r));
    g.wait_for({"done/0", "done/1", "done/2"}, "waiting");
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
}

// Groups of some ranks (the parts of a linear solved across ranks): collectives among the members only, two groups
// used at once from two threads of one rank, while a non-member goes on with its own work.
TEST(Group, SubgroupsSumAmongTheirMembersOnly) {
  const int world = 3;
  const auto errors = on_ranks(world, [&](Group& g) {
    const int r = g.rank();
    std::unique_ptr<Group> a, b;
    if (r != 1) a = g.subgroup({0, 2}, "a");
    if (r != 0) b = g.subgroup({1, 2}, "b");
    auto sums = [&](Group* sub, int64_t expected) {
      if (sub == nullptr) return;
      EXPECT_EQ(sub->size(), 2);
      for (int i = 0; i < 20; ++i) {
        at::Tensor t = at::full({3}, int64_t{r + 1} * (i + 1), at::kLong);
        sub->all_reduce_sum(t, "summing in a subgroup");
        EXPECT_TRUE(t.equal(at::full({3}, expected * (i + 1), at::kLong)));
      }
    };
    std::thread other([&] { sums(b.get(), 2 + 3); });
    sums(a.get(), 1 + 3);
    other.join();
    if (r == 2) {
      EXPECT_EQ(a->rank(), 1);
      EXPECT_EQ(b->rank(), 1);
    }
    EXPECT_EQ(g.all_gather("after", "gathering"), std::vector<std::string>(3, "after"));  // the world still works
  });
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[static_cast<size_t>(r)], "") << "rank " << r;
  auto one = single_process();
  EXPECT_EQ(one->subgroup({0}, "x")->size(), 1);
}

TEST(Group, AgreeStopsEveryRankNamingTheOneThatFailed) {
  const auto errors = on_ranks(3, [](Group& g) {
    // Rank 1 failed its step: it rethrows its own error; the others stop naming it.
    g.agree(g.rank() == 1 ? "no space left on device" : "", "writing the shards");
  });
  EXPECT_EQ(errors[1], "");  // agree returns on the failed rank: its caller rethrows its own error
  for (int r : {0, 2}) {
    EXPECT_NE(errors[static_cast<size_t>(r)].find("rank 1 of 3 stopped while writing the shards: no space left"),
              std::string::npos)
        << errors[static_cast<size_t>(r)];
  }
}

TEST(Group, ARankThatStopsMidwayStopsTheOthersWithItsReason) {
  const auto errors = on_ranks(
      2,
      [](Group& g) {
        if (g.rank() == 1) {
          g.announce_failure("block 3/32 mlp.down_proj: the solve diverged");
          throw std::runtime_error("stopped");  // its group closes: rank 0's reduce sees the connection go
        }
        at::Tensor t = at::ones({1000});
        g.reduce_sum(t, 0, "reducing the statistics of block 3/32");
      },
      /*timeout_s=*/30);
  EXPECT_NE(errors[0].find("rank 0 of 2 stopped while reducing the statistics of block 3/32: rank 1: block 3/32 "
                           "mlp.down_proj: the solve diverged"),
            std::string::npos)
      << errors[0];
}

TEST(Group, ARankThatNeverComesIsAnErrorWithinTheTimeout) {
  const int port = free_local_port();
  GroupOptions o;
  o.backend = "gloo";
  o.timeout = std::chrono::seconds(2);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = test::error_message([&] { join(rank_of(0, 2, port), c10::Device(c10::kCPU), o); });
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(e.find("did not all meet at 127.0.0.1:" + std::to_string(port)), std::string::npos) << e;
  EXPECT_NE(e.find("within 2 s (--dist-timeout)"), std::string::npos) << e;
  EXPECT_LT(seconds, 30);
  // A worker whose master is not there says so too.
  const std::string w = test::error_message([&] { join(rank_of(1, 2, port), c10::Device(c10::kCPU), o); });
  EXPECT_NE(w.find("is rank 0 running there?"), std::string::npos) << w;
}

TEST(Group, BackendsAreCheckedAgainstTheDeviceAndTheBuild) {
  EXPECT_EQ(resolve_backend("auto", c10::Device(c10::kCPU)), "gloo");
  EXPECT_EQ(resolve_backend("gloo", c10::Device(c10::kCPU)), "gloo");
  EXPECT_NE(test::error_message([] { resolve_backend("mpi", c10::Device(c10::kCPU)); }).find("--dist-backend"),
            std::string::npos);
  EXPECT_NE(test::error_message([] { resolve_backend("nccl", c10::Device(c10::kCPU)); }).find("--dist-backend nccl"),
            std::string::npos);
}

}  // namespace
}  // namespace alps::dist
