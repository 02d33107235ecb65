#include "alps/pipeline/recipe.h"

#include <fnmatch.h>


#include "alps/core/error.h"
#include "alps/io/json_fields.h"
#include "alps/io/text_files.h"

namespace alps::pipeline {

namespace {

using json = nlohmann::json;

// "sparsity": 0.7 and "pattern": "2:4" are both accepted; the pattern is kept as text and parsed by prune::Pattern.
std::optional<std::string> pattern_of(io::JsonFields& f, const std::string& where) {
  const json* sparsity = f.get("sparsity");
  const json* pattern = f.get("pattern");
  ALPS_CHECK(!(sparsity && pattern), where, ": give either \"sparsity\" or \"pattern\", not both");
  if (sparsity) {
    ALPS_CHECK(sparsity->is_number(), where, ": \"sparsity\" must be a number, got ", sparsity->dump());
    return sparsity->dump();
  }
  if (pattern) {
    ALPS_CHECK(pattern->is_string(), where, ": \"pattern\" must be a string like \"2:4\"");
    return pattern->get<std::string>();
  }
  return std::nullopt;
}

// The method options stay JSON here; the method checks them when it is built.
json options_of(io::JsonFields& f, const std::string& where) {
  const json* options = f.get("options");
  if (options == nullptr) return json::object();
  ALPS_CHECK(options->is_object(), where, ": \"options\" must be an object");
  return *options;
}

}  // namespace

bool glob_match(const std::string& pattern, const std::string& name) {
  return ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

Recipe recipe_from_json(const json& j, const std::string& origin) {
  io::JsonFields f(j, origin);
  Recipe r;
  f.get("description");
  f.read("method", r.method);
  if (auto p = pattern_of(f, origin)) r.pattern = *p;
  f.read("refine", r.refine);
  // ALPS has an option of this name (its own refit); the recipe's knob is the separate --refine step's.
  ALPS_CHECK(f.get("pcg_iterations") == nullptr, origin, ": key \"pcg_iterations\" is now \"refine_iterations\" "
             "(iterations of refine: pcg); ALPS's own refit is the method option \"pcg_iterations\" under \"options\"");
  f.read("refine_iterations", r.refine_iterations);
  r.options = options_of(f, origin);
  if (const json* c = f.get("calibration")) {
    io::JsonFields cf(*c, origin + " calibration");
    cf.read("source", r.calib);
    cf.read("nsamples", r.nsamples);
    cf.read("seqlen", r.seqlen);
    cf.read("seed", r.seed);
    cf.finish();
  }
  f.read("skip", r.skip);
  if (const json* overrides = f.get("overrides")) {
    ALPS_CHECK(overrides->is_array(), origin, ": \"overrides\" must be an array");
    for (size_t i = 0; i < overrides->size(); ++i) {
      const std::string where = origin + " overrides[" + std::to_string(i) + "]";
      io::JsonFields of((*overrides)[i], where);
      LayerRule rule;
      ALPS_CHECK(of.read("match", rule.match), where, ": needs a string \"match\" glob");
      of.read("skip", rule.skip);
      std::string text;
      if (of.read("method", text)) rule.method = text;
      rule.pattern = pattern_of(of, where);
      if (of.read("refine", text)) rule.refine = text;
      rule.options = options_of(of, where);
      of.finish();
      r.overrides.push_back(std::move(rule));
    }
  }
  f.read("device", r.device);
  f.read("dtype", r.dtype);
  f.read("batch_size", r.batch_size);
  f.read("stats_dtype", r.stats_dtype);
  f.read("stats_device", r.stats_device);
  f.read("eval", r.eval);
  f.read("eval_seqlen", r.eval_seqlen);
  f.read("eval_max_windows", r.eval_max_windows);
  f.read("eval_limit", r.eval_limit);
  f.finish();
  return r;
}

Recipe load_recipe(const std::filesystem::path& path) {
  return recipe_from_json(io::read_json_file(path, /*allow_comments=*/true), "recipe " + path.string());
}

json recipe_to_json(const Recipe& r) {
  json overrides = json::array();
  for (const auto& o : r.overrides) {
    json x = {{"match", o.match}};
    if (o.skip) x["skip"] = true;
    if (o.method) x["method"] = *o.method;
    if (o.pattern) x["pattern"] = *o.pattern;
    if (o.refine) x["refine"] = *o.refine;
    if (!o.options.empty()) x["options"] = o.options;
    overrides.push_back(x);
  }
  return {{"method", r.method},
          {"pattern", r.pattern},
          {"refine", r.refine},
          {"refine_iterations", r.refine_iterations},
          {"options", r.options},
          {"calibration", {{"source", r.calib}, {"nsamples", r.nsamples}, {"seqlen", r.seqlen}, {"seed", r.seed}}},
          {"skip", r.skip},
          {"overrides", overrides},
          {"device", r.device},
          {"dtype", r.dtype},
          {"batch_size", r.batch_size},
          {"stats_dtype", r.stats_dtype},
          {"stats_device", r.stats_device},
          {"eval", r.eval},
          {"eval_seqlen", r.eval_seqlen},
          {"eval_max_windows", r.eval_max_windows},
          {"eval_limit", r.eval_limit}};
}

LayerPlan plan_for(const Recipe& r, const std::string& linear_name) {
  LayerPlan plan{false, r.method, r.pattern, r.refine, r.options};
  for (const auto& g : r.skip)
    if (glob_match(g, linear_name)) plan.skip = true;
  for (const auto& o : r.overrides) {
    if (!glob_match(o.match, linear_name)) continue;
    if (o.skip) plan.skip = true;
    if (o.method && *o.method != plan.method) {
      plan.method = *o.method;
      plan.options = json::object();  // another method's constants would be unknown keys
    }
    if (o.pattern) plan.pattern = *o.pattern;
    if (o.refine) plan.refine = *o.refine;
    plan.options.update(o.options);
  }
  return plan;
}

}  // namespace alps::pipeline
