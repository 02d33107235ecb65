#include "alps/dist/group.h"

#include <ATen/ATen.h>

#include <cstring>

#include "alps/core/error.h"

namespace alps::dist {

void Group::all_reduce_sum(at::Tensor& t, const std::string& what) {
  reduce_sum(t, 0, what);
  broadcast(t, 0, what);
}

std::vector<std::string> Group::all_gather(const std::string& mine, const std::string& what) {
  if (size() == 1) return {mine};
  at::Tensor lengths = at::zeros({size()}, at::kLong);
  lengths[rank()] = static_cast<int64_t>(mine.size());
  all_reduce_sum(lengths, what);
  std::vector<std::string> all;
  for (int r = 0; r < size(); ++r) {
    at::Tensor bytes = at::empty({lengths[r].item<int64_t>()}, at::kByte);
    if (r == rank() && !mine.empty()) std::memcpy(bytes.data_ptr(), mine.data(), mine.size());
    if (bytes.numel() > 0) broadcast(bytes, r, what);
    all.emplace_back(static_cast<const char*>(bytes.data_ptr()), static_cast<size_t>(bytes.numel()));
  }
  return all;
}

void Group::agree(const std::string& mine, const std::string& what) {
  const auto all = all_gather(mine, what);
  if (!mine.empty()) return;
  for (int r = 0; r < size(); ++r)
    if (!all[static_cast<size_t>(r)].empty())
      ALPS_FAIL("rank ", r, " of ", size(), " stopped while ", what, ": ", all[static_cast<size_t>(r)]);
}

namespace {

class SingleProcess final : public Group {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "none"; }
  std::vector<std::string> places() const override { return {}; }
  void reduce_sum(at::Tensor&, int, const std::string&) override {}
  void broadcast(at::Tensor&, int, const std::string&) override {}
  void publish(const std::string&) override {}
  void wait_for(const std::vector<std::string>&, const std::string&) override {}
  void announce_failure(const std::string&) override {}
  std::unique_ptr<Group> subgroup(const std::vector<int>& members, const std::string&) override {
    ALPS_CHECK(members == std::vector<int>{0}, "a group of one process has rank 0 alone");
    return std::make_unique<SingleProcess>();
  }
};

}  // namespace

std::unique_ptr<Group> single_process() { return std::make_unique<SingleProcess>(); }

}  // namespace alps::dist
