#include "alps/pipeline/unit_removal.h"

#include <ATen/ATen.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>

#include "alps/core/error.h"
#include "alps/core/log.h"
#include "alps/model/causal_lm.h"
#include "alps/pipeline/exchange.h"
#include "alps/pipeline/layer_stats.h"
#include "alps/pipeline/run_plan.h"
#include "alps/pipeline/run_state.h"
#include "alps/prune/structured.h"

namespace alps::pipeline {

std::string structure_name(model::Structure s) {
  switch (s) {
    case model::Structure::neurons:
      return "neurons";
    case model::Structure::heads:
      return "heads";
    case model::Structure::kv_groups:
      return "kv_groups";
    case model::Structure::experts:
      return "experts";
  }
  return "?";
}

namespace {

// One rule's units of block b: rank 0 chooses on every rank's windows; the others take its units and refit bit for
// bit. Returns the tensors changed and adds the report.
std::vector<std::string> remove_rule_units(int64_t b, const UnitStep& u, const model::UnitRule& rule,
                                           const RunPlan& plan, model::CausalLM& m, BlockStats& stats,
                                           Exchange& exchange, Phases& phases, nlohmann::json& reports) {
  const std::string kind = structure_name(u.structure);
  const int64_t blocks = m.num_blocks();
  const UnitCount& c = u.counts.at(rule.field);
  const std::string weight = m.weight_name(b, rule.consumer);
  LayerStats& s = stats.at(rule.consumer);
  exchange.reduce_to_rank0(s, fmt::format("reducing the statistics of block {}/{} {}", b + 1, blocks, rule.consumer));
  const auto phase = phases.enter("structured", fmt::format("choosing the {} of block {}/{}", kind, b + 1, blocks));
  const int64_t keep = c.keep * c.parts, rows = m.tensor(weight).size(0);
  at::Tensor kept = at::empty({keep}, at::TensorOptions().dtype(at::kLong).device(plan.device));
  at::Tensor W = at::empty({rows, keep * rule.width}, at::TensorOptions().dtype(at::kFloat).device(plan.device));
  nlohmann::json report = {{"block", b},
                           {"linear", weight.substr(0, weight.size() - std::string(".weight").size())},
                           {"structure", kind},
                           {"field", rule.field},
                           {"units", c.units},
                           {"kept", keep},
                           {"method", std::string(plan.unit_method()->name())}};
  const auto t0 = std::chrono::steady_clock::now();
  if (exchange.writes_output()) {
    prune::UnitProblem p;
    p.W0 = m.tensor(weight).to(plan.device).to(at::kFloat);
    p.width = rule.width;
    p.parts = c.parts;
    p.keep = c.keep;
    p.name = weight;
    p.G = s.gram().to(plan.device);
    report["tokens"] = s.tokens();
    if (s.tokens() == 0) {
      // An expert no calibration token reached: inputs taken as white (G = I), so its consumer's columns of
      // largest norm stay, as they are.
      p.G = at::eye(p.in(), p.G.options());
      report["rule"] = "no calibration token reached it: the columns of largest norm stay, unchanged";
    }
    prune::UnitSolution sol;
    try {
      sol = plan.unit_method()->solve(p);
    } catch (const Error& e) {
      ALPS_FAIL("block ", b + 1, "/", blocks, " ", rule.consumer, ": ", e.what());
    }
    report["rel_error"] = prune::unit_relative_error(p, sol);
    report["stats"] = sol.stats;
    kept.copy_(at::tensor(sol.kept, at::kLong));
    W.copy_(sol.W);
  }
  exchange.from_rank0(kept, "sharing the kept " + kind);
  exchange.from_rank0(W, "sharing the kept " + kind);
  const double seconds = seconds_since(t0);
  const at::Tensor kept_cpu = kept.cpu();
  const std::vector<int64_t> units(kept_cpu.data_ptr<int64_t>(), kept_cpu.data_ptr<int64_t>() + keep);
  std::vector<std::string> changed = m.keep_units(b, rule, units, W.cpu());
  s.keep_inputs(prune::unit_columns(units, rule.width, at::kCPU));
  report["kept_units"] = units;
  report["seconds"] = seconds;
  spdlog::info("block {}/{} {}: kept {} of {} {} ({}, err {:.4e}, {:.2f}s)", b + 1, blocks, rule.consumer, keep,
               c.units, kind, plan.unit_method()->name(), report.value("rel_error", 0.0), seconds);
  reports.push_back(std::move(report));
  return changed;
}

}  // namespace

std::vector<std::string> remove_units(int64_t b, const RunPlan& plan, model::CausalLM& m, BlockStats& stats,
                                      Exchange& exchange, Phases& phases, nlohmann::json& reports) {
  std::vector<std::string> changed;
  for (const UnitStep& u : plan.unit_steps) {
    if (u.structure == model::Structure::experts) continue;  // expert_removal.h, before the statistics
    for (const model::UnitRule& rule : m.unit_rules(b, u.structure))
      for (std::string& name : remove_rule_units(b, u, rule, plan, m, stats, exchange, phases, reports))
        changed.push_back(std::move(name));
  }
  return changed;
}

void describe_unit_steps(const RunPlan& plan, const nlohmann::json& options, int64_t parameters_before,
                         int64_t parameters_after, int64_t weight_bytes_before, nlohmann::json& structured) {
  // The neurons' and heads' method, or the experts' score where experts alone go.
  structured["method"] =
      plan.unit_method() != nullptr ? std::string(plan.unit_method()->name()) : expert_score_name(*plan.expert_score);
  if (plan.unit_method() != nullptr) structured["options"] = options;
  nlohmann::json steps = nlohmann::json::array();
  for (const UnitStep& u : plan.unit_steps) {
    const bool experts = u.structure == model::Structure::experts;
    for (const auto& [field, c] : u.counts)
      steps.push_back(
          {{"structure", structure_name(u.structure)},
           {"flag", u.flag},
           {"field", field},
           {"method", experts ? expert_score_name(*plan.expert_score) : std::string(plan.unit_method()->name())},
           {"units", c.units},
           {"parts", c.parts},
           {"kept", c.keep * c.parts}});
  }
  structured["steps"] = steps;
  structured["parameters"] = {{"before", parameters_before}, {"after", parameters_after}};
  structured["weight_bytes_before"] = weight_bytes_before;
}

}  // namespace alps::pipeline
