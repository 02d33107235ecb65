#include "alps/pipeline/expert_removal.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <numeric>

#include "alps/core/log.h"
#include "alps/pipeline/activations.h"
#include "alps/pipeline/exchange.h"
#include "alps/pipeline/run_state.h"

namespace alps::pipeline {

namespace {

const char* kStructure = "experts";

const UnitStep* experts_step(const RunPlan& plan) {
  for (const UnitStep& u : plan.unit_steps)
    if (u.structure == model::Structure::experts) return &u;
  return nullptr;
}

// The `keep` highest scores' experts, ascending; a tie keeps the lower index.
std::vector<int64_t> highest(const std::vector<double>& score, int64_t keep) {
  std::vector<int64_t> order(score.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int64_t a, int64_t b) { return score[static_cast<size_t>(a)] > score[static_cast<size_t>(b)]; });
  order.resize(static_cast<size_t>(keep));
  std::sort(order.begin(), order.end());
  return order;
}

}  // namespace

model::KeptExperts remove_experts(int64_t b, const RunPlan& plan, model::CausalLM& m, Activations& windows,
                                  Exchange& exchange, Phases& phases, nlohmann::json& reports) {
  const UnitStep* step = experts_step(plan);
  const int64_t E = m.num_experts(b), blocks = m.num_blocks();
  if (step == nullptr || E == 0) return {};
  const auto phase = phases.enter("structured", fmt::format("scoring the experts of block {}/{}", b + 1, blocks));
  const auto t0 = std::chrono::steady_clock::now();
  // Per expert, over its routed tokens: the sum of probability x ||output|| (on the device, no wait per batch), and
  // their count.
  at::Tensor routed_output = at::zeros({E}, at::TensorOptions().dtype(at::kDouble).device(plan.device));
  at::Tensor routed_tokens = at::zeros({E}, at::kLong);
  windows.observe_experts(b, [&](int64_t e, const at::Tensor& probability, const at::Tensor& output) {
    routed_tokens[e] += probability.size(0);
    const at::Tensor norm = at::linalg_vector_norm(output.to(at::kFloat), 2, {-1});
    routed_output.select(0, e).add_(probability.mul(norm).sum());
  });
  // Over every rank's windows: each rank then keeps the same experts.
  exchange.sum(routed_output, "summing the expert scores");
  exchange.sum(routed_tokens, "summing the expert scores");
  const at::Tensor sums = routed_output.cpu();
  std::vector<int64_t> tokens(static_cast<size_t>(E));
  std::vector<double> score(static_cast<size_t>(E)), mass(static_cast<size_t>(E));
  for (size_t e = 0; e < score.size(); ++e) {
    mass[e] = sums[static_cast<int64_t>(e)].item<double>();
    tokens[e] = routed_tokens[static_cast<int64_t>(e)].item<int64_t>();
    const auto n = static_cast<double>(tokens[e]);
    score[e] = *plan.expert_score == ExpertScore::frequency ? n : n > 0 ? mass[e] / n : 0.0;
  }
  const std::vector<int64_t> kept = highest(score, step->counts.at("experts").keep);
  std::vector<bool> is_kept(mass.size(), false);
  for (int64_t e : kept) is_kept[static_cast<size_t>(e)] = true;
  double total = 0, removed_mass = 0;
  std::vector<int64_t> removed;
  for (size_t e = 0; e < mass.size(); ++e) {
    total += mass[e];
    if (is_kept[e]) continue;
    removed_mass += mass[e];
    removed.push_back(static_cast<int64_t>(e));
  }
  model::KeptExperts changed = m.keep_experts(b, kept);
  const double seconds = seconds_since(t0);
  const double share = total > 0 ? removed_mass / total : 0.0;
  reports.push_back({{"block", b},
                     {"linear", changed.router.substr(0, changed.router.size() - std::string(".weight").size())},
                     {"structure", kStructure},
                     {"units", E},
                     {"kept", static_cast<int64_t>(kept.size())},
                     {"kept_units", kept},
                     {"method", expert_score_name(*plan.expert_score)},
                     {"scores", score},
                     {"tokens", tokens},
                     {"removed_share", share},
                     {"seconds", seconds}});
  spdlog::info("block {}/{} experts: kept {} of {} ({}; removed {}: {:.2f}% of the routed output, {:.2f}s)", b + 1,
               blocks, kept.size(), E, expert_score_name(*plan.expert_score), fmt::join(removed, ", "), 100 * share,
               seconds);
  return changed;
}

void replay_expert_removal(model::CausalLM& m, const nlohmann::json& reports) {
  for (const nlohmann::json& r : reports)
    if (r.value("structure", "") == kStructure)
      m.keep_experts(r.at("block").get<int64_t>(), r.at("kept_units").get<std::vector<int64_t>>());
}

std::vector<LayerJob> renamed_jobs(const std::vector<LayerJob>& jobs,
                                   const std::map<std::string, std::string>& renamed) {
  std::vector<LayerJob> out;
  for (const LayerJob& j : jobs) {
    auto it = renamed.find(j.weight);
    if (it == renamed.end()) {
      out.push_back(j);
      continue;
    }
    if (it->second.empty()) continue;
    LayerJob renamed = j;
    renamed.weight = it->second;
    renamed.name = it->second.substr(0, it->second.size() - std::string(".weight").size());
    out.push_back(std::move(renamed));
  }
  return out;
}

}  // namespace alps::pipeline
