#include "alps/pipeline/run_plan.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "alps/core/device.h"
#include "alps/core/error.h"
#include "alps/core/strings.h"
#include "alps/model/causal_lm.h"

namespace alps::pipeline {

using json = nlohmann::json;

namespace {

std::string strip_weight(const std::string& name) {
  constexpr std::string_view suffix = ".weight";
  return ends_with(name, suffix) ? name.substr(0, name.size() - suffix.size()) : name;
}

// --dtype auto: on a GPU the model computes in its checkpoint's half precision (as transformers runs it there, and
// the matrix units' rate); an fp32 checkpoint, and every CPU run, in fp32.
c10::ScalarType automatic_dtype(const model::CausalLM& m, const c10::Device& device) {
  const auto stored = m.tensor(m.weight_name(0, m.linear_names(0).front())).scalar_type();
  return device.is_cuda() && (stored == c10::kHalf || stored == c10::kBFloat16) ? stored : c10::kFloat;
}

// Full names (without ".weight") of the model's linears.
std::vector<std::string> linear_layer_names(const model::CausalLM& m) {
  std::vector<std::string> names;
  for (int64_t b = 0; b < m.num_blocks(); ++b)
    for (const auto& linear : m.linear_names(b)) names.push_back(strip_weight(m.weight_name(b, linear)));
  return names;
}

// Full names of the mixtures' routers, which are not among the linears.
std::vector<std::string> router_names(const model::CausalLM& m) {
  std::vector<std::string> names;
  for (int64_t b = 0; b < m.num_blocks(); ++b)
    if (const std::string router = m.router_name(b); !router.empty())
      names.push_back(strip_weight(m.weight_name(b, router)));
  return names;
}

// The rules that name routers: they select some router and no other linear of the model ("*.mlp.gate"). "*",
// "*.mlp.*" or a rule meant for dense MLPs' gate_proj ("*.mlp.gate*") match routers too but mean other linears, and
// a router pruned by accident changes which experts every token reaches. A rule that skips names nothing to prune.
std::vector<std::string> router_globs(const model::CausalLM& m, const Recipe& r) {
  const std::vector<std::string> routers = router_names(m), others = linear_layer_names(m);
  auto matches_any = [](const std::string& glob, const std::vector<std::string>& names) {
    return std::any_of(names.begin(), names.end(), [&](const std::string& n) { return glob_match(glob, n); });
  };
  std::vector<std::string> globs;
  for (const LayerRule& o : r.overrides)
    if (!o.skip.value_or(false) && matches_any(o.match, routers) && !matches_any(o.match, others))
      globs.push_back(o.match);
  return globs;
}

}  // namespace

RunPlan::RunPlan(const model::CausalLM& m, const Recipe& r) {
  check_recipe(r, "recipe");
  device = resolve_device(r.device);
  dtype = r.dtype == "auto" ? automatic_dtype(m, device) : parse_dtype(r.dtype);
  stats_dtype = parse_dtype(r.stats_dtype);
  stats_on_host = r.stats_device == "cpu";
  expert_inputs = r.moe_calibration == "all" ? model::ExpertInputs::all : model::ExpertInputs::routed;
  stats_device = stats_on_host ? c10::Device(c10::kCPU) : device;
  ALPS_CHECK(device.is_cuda() || dtype == c10::kFloat || dtype == c10::kDouble, "--dtype ", r.dtype,
             " needs a CUDA device; use fp32 on the CPU");
  const auto& cfg = m.config();
  seqlen = r.seqlen > 0 ? r.seqlen : cfg.default_window();
  eval_seqlen = r.eval_seqlen > 0 ? r.eval_seqlen : cfg.default_window();
  // On a GPU two solves at once fill what one leaves idle (host waits, memory-bound passes, factorizations); the
  // CPU's BLAS already spreads each solve's products over every core.
  solve_streams = !device.is_cuda() ? 1 : r.solve_streams > 0 ? r.solve_streams : 2;
  split_rule = parse_split_rule(r.dist_split);
  if (split_rule == SplitRule::kAuto && !device.is_cuda()) split_rule = SplitRule::kOff;
  ALPS_CHECK(seqlen <= cfg.max_sequence_length(), "--seqlen ", seqlen, " exceeds the model's ", cfg.max_positions,
             " positions");
  ALPS_CHECK(eval_seqlen <= cfg.max_sequence_length(), "--eval-seqlen ", eval_seqlen, " exceeds the model's ",
             cfg.max_positions, " positions");
  // The recipe's own method and constants are checked once, named as the user gave them (--method, --option); what
  // an override gives one layer is checked with that layer's name below.
  (void)method(r.method, r.options);
  if (r.sparsity_profile == "owl") {
    ALPS_USAGE_CHECK(r.pattern.has_value(), "--sparsity-profile owl spreads the recipe's --sparsity S or --pattern N:M "
                     "over the blocks: give one");
    owl = prune::OwlOptions{r.owl_m, r.owl_lambda};
    // N:M: OWL's mixed variant, each block keeping n plus or minus a few of every m.
    const std::string problem = r.pattern->is_n_m()
                                    ? prune::owl_nm_options_problem(*owl, r.pattern->n(), r.pattern->m())
                                    : prune::owl_options_problem(*owl, r.pattern->sparsity());
    ALPS_USAGE_CHECK(problem.empty(), problem.rfind("M ", 0) == 0 ? "--owl-m: " : "--owl-lambda: ", problem);
    // Blocks measured on the dense model, then pruned with these sparsities: the calibration windows are needed
    // even by methods that read no statistics.
    needs_calibration = true;
  }
  plan_unit_steps(m, r);
  const std::vector<std::string> globs = router_globs(m, r);
  for (int64_t b = 0; b < m.num_blocks(); ++b) {
    std::vector<LayerJob> jobs;
    for (const auto& linear : m.linear_names(b)) jobs.push_back(make_job(m, r, m.weight_name(b, linear), linear));
    add_router_job(m, r, b, globs, jobs);
    for (const LayerJob& j : jobs) needs_calibration = needs_calibration || j.needs_statistics();
    blocks_.push_back(std::move(jobs));
  }
  if (!pruned_routers.empty())
    spdlog::info("routers pruned, as recipe rules name them (docs/moe.md): {} of {} ({}{})", pruned_routers.size(),
                 router_names(m).size(), pruned_routers.front(), pruned_routers.size() > 1 ? ", ..." : "");
}

// A router gets a job only where a rule names it and leaves it something to do: its statistic (every token's Gram)
// costs more than an expert's (all tokens, not the routed ones), and a block without one is computed as before.
void RunPlan::add_router_job(const model::CausalLM& m, const Recipe& r, int64_t b,
                             const std::vector<std::string>& globs, std::vector<LayerJob>& jobs) {
  const std::string router = m.router_name(b);
  const std::string weight = router.empty() ? "" : m.weight_name(b, router);
  const bool named = std::any_of(globs.begin(), globs.end(),
                                 [&](const std::string& g) { return glob_match(g, strip_weight(weight)); });
  LayerJob job = named ? make_job(m, r, weight, router) : LayerJob{};
  router_job_.push_back(named && !job.skip);
  if (!router_job_.back()) return;
  jobs.push_back(std::move(job));
  pruned_routers.push_back(strip_weight(weight));
}

std::vector<std::string> RunPlan::linears(const model::CausalLM& m, int64_t b) const {
  std::vector<std::string> names = m.linear_names(b);
  if (prunes_router(b)) names.push_back(m.router_name(b));
  return names;
}

namespace {

// What a structured flag asks to remove from each part: a fraction of its units, or (count > 0) a count of them.
struct Ask {
  double fraction;
  int64_t count;
  model::Structure structure;
  const char* flag;
  std::string value() const { return count > 0 ? std::to_string(count) : fmt::format("{}", fraction); }
};

// The units each part of `c` keeps when `a` asks for some of them to go (`what` names them): a whole number that
// removes some and leaves some, a whole head or group (a neuron more or less is rounding), and c.multiple's nearest
// multiple where one is asked.
int64_t kept_per_part(const Ask& a, const std::string& what, const UnitCount& c) {
  const int64_t per_part = c.units / c.parts;
  const bool neurons = a.structure == model::Structure::neurons;
  const char* flag = a.flag;
  const std::string asked = a.value();
  const double exact = a.count > 0 ? static_cast<double>(a.count) : a.fraction * static_cast<double>(per_part);
  const auto removed = static_cast<int64_t>(std::llround(exact));
  ALPS_USAGE_CHECK(removed >= 1, flag, " ", asked, " of ", per_part, " ", what, " removes none: give at least ",
                   1.0 / static_cast<double>(per_part));
  ALPS_USAGE_CHECK(removed < per_part, flag, " ", asked, " of ", per_part, " ", what, " leaves none");
  // A head is a twelfth of a group or more.
  ALPS_USAGE_CHECK(neurons || std::abs(exact - static_cast<double>(removed)) <= 0.1, flag, " ", asked, " of ", per_part,
                   " ", what, " is ", exact, " of them: whole ones go; give a multiple of 1/", per_part);
  const int64_t keep = per_part - removed;
  const int64_t m = c.multiple;
  if (m == 1) return keep;
  ALPS_USAGE_CHECK(m < per_part, flag, " ", asked, " of ", per_part, " ", what, ": they keep a multiple of ", m, " (",
                   c.multiple_why, "), and none below ", per_part, " is one");
  // The nearest multiple that removes some and keeps some: where the nearest removes none or keeps none, the next
  // one, which is further from what was asked than rounding goes, and the log warns.
  const int64_t nearest = static_cast<int64_t>(std::llround(static_cast<double>(keep) / static_cast<double>(m))) * m;
  const int64_t multiple = std::clamp(nearest, m, (per_part - 1) / m * m);
  if (multiple != keep)
    spdlog::log(multiple == nearest ? spdlog::level::info : spdlog::level::warn,
                "{} {} of {} {}: {} stay, not {}: a multiple of {} ({}){}", flag, asked, per_part, what, multiple, keep,
                m, c.multiple_why,
                multiple == nearest
                    ? ""
                    : fmt::format("; {:.1f}% of them go, not {:.1f}%",
                                  100.0 * static_cast<double>(per_part - multiple) / static_cast<double>(per_part),
                                  100.0 * static_cast<double>(per_part - keep) / static_cast<double>(per_part)));
  return multiple;
}

// A mixture's experts keep a multiple of rule.multiple, and every MLP --neuron-multiple's: their least common multiple.
void round_to_multiples(UnitCount& c, const Recipe& r, bool neurons) {
  if (c.multiple > 1)
    c.multiple_why =
        "transformers multiplies a mixture's experts in grouped products, whose rows must be whole multiples of 16 "
        "bytes";
  if (!neurons || r.neuron_multiple == 1) return;
  c.multiple_why += fmt::format("{}--neuron-multiple {}", c.multiple_why.empty() ? "" : "; ", r.neuron_multiple);
  // One the part's width does not exceed is refused as it is (kept_per_part); an lcm of larger ones could overflow.
  c.multiple = r.neuron_multiple >= c.units / c.parts ? r.neuron_multiple : std::lcm(c.multiple, r.neuron_multiple);
}

}  // namespace

void RunPlan::plan_unit_steps(const model::CausalLM& m, const Recipe& r) {
  ALPS_USAGE_CHECK(r.sparsity_profile != "owl" || !r.removes_units(),
                   "--sparsity-profile owl counts the zeros of each block on its dense shapes; with --remove-experts, "
                   "--remove-neurons, --remove-heads or --remove-heads-per-group use --sparsity-profile uniform");
  plan_expert_step(m, r);
  ALPS_USAGE_CHECK(r.neuron_multiple == 1 || r.remove_neurons > 0, "--neuron-multiple ", r.neuron_multiple,
                   " rounds the MLP neurons --remove-neurons keeps: give --remove-neurons too");
  ALPS_USAGE_CHECK(r.remove_heads == 0 || r.remove_heads_per_group == 0,
                   "--remove-heads and --remove-heads-per-group both ask for heads to go: give one of them");
  ALPS_USAGE_CHECK(r.remove_heads_per_group == 0 || r.head_rule == "within-groups",
                   "--remove-heads-per-group counts the query heads removed from each key/value group; --head-rule ",
                   r.head_rule, " removes whole groups: give --remove-heads F instead");
  std::vector<Ask> asks;
  if (r.remove_heads > 0)
    asks.push_back({r.remove_heads, 0,
                    r.head_rule == "whole-groups" ? model::Structure::kv_groups : model::Structure::heads,
                    "--remove-heads"});
  if (r.remove_heads_per_group > 0)
    asks.push_back({0, r.remove_heads_per_group, model::Structure::heads, "--remove-heads-per-group"});
  if (r.remove_neurons > 0) asks.push_back({r.remove_neurons, 0, model::Structure::neurons, "--remove-neurons"});
  if (asks.empty()) return;
  unit_method_ = prune::make_unit_method(r.structured_method, r.structured_options);
  for (const Ask& a : asks) {
    // Every block's rules of this kind; each config field states one count for all of its rules.
    UnitStep step{a.structure, a.flag, {}};
    std::map<std::string, std::string> first;  // field -> the first rule's linear, for messages
    std::map<std::string, std::pair<std::string, int64_t>> consumers;  // weight -> its rule's field and width
    for (int64_t b = 0; b < m.num_blocks(); ++b)
      for (const model::UnitRule& rule : m.unit_rules(b, a.structure)) {
        ALPS_USAGE_CHECK(rule.refusal.empty(), a.flag, ": ", b == 0 ? "" : fmt::format("block {}: ", b), rule.refusal);
        const std::string linear = m.weight_name(b, rule.consumer);
        consumers[linear] = {rule.field, rule.width};
        auto [it, fresh] = step.counts.emplace(rule.field, UnitCount{rule.units, rule.parts, 0, rule.multiple, ""});
        if (fresh) first[rule.field] = linear;
        ALPS_USAGE_CHECK(it->second.units == rule.units && it->second.parts == rule.parts, a.flag, ": ", linear,
                         " has ", rule.units, " units where ", first[rule.field], " has ", it->second.units,
                         "; the output's config states one count (", rule.field, ")");
      }
    for (auto& [field, c] : step.counts) {
      std::string what = a.structure == model::Structure::neurons ? "MLP neurons"
                         : a.structure == model::Structure::heads ? "query heads of each key/value group"
                                                                  : "key/value groups";
      if (step.counts.size() > 1) what += " (" + field + ")";
      round_to_multiples(c, r, a.structure == model::Structure::neurons);
      c.keep = kept_per_part(a, what, c);
    }
    for (const auto& [weight, use] : consumers) {
      const auto& [field, width] = use;
      const UnitCount& c = step.counts.at(field);
      consumer_inputs_[weight] = {c.keep * c.parts * width, a.flag};
    }
    unit_steps.push_back(std::move(step));
  }
  needs_calibration = true;
}

void RunPlan::plan_expert_step(const model::CausalLM& m, const Recipe& r) {
  if (r.remove_experts <= 0) return;
  const char* flag = "--remove-experts";
  int64_t E = 0;
  for (int64_t b = 0; b < m.num_blocks() && E == 0; ++b) E = m.num_experts(b);
  ALPS_USAGE_CHECK(E > 0, flag, ": ", m.config().architecture, " has no mixture-of-experts layers");
  const int64_t top_k = m.config().moe->top_k;
  const auto removed = static_cast<int64_t>(std::llround(r.remove_experts * static_cast<double>(E)));
  ALPS_USAGE_CHECK(removed >= 1, flag, " ", r.remove_experts, " of ", E, " experts removes none: give at least ",
                   1.0 / static_cast<double>(E));
  ALPS_USAGE_CHECK(E - removed >= top_k, flag, " ", r.remove_experts, " of ", E, " experts leaves ", E - removed,
                   ", fewer than the ", top_k, " each token is routed to (num_experts_per_tok)");
  expert_score = r.expert_score == "frequency" ? ExpertScore::frequency : ExpertScore::reap;  // check_recipe's choices
  unit_steps.push_back({model::Structure::experts, flag, {{"experts", {E, 1, E - removed, 1, ""}}}});
  needs_calibration = true;
}

LayerJob RunPlan::make_job(const model::CausalLM& m, const Recipe& r, const std::string& weight,
                           const std::string& linear) {
  LayerJob j;
  j.weight = weight;
  j.name = strip_weight(weight);
  const LayerPlan plan = plan_for(r, j.name);
  j.skip = plan.skip;
  if (j.skip) return j;
  const bool some_rule_has_one =
      std::any_of(r.overrides.begin(), r.overrides.end(), [](const LayerRule& o) { return o.pattern.has_value(); });
  if (!plan.pattern && !unit_steps.empty() && !some_rule_has_one) {  // structured pruning alone
    j.skip = true;
    return j;
  }
  if (!plan.pattern) {
    ALPS_USAGE_CHECK(some_rule_has_one, "no sparsity or pattern given: pass --sparsity S (e.g. 0.7) or --pattern N:M "
                     "(e.g. 2:4)");
    ALPS_USAGE_FAIL("the recipe's overrides give a sparsity or pattern to some layers but not to ", j.name,
                    ": pass --sparsity S or --pattern N:M for the others");
  }
  try {
    j.pattern = plan.pattern;
    j.follows_profile = !plan.pattern_overridden;
    const auto& w = m.tensor(weight);
    const auto consumer = consumer_inputs_.find(weight);  // what the structured steps leave of its input
    const int64_t in = consumer == consumer_inputs_.end() ? w.size(1) : consumer->second.in;
    // The width is the structured flag's doing, not the checkpoint's: that flag is the one to change.
    ALPS_USAGE_CHECK(consumer == consumer_inputs_.end() || !j.pattern->is_n_m() || in % j.pattern->m() == 0,
                     j.pattern->str(), " needs an input width that is a multiple of ", j.pattern->m(), "; ",
                     consumer->second.flag, " leaves ", in, " of ", w.size(1),
                     ": give a fraction that keeps a multiple of it");
    j.pattern->check_shape(w.size(0), in);
    j.method = plan.method;
    j.solver = &method(plan.method, plan.options);
    j.refine = prune::parse_refine(plan.refine);
  } catch (const UsageError& e) {
    ALPS_USAGE_FAIL(j.name, ": ", e.what());
  } catch (const Error& e) {
    ALPS_FAIL(j.name, ": ", e.what());
  }
  return j;
}

// Methods are built once per (name, options): ALPS and DSnoT carry configuration only, no per-layer state.
const prune::Method& RunPlan::method(const std::string& name, const json& options) {
  const std::string key = name + options.dump();
  auto it = methods_.find(key);
  if (it == methods_.end()) it = methods_.emplace(key, prune::make_method(name, options)).first;
  return *it->second;
}

std::string expert_score_name(ExpertScore s) { return s == ExpertScore::frequency ? "frequency" : "reap"; }

Recipe resolved_recipe(const Recipe& r, const RunPlan& plan) {
  Recipe out = r;
  out.seqlen = plan.seqlen;
  out.eval_seqlen = plan.eval_seqlen;
  out.dtype = dtype_name(plan.dtype);
  out.solve_streams = plan.solve_streams;
  return out;
}

// The user meant to keep something dense or to treat it differently, and the run would silently do neither.
void warn_unmatched_globs(const model::CausalLM& m, const Recipe& r) {
  std::vector<std::string> names = linear_layer_names(m);
  for (const std::string& router : router_names(m)) names.push_back(router);  // a rule may name them too
  auto unmatched = [&names](const std::string& glob) {
    return std::none_of(names.begin(), names.end(), [&glob](const std::string& n) { return glob_match(glob, n); });
  };
  for (const auto& g : r.skip)
    if (unmatched(g))
      spdlog::warn("skip glob '{}' matches no linear layer of this model (they are named like '{}'): nothing is left "
                   "dense because of it", g, names.front());
  for (const auto& rule : r.overrides)
    if (unmatched(rule.match))
      spdlog::warn("override match '{}' matches no linear layer of this model (they are named like '{}'): it changes "
                   "nothing", rule.match, names.front());
}

}  // namespace alps::pipeline
