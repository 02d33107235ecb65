#include "alps/pipeline/recipe.h"
#include "alps/report/report.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "alps/core/error.h"
#include "alps/prune/method.h"
#include "support.h"

namespace alps::pipeline {
namespace {

using nlohmann::json;

// The error reading `text` as "recipe x.json" gives; usage errors (exit 2) as they are, others marked.
std::string load_error(const char* text) {
  try {
    recipe_from_json(json::parse(text), "recipe x.json");
  } catch (const UsageError& e) {
    return e.what();
  } catch (const Error& e) {
    return std::string("not a usage error: ") + e.what();
  }
  return "no error";
}

std::string text(const std::optional<prune::Pattern>& p) { return p ? p->str() : "none"; }

TEST(Recipe, ParsesEveryKnobAndRoundTrips) {
  const json j = json::parse(R"({
    "method": "sparsegpt", "sparsity": 0.6, "refine": "pcg", "refine_iterations": 20,
    "options": {"blocksize": 64},
    "calibration": {"source": "file.txt", "nsamples": 16, "seqlen": 256, "seed": 3},
    "skip": ["*.lm_head"], "overrides": [{"match": "*.mlp.*", "pattern": "2:4"}],
    "device": "cpu", "dtype": "fp32", "batch_size": 4, "stats_dtype": "fp64", "eval": ["wikitext2"]})");
  const Recipe r = recipe_from_json(j, "test");
  EXPECT_EQ(r.method, "sparsegpt");
  EXPECT_EQ(text(r.pattern), "0.6");
  EXPECT_EQ(r.refine_iterations, 20);
  EXPECT_EQ(r.nsamples, 16);
  EXPECT_EQ(r.seed, 3u);
  EXPECT_EQ(r.overrides.size(), 1u);
  const Recipe again = recipe_from_json(recipe_to_json(r), "again");
  EXPECT_EQ(recipe_to_json(again), recipe_to_json(r));
}

TEST(Recipe, RejectsUnknownKeysAndWrongTypesNamingThem) {
  const auto message = load_error;
  EXPECT_NE(message(R"({"sparsty": 0.5})").find("unknown key \"sparsty\""), std::string::npos);
  EXPECT_NE(message(R"({"calibration": {"nsample": 5}})").find("calibration: unknown key \"nsample\""),
            std::string::npos);
  EXPECT_NE(message(R"({"nsamples": 5})").find("unknown key"), std::string::npos);
  EXPECT_NE(message(R"({"batch_size": "big"})").find("key \"batch_size\" must be an integer"), std::string::npos);
  EXPECT_NE(message(R"({"sparsity": 0.5, "pattern": "2:4"})").find("not both"), std::string::npos);
  EXPECT_NE(message(R"({"overrides": [{"sparsity": 0.5}]})").find("overrides[0]: needs a string \"match\""),
            std::string::npos);
  // The old name of refine_iterations, which ALPS's own option shares: a pointed message, not "unknown key".
  EXPECT_NE(message(R"({"pcg_iterations": 5})").find("\"pcg_iterations\" is now \"refine_iterations\""),
            std::string::npos);
  // A recipe stands for flags: what no run accepts is a usage error (exit 2), as the same flag would be.
  for (const char* text : {R"({"sparsty": 0.5})", R"({"batch_size": "big"})", R"({"sparsity": 2})",
                           R"({"overrides": [{"sparsity": 0.5}]})", R"({"skip": "x"})"})
    EXPECT_THROW(recipe_from_json(nlohmann::json::parse(text), "test"), UsageError) << text;
}

// Every knob of the table: written by recipe_to_json under its key (inside "calibration" where it belongs), read
// back into its field, and a value outside its rule refused naming the recipe and the key.
TEST(Recipe, EveryTableKnobRoundTripsAndItsRuleIsEnforced) {
  const json defaults = recipe_to_json(Recipe{});
  for (const RecipeKnob& k : recipe_knobs()) {
    SCOPED_TRACE(k.path());
    const json& where = k.calibration ? defaults.at("calibration") : defaults;
    ASSERT_TRUE(where.contains(k.key));
    EXPECT_EQ(k.flag.substr(0, 2), "--");
    json changed = defaults;
    json& slot = k.calibration ? changed["calibration"][k.key] : changed[k.key];
    // A valid value other than the default.
    if (slot.is_string() && !k.choices.empty()) {
      slot = k.choices.back() == slot.get<std::string>() ? k.choices.front() : k.choices.back();
    } else if (slot.is_string() && k.problem != nullptr) {  // a name another part of alps reads: one it accepts
      for (const char* name : {"cpu", "cuda:1", "bf16", "fp64"})
        if (k.problem(name).empty() && slot != name) slot = name;
      ASSERT_NE(slot, defaults.contains(k.key) ? defaults[k.key] : json()) << "no other valid name known";
    } else if (slot.is_string()) {
      slot = "something-else";
    } else if (k.fraction) {
      slot = 0.25;
    } else
      slot = slot.get<int64_t>() + 3;
    const json back = recipe_to_json(recipe_from_json(changed, "recipe r.json"));
    EXPECT_EQ(k.calibration ? back["calibration"][k.key] : back[k.key], slot);
    // A value outside the rule.
    if (!k.choices.empty() || k.problem != nullptr) {
      slot = "nonsense";
    } else if (k.min) {
      slot = *k.min - 1 == 0 && k.zero_means_default ? *k.min - 2 : *k.min - 1;
    } else if (k.fraction) {
      slot = 1.0;  // a fraction removed leaves something
    } else {
      continue;
    }
    const std::string message = test::error_message([&] { recipe_from_json(changed, "recipe r.json"); });
    const std::string rule = k.problem != nullptr ? "\": unknown" : "\" must be";
    EXPECT_NE(message.find("recipe r.json: \"" + k.path() + rule), std::string::npos) << message;
  }
}

TEST(Recipe, OverridesApplyInOrderAndSkipGlobsMatchFullNames) {
  Recipe r;
  r.method = "alps";
  r.pattern = prune::Pattern::parse("0.7");
  r.options = {{"rho0", 0.2}};
  r.skip = {"*.self_attn.o_proj"};
  r.overrides.push_back(
      {"model.layers.*.mlp.*", std::nullopt, std::nullopt, prune::Pattern::parse("0.5"), std::nullopt, json::object()});
  r.overrides.push_back({"*.down_proj", std::nullopt, std::string("sparsegpt"), std::nullopt, std::string("pcg"),
                         json{{"blocksize", 32}}});
  const LayerPlan q = plan_for(r, "model.layers.0.self_attn.q_proj");
  EXPECT_FALSE(q.skip);
  EXPECT_EQ(text(q.pattern), "0.7");
  EXPECT_EQ(q.options, (json{{"rho0", 0.2}}));
  EXPECT_TRUE(plan_for(r, "model.layers.3.self_attn.o_proj").skip);
  EXPECT_EQ(text(plan_for(r, "model.layers.1.mlp.up_proj").pattern), "0.5");
  const LayerPlan down = plan_for(r, "model.layers.1.mlp.down_proj");
  EXPECT_EQ(down.method, "sparsegpt");
  EXPECT_EQ(text(down.pattern), "0.5");
  EXPECT_EQ(down.refine, "pcg");
  EXPECT_EQ(down.options, (json{{"blocksize", 32}})) << "ALPS constants must not leak into another method";

  // "skip": false in a later rule prunes what an earlier rule or a skip glob left dense (later wins).
  const Recipe u = recipe_from_json(json::parse(R"({"sparsity": 0.5, "skip": ["model.layers.3.*"],
      "overrides": [{"match": "model.layers.3.mlp.*", "skip": false}]})"), "recipe u.json");
  EXPECT_TRUE(plan_for(u, "model.layers.3.self_attn.q_proj").skip);
  EXPECT_FALSE(plan_for(u, "model.layers.3.mlp.up_proj").skip);
  EXPECT_EQ(recipe_to_json(u)["overrides"][0]["skip"], false) << "the report's recipe keeps the rule";
}

// Method constants belong to the method they were given for: naming another method drops them, in the recipe and in
// the rules that keep the recipe's method, not in a rule that names its own.
TEST(Recipe, ANewMethodDropsTheConstantsOfTheOldOne) {
  Recipe r;
  r.options = {{"rho0", 0.2}};
  r.overrides.push_back({"*.q_proj", std::nullopt, std::nullopt, std::nullopt, std::nullopt, json{{"rho0", 0.3}}});
  r.overrides.push_back(
      {"*.k_proj", std::nullopt, std::string("sparsegpt"), std::nullopt, std::nullopt, json{{"blocksize", 32}}});
  set_method(r, "alps");
  EXPECT_EQ(r.options, (json{{"rho0", 0.2}})) << "the same method keeps its constants";
  set_method(r, "wanda");
  EXPECT_EQ(r.method, "wanda");
  EXPECT_TRUE(r.options.empty());
  EXPECT_TRUE(r.overrides[0].options.empty());
  EXPECT_EQ(r.overrides[1].options, (json{{"blocksize", 32}}));
}

// Values no run accepts are usage errors naming the recipe and the key, at load, not against the first layer; the
// pattern is kept as prune::Pattern writes it, so that "0.50" and 0.5 are one recipe.
TEST(Recipe, PatternsMethodsAndRefinesAreCheckedAtLoad) {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {R"({"sparsity": 1.0})", "recipe x.json: \"sparsity\": sparsity must be in [0, 1)"},
      {R"({"pattern": "0:4"})", "recipe x.json: \"pattern\": N:M pattern needs 1 <= N <= M"},
      {R"({"sparsity": 0.5, "overrides": [{"match": "*", "method": "bogus"}]})",
       "recipe x.json overrides[0]: \"method\" must be one of"},
      {R"({"sparsity": 0.5, "overrides": [{"match": "*", "refine": "cg"}]})",
       "recipe x.json overrides[0]: \"refine\" must be one of"},
      {R"({"method": "bogus", "sparsity": 0.5})", "recipe x.json: \"method\" must be one of"},
      // Device and dtype names as the flags check them, whether or not this machine has the device.
      {R"({"sparsity": 0.5, "device": "gpu"})", "recipe x.json: \"device\": unknown device 'gpu'"},
      {R"({"sparsity": 0.5, "dtype": "fp8"})", "recipe x.json: \"dtype\": unknown dtype 'fp8'"},
  };
  for (const auto& [text, expected] : cases) {
    const std::string m = load_error(text);
    EXPECT_EQ(m.rfind(expected, 0), 0u) << m;  // a usage error, from its first word
  }
  EXPECT_EQ(recipe_from_json(json::parse(R"({"sparsity": 0.5, "device": "cuda:3", "dtype": "bf16"})"), "r").device,
            "cuda:3");
  EXPECT_EQ(text(recipe_from_json(json::parse(R"({"pattern": "0.50"})"), "r").pattern), "0.5");
  EXPECT_EQ(text(recipe_from_json(json::parse(R"({"sparsity": 0.7})"), "r").pattern), "0.7");
  EXPECT_EQ(text(recipe_from_json(json::parse(R"({"pattern": "2:4"})"), "r").pattern), "2:4");
}

// A key written twice is an edit that silently undoes another: refused naming the file and the key, at any depth;
// the same key in different objects is fine, and comments stay allowed.
TEST(Recipe, RepeatedKeysAreRefused) {
  test::TempDir tmp;
  const auto write_and_load = [&](const char* text) {
    std::ofstream(tmp / "r.json") << text;
    return test::error_message([&] { load_recipe(tmp / "r.json"); });
  };
  const std::string file = (tmp / "r.json").string();
  EXPECT_EQ(write_and_load(R"({"sparsity": 0.5, // the first
                               "method": "alps", "sparsity": 0.7})"),
            file + ": key 'sparsity' appears twice in one object (the second would silently replace the first); "
                   "keep one");
  EXPECT_NE(write_and_load(R"({"sparsity": 0.5, "calibration": {"nsamples": 4, "seed": 1, "nsamples": 8}})")
                .find(file + ": key 'nsamples' appears twice"),
            std::string::npos);
  EXPECT_EQ(write_and_load(R"({"sparsity": 0.5, /* block comment */
                               "overrides": [{"match": "*.q_proj", "sparsity": 0.6},
                                             {"match": "*.k_proj", "sparsity": 0.6}]})"),
            "no error");
}

TEST(Recipe, ShippedConfigsParse) {
  int n = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::source_dir() / "configs")) {
    if (e.path().extension() != ".json") continue;
    SCOPED_TRACE(e.path().string());
    const Recipe r = load_recipe(e.path());
    EXPECT_TRUE(r.pattern.has_value() || r.removes_units());
    // The defaults of method constants live in their option tables (`alps methods`): a recipe that restates one
    // would go on stating it after the table changed.
    for (const auto& entry : prune::method_catalog()) {
      if (entry["name"] != r.method) continue;
      for (const auto& option : entry["options"])
        EXPECT_FALSE(r.options.contains(option["name"]) && r.options[option["name"].get<std::string>()] ==
                                                               option["default"])
            << option["name"] << " restates its default";
    }
    ++n;
  }
  EXPECT_GE(n, 4);
}

// The summary's first line says what the layers were pruned with: the recipe's method and pattern, or, where
// overrides gave others, each one and how many layers it pruned.
TEST(Recipe, SummaryNamesWhatTheLayersWerePrunedWith) {
  report::RunReport r;
  r.recipe = {{"method", "wanda"}, {"pattern", "0.5"}};
  r.blocks_done = r.blocks_total = 1;
  auto layer = [](const std::string& name, const std::string& method, const std::string& pattern) {
    report::LayerReport l;
    l.name = "model.layers.0." + name;
    l.shape = {4, 4};
    l.method = method;
    l.pattern = pattern;
    l.sparsity = 0.5;
    return l;
  };
  r.layers = {layer("self_attn.q_proj", "wanda", "0.5"), layer("mlp.up_proj", "wanda", "0.5")};
  EXPECT_EQ(report::summary_text(r).rfind("wanda 0.5: 2 linear layers pruned", 0), 0u) << report::summary_text(r);
  r.layers.push_back(layer("mlp.down_proj", "sparsegpt", "2:4"));
  EXPECT_EQ(report::summary_text(r).rfind("sparsegpt 2:4 (1 layer), wanda 0.5 (2 layers): 3 linear layers pruned", 0),
            0u)
      << report::summary_text(r);
}

// A mixture's experts are one layer kind per projection, and the summary says how many tokens they saw.
TEST(Recipe, SummaryCountsTheExpertsTokens) {
  report::RunReport r;
  r.recipe = {{"method", "alps"}, {"pattern", "0.5"}};
  r.blocks_done = r.blocks_total = 1;
  for (int e = 0; e < 3; ++e)
    for (const char* proj : {"gate_proj", "up_proj", "down_proj"}) {
      report::LayerReport l;
      l.name = "model.layers.0.mlp.experts." + std::to_string(e) + "." + proj;
      l.shape = {4, 4};
      l.method = e == 1 ? "magnitude" : "alps";
      l.pattern = "0.5";
      l.sparsity = 0.5;
      l.stats["tokens"] = std::vector<int>{12, 0, 40}[static_cast<size_t>(e)];
      r.layers.push_back(l);
    }
  r.output = "/data/pruned";
  // The phases in run order, a distributed run's among them.
  r.phase_seconds = {{"save", 1}, {"broadcast_weights", 2}, {"solve", 3}, {"reduce_statistics", 4}, {"statistics", 5}};
  const std::string s = report::summary_text(r);
  EXPECT_LT(s.find("\nstatistics "), s.find("\nreduce_statistics ")) << s;
  EXPECT_LT(s.find("\nreduce_statistics "), s.find("\nsolve ")) << s;
  EXPECT_LT(s.find("\nsolve "), s.find("\nbroadcast_weights ")) << s;
  EXPECT_LT(s.find("\nbroadcast_weights "), s.find("\nsave ")) << s;
  EXPECT_NE(s.find("\npruned checkpoint and report: /data/pruned\n"), std::string::npos) << s;
  EXPECT_NE(s.find("mlp.experts.*.gate_proj"), std::string::npos) << s;
  EXPECT_EQ(s.find("mlp.experts.1."), std::string::npos) << s;
  EXPECT_NE(s.find("experts: 3 saw 0 / 12 / 40 calibration tokens (min / median / max); 1 saw none and were pruned "
                   "by magnitude"),
            std::string::npos)
      << s;
}

}  // namespace
}  // namespace alps::pipeline
