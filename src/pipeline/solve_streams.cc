#include "alps/pipeline/solve_streams.h"

#include <algorithm>
#include <map>

#include "alps/core/error.h"

namespace alps::pipeline {

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

}  // namespace alps::pipeline
