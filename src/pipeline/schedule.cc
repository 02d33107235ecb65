#include "alps/pipeline/schedule.h"

#include <algorithm>
#include <map>

#include "alps/core/error.h"

namespace alps::pipeline {

SplitRule parse_split_rule(std::string_view text) {
  if (text == "auto") return SplitRule::kAuto;
  if (text == "off") return SplitRule::kOff;
  if (text == "all") return SplitRule::kAll;
  ALPS_USAGE_FAIL("--dist-split: unknown rule '", text, "' (expected auto, off or all)");
}

double part_cost(double products, double in, int parts) { return products / parts + in * in * in / 10; }

namespace {

struct GroupShape {
  double products = 0;  // sum of in^2 out
  double in = 0;
  int64_t fewest_rows = 0;
  bool splits = true;
};

std::map<int, GroupShape> group_shapes(const SolveWork& w) {
  std::map<int, GroupShape> shapes;
  for (size_t li = 0; li < w.group.size(); ++li) {
    if (w.out[li] == 0) continue;
    GroupShape& g = shapes[w.group[li]];
    const double in = static_cast<double>(w.in[li]);
    g.products += in * in * static_cast<double>(w.out[li]);
    g.in = std::max(g.in, in);
    g.fewest_rows = g.fewest_rows == 0 ? w.out[li] : std::min(g.fewest_rows, w.out[li]);
    g.splits = g.splits && w.splits[li];
  }
  return shapes;
}

double cost_of(const GroupShape& g, int parts) { return part_cost(g.products, g.in, parts); }

// Longest processing time over the parts, a group's parts on distinct ranks; returns each group's ranks in part
// order and the largest load.
std::pair<std::map<int, std::vector<int>>, double> assign(const std::map<int, GroupShape>& shapes,
                                                          const std::map<int, int>& parts, int world) {
  struct Item {
    int group, part;
    double cost;
  };
  std::vector<Item> items;
  for (const auto& [g, shape] : shapes)
    for (int j = 0; j < parts.at(g); ++j) items.push_back({g, j, cost_of(shape, parts.at(g))});
  // Costliest first; equal costs in group and part order, so that every rank makes the same plan.
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.cost > b.cost; });
  std::vector<double> load(static_cast<size_t>(world), 0.0);
  std::map<int, std::vector<int>> ranks;
  for (const auto& [g, shape] : shapes) ranks[g].assign(static_cast<size_t>(parts.at(g)), -1);
  for (const Item& it : items) {
    std::vector<int>& holders = ranks[it.group];
    int best = -1;
    for (int r = 0; r < world; ++r) {
      if (std::find(holders.begin(), holders.end(), r) != holders.end()) continue;
      if (best < 0 || load[static_cast<size_t>(r)] < load[static_cast<size_t>(best)]) best = r;
    }
    holders[static_cast<size_t>(it.part)] = best;
    load[static_cast<size_t>(best)] += it.cost;
  }
  return {ranks, *std::max_element(load.begin(), load.end())};
}

}  // namespace

std::vector<std::vector<int>> plan_ranks(const SolveWork& work, int world, SplitRule rule) {
  ALPS_CHECK(world >= 1 && work.in.size() == work.out.size() && work.out.size() == work.group.size() &&
                 work.group.size() == work.splits.size(),
             "plan_ranks: inconsistent work");
  const auto shapes = group_shapes(work);
  auto most_parts = [&](const GroupShape& g) {
    return g.splits ? static_cast<int>(std::min<int64_t>(world, g.fewest_rows)) : 1;
  };
  std::map<int, int> parts;
  for (const auto& [g, shape] : shapes) parts[g] = rule == SplitRule::kAll ? most_parts(shape) : 1;
  auto best = assign(shapes, parts, world);
  while (rule == SplitRule::kAuto) {
    // One more part for the group whose part is the costliest, if the block then ends sooner.
    int widest = -1;
    for (const auto& [g, shape] : shapes)
      if (parts[g] < most_parts(shape) &&
          (widest < 0 || cost_of(shape, parts[g]) > cost_of(shapes.at(widest), parts[widest])))
        widest = g;
    if (widest < 0) break;
    std::map<int, int> more = parts;
    ++more[widest];
    auto candidate = assign(shapes, more, world);
    if (candidate.second >= best.second) break;
    parts = std::move(more);
    best = std::move(candidate);
  }
  std::vector<std::vector<int>> ranks(work.group.size(), std::vector<int>{0});
  for (size_t li = 0; li < work.group.size(); ++li)
    if (work.out[li] > 0) ranks[li] = best.first.at(work.group[li]);
  return ranks;
}

std::vector<std::vector<size_t>> split_among_streams(const std::vector<double>& cost, const std::vector<int>& group,
                                                     int streams) {
  ALPS_CHECK(cost.size() == group.size() && streams >= 1, "split_among_streams: ", cost.size(), " costs, ",
             group.size(), " groups, ", streams, " streams");
  std::map<int, double> group_cost;  // ordered by group id: ties among equal costs go by it
  for (size_t i = 0; i < cost.size(); ++i) group_cost[group[i]] += cost[i];
  std::vector<std::pair<int, double>> order(group_cost.begin(), group_cost.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  // Longest processing time first: each group to the least loaded list.
  std::vector<double> load(static_cast<size_t>(streams), 0.0);
  std::map<int, size_t> list_of;
  for (const auto& [g, c] : order) {
    const size_t l = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    list_of[g] = l;
    load[l] += c;
  }
  std::vector<std::vector<size_t>> lists(static_cast<size_t>(streams));
  for (size_t i = 0; i < cost.size(); ++i) lists[list_of.at(group[i])].push_back(i);
  lists.erase(std::remove_if(lists.begin(), lists.end(), [](const auto& l) { return l.empty(); }), lists.end());
  return lists;
}

int Schedule::part_of(size_t li) const {
  const auto it = std::find(ranks[li].begin(), ranks[li].end(), rank);
  return it == ranks[li].end() ? -1 : static_cast<int>(it - ranks[li].begin());
}

Schedule schedule_block(const SolveWork& work, const World& world) {
  Schedule s;
  s.rank = world.rank;
  s.ranks = plan_ranks(work, world.size, world.split);
  s.group = work.group;
  for (int64_t out : work.out) s.solved.push_back(out > 0);
  // This rank's linears, each group's part cost carried by its first linear (split_among_streams sums a group's).
  const auto shapes = group_shapes(work);
  std::vector<size_t> mine;
  std::vector<double> cost;
  std::vector<int> group;
  for (size_t li = 0; li < s.ranks.size(); ++li) {
    if (s.part_of(li) < 0) continue;
    mine.push_back(li);
    const auto shape = shapes.find(s.group[li]);
    const bool carries = shape != shapes.end() && s.group[li] == static_cast<int>(li);
    cost.push_back(carries ? cost_of(shape->second, static_cast<int>(s.ranks[li].size())) : 0.0);
    group.push_back(s.group[li]);
  }
  if (mine.empty()) return s;
  s.lists = split_among_streams(cost, group, world.streams);
  for (auto& l : s.lists) {
    for (size_t& i : l) i = mine[i];
    std::stable_partition(l.begin(), l.end(), [&](size_t li) { return s.in_parts(li); });
  }
  return s;
}

}  // namespace alps::pipeline
