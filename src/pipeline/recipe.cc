#include "alps/pipeline/recipe.h"

#include <fnmatch.h>

#include <algorithm>
#include <type_traits>

#include "alps/core/device.h"
#include "alps/core/error.h"
#include "alps/core/suggest.h"
#include "alps/io/json_fields.h"
#include "alps/io/text_files.h"
#include "alps/prune/method.h"
#include "alps/prune/pattern.h"
#include "alps/prune/refit.h"
#include "alps/prune/structured.h"

namespace alps::pipeline {

namespace {

using json = nlohmann::json;

// "sparsity": 0.7 and "pattern": "2:4" are both accepted (and "pattern": "0.7", as older recipes write it).
std::optional<prune::Pattern> pattern_of(io::JsonFields& f, const std::string& where) {
  const json* sparsity = f.get("sparsity");
  const json* pattern = f.get("pattern");
  ALPS_CHECK(!(sparsity && pattern), where, ": give either \"sparsity\" or \"pattern\", not both");
  std::string text;
  if (sparsity) {
    ALPS_CHECK(sparsity->is_number(), where, ": \"sparsity\" must be a number, got ", sparsity->dump());
    text = sparsity->dump();
  } else if (pattern) {
    ALPS_CHECK(pattern->is_string(), where, ": \"pattern\" must be a string like \"2:4\"");
    text = pattern->get<std::string>();
  } else {
    return std::nullopt;
  }
  try {
    return prune::Pattern::parse(text);
  } catch (const Error& e) {
    ALPS_USAGE_FAIL(where, ": \"", sparsity ? "sparsity" : "pattern", "\": ", e.what());
  }
}

// Method constants are the named method's: naming another drops them.
void switch_method(std::string& method, json& options, const std::string& to) {
  if (to == method) return;
  method = to;
  options = json::object();  // another method's constants would be unknown keys
}

// A string knob of a layer rule that names one of `choices` (a method, a refine step).
void check_choice(const std::optional<std::string>& value, const std::vector<std::string>& choices,
                  const std::string& where, const char* key) {
  ALPS_USAGE_CHECK(!value || std::find(choices.begin(), choices.end(), *value) != choices.end(), where, ": \"", key,
                   "\" must be one of ", join_names(choices), ", got '", value.value_or(""), "'",
                   did_you_mean(value.value_or(""), choices));
}

// The method options stay JSON here; the method checks them when it is built.
json options_of(io::JsonFields& f, const std::string& where) {
  const json* options = f.get("options");
  if (options == nullptr) return json::object();
  ALPS_CHECK(options->is_object(), where, ": \"options\" must be an object");
  return *options;
}

// --dtype takes "auto" besides the dtype names (RunPlan resolves it).
std::string compute_dtype_problem(std::string_view name) { return dtype_name_problem(name, "auto"); }

// A knob's field in `r` (a Recipe or a const Recipe), whatever its type.
template <typename R, typename Fn>
void visit_field(const RecipeKnob& k, R& r, Fn&& fn) {
  std::visit([&](auto field) { fn(r.*field); }, k.field);
}

}  // namespace

const std::vector<RecipeKnob>& recipe_knobs() {
  static const std::vector<RecipeKnob> knobs = [] {
    using K = RecipeKnob;
    std::vector<K> k;
    k.push_back({"method", false, "--method", "Pruning method (`alps methods` lists them with their options)",
                 &Recipe::method, prune::method_names()});
    k.push_back({"refine", false, "--refine",
                 "Refit after the method: none, pcg or exact (ALPS ends with its own PCG refit; this adds another)",
                 &Recipe::refine, prune::refine_names()});
    k.push_back({"refine_iterations", false, "--refine-iterations", "PCG iterations of --refine pcg",
                 &Recipe::refine_iterations, {}, 0});
    k.push_back({"source", true, "--calib", "Calibration text: c4 (data dir) or a .txt / .jsonl[.gz] file",
                 &Recipe::calib});
    k.push_back({"nsamples", true, "--nsamples", "Calibration windows", &Recipe::nsamples, {}, 1});
    k.push_back({"seqlen", true, "--seqlen", "Tokens per calibration window (0: min(2048, the model's positions))",
                 &Recipe::seqlen, {}, 2, true});
    k.push_back({"seed", true, "--seed", "Calibration sampling seed", &Recipe::seed});
    k.push_back({"experts", true, "--moe-calibration",
                 "Mixtures of experts: each expert's statistics from the tokens routed to it (routed) or from every "
                 "token, the block's output still routed (all)",
                 &Recipe::moe_calibration, {"routed", "all"}});
    k.push_back({"remove_experts", false, "--remove-experts",
                 "Mixtures of experts: the fraction of every mixture layer's experts removed (the same count in each), "
                 "first of the structured steps (see --expert-score)",
                 &Recipe::remove_experts});
    k.push_back({"expert_score",
                 false,
                 "--expert-score",
                 "What --remove-experts keeps: reap (the experts whose routed outputs, weighted by their routing "
                 "probabilities, are largest on average) or frequency (the most often routed)",
                 &Recipe::expert_score,
                 {"reap", "frequency"}});
    k.push_back({"remove_neurons", false, "--remove-neurons",
                 "Structured: the fraction of every block's MLP neurons removed (the same count in each block), before "
                 "any --sparsity or --pattern of what stays",
                 &Recipe::remove_neurons});
    k.push_back(
        {"neuron_multiple",
         false,
         "--neuron-multiple",
         "Structured: every count of MLP neurons --remove-neurons keeps (each expert's too) is a multiple of N, "
         "the nearest to the fraction asked: the products of a smaller model run fastest on round widths",
         &Recipe::neuron_multiple,
         {},
         1});
    k.push_back({"remove_heads", false, "--remove-heads",
                 "Structured: the fraction of every block's query heads removed (see --head-rule)",
                 &Recipe::remove_heads});
    k.push_back({"remove_heads_per_group",
                 false,
                 "--remove-heads-per-group",
                 "Structured: the query heads removed from each key/value group of every block, as a count (the "
                 "count form of --remove-heads, within-groups)",
                 &Recipe::remove_heads_per_group,
                 {},
                 0});
    k.push_back({"head_rule",
                 false,
                 "--head-rule",
                 "How --remove-heads removes: within-groups (the same count of query heads from each key/value group) "
                 "or whole-groups (key/value groups with their query heads)",
                 &Recipe::head_rule,
                 {"within-groups", "whole-groups"}});
    k.push_back({"structured_method", false, "--structured-method",
                 "Structured: how the kept neurons and heads are chosen (`alps methods` lists them)",
                 &Recipe::structured_method, prune::unit_method_names()});
    k.push_back({"device", false, "--device", "Compute device: auto, cpu or cuda[:index]", &Recipe::device, {},
                 std::nullopt, false, device_name_problem});
    k.push_back({"dtype", false, "--dtype",
                 "Compute dtype of the forward passes: auto (a GPU: the checkpoint's fp16/bf16, as the model computes; "
                 "else fp32), fp32 (fp64 for checks), or fp16/bf16 on CUDA", &Recipe::dtype, {}, std::nullopt, false,
                 compute_dtype_problem});
    k.push_back({"batch_size", false, "--batch-size", "Calibration windows per forward call", &Recipe::batch_size,
                 {}, 1});
    k.push_back({"solve_streams", false, "--solve-streams",
                 "Linears of a block solved at once on a GPU, each on a CUDA stream of its own (0: 2 on a GPU; the "
                 "CPU solves one at a time): more fills the GPU, fewer holds less memory",
                 &Recipe::solve_streams, {}, 1, true});
    k.push_back({"sparsity_profile", false, "--sparsity-profile",
                 "How --sparsity or --pattern is spread over the blocks: uniform, or owl (OWL: blocks with more outlier "
                 "Wanda scores on the dense model keep more weights; the model keeps --sparsity exactly, or with N:M "
                 "OWL's mixed variant: each block keeps N plus or minus a few of every M)",
                 &Recipe::sparsity_profile, {"uniform", "owl"}});
    k.push_back({"owl_m", false, "--owl-m", "OWL's outlier threshold M: a score above M times its block's mean",
                 &Recipe::owl_m});
    k.push_back({"owl_lambda", false, "--owl-lambda",
                 "OWL's lambda: the block sparsities span --sparsity +- lambda; with --pattern N:M, the blocks' kept "
                 "counts span lambda entries of a group around N (OWL runs 2)", &Recipe::owl_lambda});
    k.push_back({"stats_dtype", false, "--stats-dtype", "Accumulation dtype of the Gram matrices: fp32 or fp64",
                 &Recipe::stats_dtype, {"fp32", "fp64"}});
    k.push_back({"stats_device", false, "--stats-device",
                 "Where the Gram matrices accumulate: compute (the --device) or cpu (saves GPU memory; every linear "
                 "input then crosses to the host)",
                 &Recipe::stats_device, {"compute", "cpu"}});
    k.push_back({"eval_seqlen", false, "--eval-seqlen", "Window of --eval (0: min(2048, max positions))",
                 &Recipe::eval_seqlen, {}, 2, true});
    k.push_back({"eval_max_windows", false, "--eval-max-windows",
                 "Perplexity of --eval over at most N windows per dataset (0: all)", &Recipe::eval_max_windows, {}, 0});
    k.push_back({"eval_limit", false, "--eval-limit", "Zero-shot tasks of --eval over their first N documents (0: all)",
                 &Recipe::eval_limit, {}, 0});
    k.push_back({"dist_backend", false, "--dist-backend", "Distributed runs: gloo (CPU processes), nccl (GPUs) or auto",
                 &Recipe::dist_backend, {"auto", "gloo", "nccl"}});
    k.push_back({"dist_split", false, "--dist-split",
                 "Distributed runs: solve a linear's rows on several GPU ranks where the cost model says the block "
                 "ends sooner (auto), never (off), or for every linear whose method can, over every rank, CPUs "
                 "included (all)",
                 &Recipe::dist_split, {"auto", "off", "all"}});
    k.push_back({"dist_timeout", false, "--dist-timeout",
                 "Distributed runs: seconds a rank waits for the others before it stops with an error",
                 &Recipe::dist_timeout, {}, 1});
    for (const char* key : {"remove_experts", "remove_neurons", "remove_heads"})
      std::find_if(k.begin(), k.end(), [key](const K& x) { return x.key == key; })->fraction = true;
    for (const char* key : {"device", "batch_size", "solve_streams", "stats_device", "eval_seqlen", "eval_max_windows",
                            "eval_limit", "dist_backend", "dist_split", "dist_timeout"})
      std::find_if(k.begin(), k.end(), [key](const K& x) { return x.key == key; })->affects_result = false;
    return k;
  }();
  return knobs;
}

void check_recipe(const Recipe& r, const std::string& origin) {
  for (const RecipeKnob& k : recipe_knobs())
    visit_field(k, r, [&](const auto& value) {
      using T = std::decay_t<decltype(value)>;
      if constexpr (std::is_same_v<T, std::string>) {
        if (k.problem != nullptr && !k.problem(value).empty())
          ALPS_USAGE_FAIL(origin, ": \"", k.path(), "\": ", k.problem(value));
        if (k.choices.empty()) return;
        ALPS_USAGE_CHECK(std::find(k.choices.begin(), k.choices.end(), value) != k.choices.end(), origin, ": \"",
                         k.path(), "\" must be one of ", join_names(k.choices), ", got '", value, "'",
                         did_you_mean(value, k.choices));
      } else if constexpr (std::is_floating_point_v<T>) {
        ALPS_USAGE_CHECK(!k.fraction || (value >= 0 && value < 1), origin, ": \"", k.path(),
                         "\" must be a fraction in [0, 1), got ", value);
      } else if constexpr (std::is_signed_v<T>) {
        if (!k.min || value >= *k.min || (k.zero_means_default && value == 0)) return;
        ALPS_USAGE_FAIL(origin, ": \"", k.path(), "\" must be ", k.zero_means_default ? "0 (the default) or " : "",
                        "at least ", *k.min, ", got ", value);
      }
    });
}

bool glob_match(const std::string& pattern, const std::string& name) {
  return ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

namespace {

Recipe read_recipe_fields(const json& j, const std::string& origin) {
  io::JsonFields f(j, origin);
  Recipe r;
  f.get("description");
  // ALPS has an option of this name (its own refit); the recipe's knob is the separate --refine step's.
  ALPS_CHECK(f.get("pcg_iterations") == nullptr, origin, ": key \"pcg_iterations\" is now \"refine_iterations\" "
             "(iterations of refine: pcg); ALPS's own refit is the method option \"pcg_iterations\" under \"options\"");
  static const json kAbsent;  // reads as an empty object
  const json* c = f.get("calibration");
  io::JsonFields cf(c != nullptr ? *c : kAbsent, origin + " calibration");
  for (const RecipeKnob& k : recipe_knobs())
    visit_field(k, r, [&](auto& field) { (k.calibration ? cf : f).read(k.key, field); });
  cf.finish();
  if (auto p = pattern_of(f, origin)) r.pattern = *p;
  r.options = options_of(f, origin);
  if (const json* o = f.get("structured_options")) {
    ALPS_CHECK(o->is_object(), origin, ": \"structured_options\" must be an object");
    r.structured_options = *o;
  }
  f.read("skip", r.skip);
  if (const json* overrides = f.get("overrides")) {
    ALPS_CHECK(overrides->is_array(), origin, ": \"overrides\" must be an array");
    for (size_t i = 0; i < overrides->size(); ++i) {
      const std::string where = origin + " overrides[" + std::to_string(i) + "]";
      io::JsonFields of((*overrides)[i], where);
      LayerRule rule;
      ALPS_CHECK(of.read("match", rule.match), where, ": needs a string \"match\" glob");
      bool skip = false;
      if (of.read("skip", skip)) rule.skip = skip;
      std::string text;
      if (of.read("method", text)) rule.method = text;
      rule.pattern = pattern_of(of, where);
      if (of.read("refine", text)) rule.refine = text;
      check_choice(rule.method, prune::method_names(), where, "method");
      check_choice(rule.refine, prune::refine_names(), where, "refine");
      rule.options = options_of(of, where);
      of.finish();
      r.overrides.push_back(std::move(rule));
    }
  }
  f.read("eval", r.eval);
  f.finish();
  check_recipe(r, origin);
  return r;
}

}  // namespace

Recipe recipe_from_json(const json& j, const std::string& origin) {
  // A recipe stands for command-line flags: whatever in it no run can accept (an unknown key, a value of the wrong
  // type or out of range) is a usage error, as the same flag would be.
  try {
    return read_recipe_fields(j, origin);
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what(), e.where());
  }
}

Recipe load_recipe(const std::filesystem::path& path) {
  return recipe_from_json(io::read_json_file(path, io::JsonDialect::kRecipe), "recipe " + path.string());
}

json recipe_to_json(const Recipe& r) {
  json overrides = json::array();
  for (const auto& o : r.overrides) {
    json x = {{"match", o.match}};
    if (o.skip) x["skip"] = *o.skip;
    if (o.method) x["method"] = *o.method;
    if (o.pattern) x["pattern"] = o.pattern->str();
    if (o.refine) x["refine"] = *o.refine;
    if (!o.options.empty()) x["options"] = o.options;
    overrides.push_back(x);
  }
  json out = {{"options", r.options},          {"skip", r.skip},
              {"overrides", overrides},        {"eval", r.eval},
              {"calibration", json::object()}, {"structured_options", r.structured_options}};
  // As prune::Pattern writes it, so that 0.50 and 0.5 are one recipe (a resumed run compares them); none given yet:
  // reading it back gives none.
  if (r.pattern) out["pattern"] = r.pattern->str();
  for (const RecipeKnob& k : recipe_knobs())
    visit_field(k, r, [&](const auto& value) { (k.calibration ? out["calibration"] : out)[k.key] = value; });
  return out;
}

void set_method(Recipe& r, const std::string& method) {
  if (method == r.method) return;
  for (LayerRule& rule : r.overrides)
    if (!rule.method) rule.options = json::object();
  switch_method(r.method, r.options, method);
}

LayerPlan plan_for(const Recipe& r, const std::string& linear_name) {
  LayerPlan plan{false, r.method, r.pattern, false, r.refine, r.options};
  for (const auto& g : r.skip)
    if (glob_match(g, linear_name)) plan.skip = true;
  for (const auto& o : r.overrides) {
    if (!glob_match(o.match, linear_name)) continue;
    if (o.skip) plan.skip = *o.skip;
    if (o.method) switch_method(plan.method, plan.options, *o.method);
    if (o.pattern) {
      plan.pattern = *o.pattern;
      plan.pattern_overridden = true;
    }
    if (o.refine) plan.refine = *o.refine;
    plan.options.update(o.options);
  }
  return plan;
}

}  // namespace alps::pipeline
