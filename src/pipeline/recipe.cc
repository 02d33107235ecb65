#include "alps/pipeline/recipe.h"

#include <fnmatch.h>

#include <set>

#include "alps/core/error.h"
#include "alps/io/text_files.h"

namespace alps::pipeline {

namespace {

using json = nlohmann::json;

template <typename T>
void read(const json& j, const char* key, T& out, const std::string& origin) {
  if (!j.contains(key)) return;
  try {
    out = j.at(key).get<T>();
  } catch (const json::exception&) {
    ALPS_FAIL(origin, ": \"", key, "\" has the wrong type (", j.at(key).dump(), ")");
  }
}

void check_keys(const json& j, const std::set<std::string>& known, const std::string& origin) {
  ALPS_CHECK(j.is_object(), origin, ": expected a JSON object, got ", j.dump());
  for (const auto& [k, v] : j.items()) {
    if (known.count(k) == 0) {
      std::string list;
      for (const auto& n : known) list += (list.empty() ? "" : ", ") + n;
      ALPS_FAIL(origin, ": unknown key \"", k, "\" (known: ", list, ")");
    }
  }
}

// "sparsity": 0.7 and "pattern": "2:4" are both accepted; the pattern is kept as text and parsed by prune::Pattern.
std::optional<std::string> pattern_of(const json& j, const std::string& origin) {
  ALPS_CHECK(!(j.contains("sparsity") && j.contains("pattern")), origin,
             ": give either \"sparsity\" or \"pattern\", not both");
  if (j.contains("sparsity")) {
    ALPS_CHECK(j["sparsity"].is_number(), origin, ": \"sparsity\" must be a number, got ", j["sparsity"].dump());
    return j["sparsity"].dump();
  }
  if (j.contains("pattern")) {
    ALPS_CHECK(j["pattern"].is_string(), origin, ": \"pattern\" must be a string like \"2:4\"");
    return j["pattern"].get<std::string>();
  }
  return std::nullopt;
}

}  // namespace

bool glob_match(const std::string& pattern, const std::string& name) {
  return ::fnmatch(pattern.c_str(), name.c_str(), 0) == 0;
}

Recipe recipe_from_json(const json& j, const std::string& origin) {
  check_keys(j,
             {"method", "sparsity", "pattern", "refine", "pcg_iterations", "options", "calibration", "skip",
              "overrides", "device", "dtype", "batch_size", "stats_dtype", "eval", "eval_seqlen", "description"},
             origin);
  Recipe r;
  read(j, "method", r.method, origin);
  if (auto p = pattern_of(j, origin)) r.pattern = *p;
  read(j, "refine", r.refine, origin);
  read(j, "pcg_iterations", r.pcg_iterations, origin);
  if (j.contains("options")) {
    ALPS_CHECK(j["options"].is_object(), origin, ": \"options\" must be an object");
    r.options = j["options"];
  }
  if (j.contains("calibration")) {
    const json& c = j["calibration"];
    const std::string where = origin + " calibration";
    check_keys(c, {"source", "nsamples", "seqlen", "seed"}, where);
    read(c, "source", r.calib, where);
    read(c, "nsamples", r.nsamples, where);
    read(c, "seqlen", r.seqlen, where);
    read(c, "seed", r.seed, where);
  }
  read(j, "skip", r.skip, origin);
  if (j.contains("overrides")) {
    ALPS_CHECK(j["overrides"].is_array(), origin, ": \"overrides\" must be an array");
    for (size_t i = 0; i < j["overrides"].size(); ++i) {
      const json& o = j["overrides"][i];
      const std::string where = origin + " overrides[" + std::to_string(i) + "]";
      check_keys(o, {"match", "skip", "method", "sparsity", "pattern", "refine", "options"}, where);
      LayerRule rule;
      ALPS_CHECK(o.contains("match") && o["match"].is_string(), where, ": needs a string \"match\" glob");
      rule.match = o["match"].get<std::string>();
      read(o, "skip", rule.skip, where);
      if (o.contains("method")) rule.method = o["method"].get<std::string>();
      rule.pattern = pattern_of(o, where);
      if (o.contains("refine")) rule.refine = o["refine"].get<std::string>();
      if (o.contains("options")) {
        ALPS_CHECK(o["options"].is_object(), where, ": \"options\" must be an object");
        rule.options = o["options"];
      }
      r.overrides.push_back(std::move(rule));
    }
  }
  read(j, "device", r.device, origin);
  read(j, "dtype", r.dtype, origin);
  read(j, "batch_size", r.batch_size, origin);
  read(j, "stats_dtype", r.stats_dtype, origin);
  read(j, "eval", r.eval, origin);
  read(j, "eval_seqlen", r.eval_seqlen, origin);
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
          {"pcg_iterations", r.pcg_iterations},
          {"options", r.options},
          {"calibration", {{"source", r.calib}, {"nsamples", r.nsamples}, {"seqlen", r.seqlen}, {"seed", r.seed}}},
          {"skip", r.skip},
          {"overrides", overrides},
          {"device", r.device},
          {"dtype", r.dtype},
          {"batch_size", r.batch_size},
          {"stats_dtype", r.stats_dtype},
          {"eval", r.eval},
          {"eval_seqlen", r.eval_seqlen}};
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
