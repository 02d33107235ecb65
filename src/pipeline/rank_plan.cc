#include "alps/pipeline/rank_plan.h"

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

double cost_of(const GroupShape& g, int parts) { return g.products / parts + g.in * g.in * g.in / 10; }

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

}  // namespace alps::pipeline
