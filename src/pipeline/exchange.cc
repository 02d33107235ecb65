#include "alps/pipeline/exchange.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>

#include "alps/core/device_streams.h"
#include "alps/core/error.h"
#include "alps/dist/launch.h"
#include "alps/model/causal_lm.h"
#include "alps/pipeline/layer_stats.h"
#include "alps/pipeline/linear_solve.h"
#include "alps/pipeline/resume_state.h"
#include "alps/pipeline/run_state.h"
#include "alps/prune/row_split.h"

namespace alps::pipeline {

using json = nlohmann::json;

namespace {

// The name and the members (in rank order) of the group of ranks that solve linear li in parts.
std::pair<std::string, std::vector<int>> parts_key(const Schedule& s, size_t li) {
  std::vector<int> members = s.ranks[li];
  std::sort(members.begin(), members.end());
  return {"linear" + std::to_string(s.group[li]), std::move(members)};
}

}  // namespace

void Exchange::agree_on_job(const std::function<json()>& key) {
  if (group_.size() == 1) return;
  const json job = on_every_rank("fingerprinting the job", key);
  const std::vector<std::string> all = group_.all_gather(job.dump(), "agreeing on the job");
  const json rank0 = json::parse(all[0]);
  std::string lines;
  for (size_t r = 1; r < all.size(); ++r)
    for (const auto& d : job_key_differences(rank0, json::parse(all[r]), "rank 0 has", fmt::format("rank {} has", r)))
      lines += "\n  " + d;
  ALPS_CHECK(lines.empty(), "the ranks of this distributed run were given different jobs:", lines,
             "\nstart every rank with the same command, model files, calibration text and alps build");
}

bool Exchange::rank0_says(bool yes, const std::string& what) {
  return group_.all_gather(yes ? "yes" : "no", what).front() == "yes";
}

dist::Group* Exchange::parts_group(const Schedule& s, size_t li) {
  auto key = parts_key(s, li);
  auto& g = parts_[key];
  if (g == nullptr) g = group_.subgroup(key.second, key.first);
  return g.get();
}

void Exchange::reduce_to_rank0(LayerStats& s, const std::string& what) {
  if (group_.size() == 1) return;
  const auto phase = phases_.enter("reduce_statistics", what);
  s.reduce_to(group_, 0, what);
  synchronize(device_);
}

void Exchange::reduce(const Schedule& s, const std::vector<LayerStats*>& inputs, const std::string& block) {
  if (group_.size() == 1) return;
  const auto phase = phases_.enter("reduce_statistics", "reducing the statistics of " + block);
  // The groups of ranks that solve parts, opened in the order of the linears on every rank.
  for (size_t li = 0; li < s.ranks.size(); ++li)
    if (s.in_parts(li) && s.group[li] == static_cast<int>(li) && s.part_of(li) >= 0) (void)parts_group(s, li);
  std::set<const LayerStats*> done;
  for (size_t li = 0; li < inputs.size(); ++li) {
    if (!s.solved[li] || inputs[li] == nullptr || !done.insert(inputs[li]).second) continue;
    inputs[li]->reduce_to(group_, *std::min_element(s.ranks[li].begin(), s.ranks[li].end()), phases_.step());
    if (s.in_parts(li) && s.part_of(li) >= 0) inputs[li]->share_among(*parts_.at(parts_key(s, li)), phases_.step());
  }
  synchronize(device_);
}

std::shared_ptr<const prune::RowSplit> Exchange::split(const Schedule& s, size_t li, int64_t rows,
                                                       const std::string& what) {
  const int part = s.part_of(li);
  if (!s.in_parts(li) || part < 0) return nullptr;
  // This rank's rows; the whole layer's sums through the ranks that solve the others.
  auto split = std::make_shared<prune::RowSplit>();
  split->part = part;
  split->parts = static_cast<int>(s.ranks[li].size());
  split->total_rows = rows;
  split->sum = [members = parts_.at(parts_key(s, li)).get(), what](at::Tensor& t) { members->all_reduce_sum(t, what); };
  return split;
}

void Exchange::share(const Schedule& s, std::vector<Outcome>& outcomes, model::CausalLM& m, const std::string& block) {
  if (group_.size() == 1) {
    for (Outcome& o : outcomes)
      if (o.W.defined()) m.adopt_tensor(o.weight, std::move(o.W));
    return;
  }
  const auto phase = phases_.enter("broadcast_weights", "sharing the pruned weights of " + block);
  const int me = group_.rank();
  for (size_t li = 0; li < outcomes.size(); ++li) {
    if (!s.solved[li]) continue;
    Outcome& o = outcomes[li];
    const at::Tensor held = m.tensor(o.weight);
    const std::vector<int>& rs = s.ranks[li];
    at::Tensor w;
    if (rs.size() == 1) {
      w = rs[0] == me ? o.W : at::empty_like(held);
      group_.broadcast(w, rs[0], phases_.step());
    } else {
      w = at::empty(held.sizes(), held.options().device(at::kCPU));
      for (size_t j = 0; j < rs.size(); ++j) {
        const auto [first, end] = dist::share_of(held.size(0), static_cast<int>(j), static_cast<int>(rs.size()));
        at::Tensor rows = w.slice(0, first, end);  // contiguous: whole rows
        if (rs[j] == me) rows.copy_(o.W);
        group_.broadcast(rows, rs[j], phases_.step());
      }
    }
    o.W = at::Tensor();
    m.adopt_tensor(o.weight, std::move(w));
  }
  share_reports(s, outcomes, m.num_blocks());
}

void Exchange::share_reports(const Schedule& s, std::vector<Outcome>& outcomes, int64_t blocks_total) {
  const int me = group_.rank();
  json mine = json::object();
  for (size_t li = 0; li < outcomes.size(); ++li)
    if (s.ranks[li][0] == me) mine[std::to_string(li)] = report::to_json(outcomes[li].report);
  const auto all = group_.all_gather(mine.dump(), phases_.step());
  for (size_t r = 0; r < all.size(); ++r) {
    if (static_cast<int>(r) == me) continue;
    const json theirs = json::parse(all[r]);  // outlives the loop over its items
    for (const auto& [key, lr] : theirs.items()) {
      Outcome& o = outcomes[static_cast<size_t>(std::stoll(key))];
      o.report = report::layer_from_json(lr);
      log_layer(o.report, o.linear, blocks_total);  // rank 0's log lists every linear
    }
  }
}

void Exchange::retire(model::CausalLM& m, const std::vector<std::pair<std::string, at::Tensor>>& pruned) {
  if (writes_output()) return;
  for (const auto& [name, w] : pruned) m.release_tensor(name);
}

std::pair<int64_t, int64_t> Exchange::windows(int64_t windows) const {
  if (group_.size() > 1 && windows > 0)
    spdlog::info("{} ranks hold {} to {} windows each", group_.size(), windows / group_.size(),
                 (windows + group_.size() - 1) / group_.size());
  return dist::share_of(windows, group_.rank(), group_.size());
}

std::vector<std::pair<int64_t, int64_t>> Exchange::input_shards(int64_t windows) const {
  std::vector<std::pair<int64_t, int64_t>> shards;
  if (group_.size() > 1)
    for (int r = 0; r < group_.size(); ++r) shards.push_back(dist::share_of(windows, r, group_.size()));
  return shards;
}

void Exchange::share_state(StateDir& dir) {
  if (group_.size() == 1) return;
  StateSharing sharing;
  sharing.rank = group_.rank();
  sharing.shard = static_cast<size_t>(group_.rank());
  auto key = [](int64_t next_block, int r) { return fmt::format("inputs/{}/{}", next_block, r); };
  sharing.shard_written = [this, key](int64_t next_block) { group_.publish(key(next_block, group_.rank())); };
  sharing.await_shards = [this, key](int64_t next_block) {
    std::vector<std::string> keys;
    for (int r = 1; r < group_.size(); ++r) keys.push_back(key(next_block, r));
    group_.wait_for(keys, fmt::format("waiting for the ranks' shards of the inputs of block {}", next_block + 1));
  };
  dir.share(std::move(sharing));
}

json Exchange::describe(const dist::Launch& launch, int64_t blocks) const {
  if (!launch.launched()) return json();
  json d = {{"world_size", group_.size()},
            {"backend", group_.backend()},
            {"launcher", launch.launcher},
            {"ranks", group_.places()}};
  if (group_.size() == 1) return d;
  int64_t within_parts = 0;  // the parts' statistics and sums
  for (const auto& [key, g] : parts_) within_parts += g->bytes_reduced() + g->bytes_broadcast();
  const int64_t n = std::max<int64_t>(1, blocks);
  d["bytes_per_block"] = {{"reduce", group_.bytes_reduced() / n},
                          {"broadcast", group_.bytes_broadcast() / n},
                          {"within_parts", within_parts / n}};
  return d;
}

}  // namespace alps::pipeline
