#include <ATen/ATen.h>

#include <algorithm>
#include <string>
#include <vector>

#include "alps/core/error.h"
#include "alps/model/causal_lm.h"
#include "model/architecture.h"
#include "model/causal_lm_state.h"

// CausalLM's structured edits (docs/structured.md, docs/moe.md): the units and experts that leave a block, and the
// config.json fields the smaller shapes give.
namespace alps::model {

std::vector<UnitRule> CausalLM::unit_rules(int64_t block, Structure s) const {
  std::vector<UnitRule> rules = state_->arch->unit_rules(block, s, shapes_of(*this));
  ALPS_CHECK(!rules.empty(), "block ", block, " has no unit rule");
  if (!rules.front().refusal.empty())
    rules.front().refusal = state_->config.architecture + ": " + rules.front().refusal;
  return rules;
}

std::vector<std::string> CausalLM::keep_units(int64_t block, const UnitRule& rule, const std::vector<int64_t>& kept,
                                              const at::Tensor& consumer_weight) {
  ALPS_CHECK(rule.refusal.empty(), rule.refusal);
  const std::string p = state_->arch->block_prefix(block);
  // The kept rows of each run, top to bottom.
  auto kept_rows = [&](const std::string& name, const std::vector<RowRun>& runs) {
    std::vector<int64_t> rows;
    int64_t first = 0;
    for (const RowRun& run : runs) {
      if (run.width == 0) {
        for (int64_t r = 0; r < run.rows; ++r) rows.push_back(first + r);
        first += run.rows;
        continue;
      }
      for (int64_t u : kept)
        for (int64_t r = 0; r < run.width; ++r) rows.push_back(first + u * run.width + r);
      first += rule.units * run.width;
    }
    ALPS_CHECK(first == tensor(name).size(0), "keep_units ", name, ": its runs cover ", first, " rows of ",
               tensor(name).size(0));
    return at::tensor(rows, at::kLong);
  };
  std::vector<std::string> changed;
  for (const UnitRows& r : rule.rows) {
    const std::string name = p + r.tensor;
    reshape_tensor(name, tensor(name).index_select(0, kept_rows(name, r.runs)));
    changed.push_back(name);
  }
  const std::string consumer = p + rule.consumer + ".weight";
  const at::Tensor W = tensor(consumer);
  ALPS_CHECK(consumer_weight.dim() == 2 && consumer_weight.size(0) == W.size(0) &&
                 consumer_weight.size(1) == static_cast<int64_t>(kept.size()) * rule.width,
             "keep_units ", consumer, ": expected [", W.size(0), ", ", kept.size() * rule.width, "], got ",
             shape_str(consumer_weight.sizes()));
  reshape_tensor(consumer, consumer_weight);
  changed.push_back(consumer);
  return changed;
}

int64_t CausalLM::num_experts(int64_t block) const {
  const auto t = state_->arch->expert_tensors(block, shapes_of(*this));
  return t ? static_cast<int64_t>(t->experts.size()) : 0;
}

std::string CausalLM::router_name(int64_t block) const {
  const auto t = state_->arch->expert_tensors(block, shapes_of(*this));
  if (!t) return "";
  const std::string suffix = ".weight";  // the weight's name, as ExpertTensors holds it
  return t->router.substr(0, t->router.size() - suffix.size());
}

KeptExperts CausalLM::keep_experts(int64_t block, const std::vector<int64_t>& kept) {
  const auto t = state_->arch->expert_tensors(block, shapes_of(*this));
  ALPS_CHECK(t.has_value(), "block ", block, " has no mixture of experts");
  const auto E = static_cast<int64_t>(t->experts.size());
  ALPS_CHECK(!kept.empty() && std::is_sorted(kept.begin(), kept.end()) &&
                 std::adjacent_find(kept.begin(), kept.end()) == kept.end() && kept.front() >= 0 && kept.back() < E,
             "keep_experts: block ", block, ": expected ascending distinct experts below ", E);
  const std::string p = state_->arch->block_prefix(block);
  State& s = *state_;
  KeptExperts changed{{}, p + t->router};
  // A resident copy follows its tensor's name.
  auto move = [&](const std::string& from, const std::string& to) {
    changed.renamed[from] = to;
    if (to.empty()) {
      s.stored.erase(from);
      s.resident.erase(from);
      return;
    }
    s.stored.rename(from, to);
    if (auto it = s.resident.find(from); it != s.resident.end()) {
      s.resident[to] = it->second;
      s.resident.erase(it);
    }
  };
  // The removed go first; then each kept expert j takes the names of expert j, which is gone or was moved to a lower
  // index before it (kept is ascending).
  std::vector<bool> keep(static_cast<size_t>(E), false);
  for (int64_t e : kept) keep[static_cast<size_t>(e)] = true;
  for (int64_t e = 0; e < E; ++e)
    if (!keep[static_cast<size_t>(e)])
      for (const std::string& name : t->experts[static_cast<size_t>(e)]) move(p + name, "");
  for (size_t j = 0; j < kept.size(); ++j) {
    const auto& from = t->experts[static_cast<size_t>(kept[j])];
    const auto& to = t->experts[j];
    if (kept[j] != static_cast<int64_t>(j))
      for (size_t k = 0; k < from.size(); ++k) move(p + from[k], p + to[k]);
  }
  reshape_tensor(changed.router, tensor(changed.router).index_select(0, at::tensor(kept, at::kLong)));
  return changed;
}

nlohmann::json CausalLM::config_of_shapes() const {
  nlohmann::json fields = state_->arch->config_of_shapes(shapes_of(*this));
  const std::string& section = state_->config.config_section;
  if (fields.empty() || section.empty()) return fields;
  return {{section, fields}};
}

}  // namespace alps::model
