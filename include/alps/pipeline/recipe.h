#pragma once
// A pruning recipe (configs/*.json): every knob of a run in one JSON document; command-line flags override it.
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "alps/prune/pattern.h"

namespace alps::pipeline {

/// Per-layer override: applies to linears whose full name (e.g. "model.layers.3.mlp.down_proj") matches the
/// shell-style glob `match`; later rules win over earlier ones.
struct LayerRule {
  std::string match;
  std::optional<bool> skip;  ///< true leaves the matched linears dense, false prunes them after all
  std::optional<std::string> method;
  std::optional<prune::Pattern> pattern;
  std::optional<std::string> refine;
  nlohmann::json options = nlohmann::json::object();  ///< merged over the method options
};

struct Recipe {
  std::string method = "alps";
  std::optional<prune::Pattern> pattern;  ///< unstructured sparsity or N:M; required
  std::string refine = "none";
  int64_t refine_iterations = 10;  ///< PCG iterations of refine "pcg" (ALPS's own refit is its option)
  nlohmann::json options = nlohmann::json::object();  ///< method constants (make_method options)
  std::string calib = "c4";
  int64_t nsamples = 128;
  int64_t seqlen = 0;  ///< 0: the model's default window (model::ModelConfig::default_window)
  uint64_t seed = 0;
  /// What a mixture of experts shows each expert's linears for their statistics: "routed" (the tokens the router
  /// sends it) or "all" (every token; the block's output stays the routed one).
  std::string moe_calibration = "routed";
  /// Structured pruning before the rest (docs/structured.md): the fractions of each block's MLP neurons and of its
  /// query heads removed (0: none), or the query heads removed from each key/value group as a count, how heads go
  /// (within-groups: the same count from each key/value group; whole-groups: key/value groups with their query heads),
  /// and the method that chooses them, with its constants.
  double remove_neurons = 0;
  /// Every kept count of MLP neurons (each expert's too) is a multiple of it: kernels run fastest on round widths.
  int64_t neuron_multiple = 1;
  double remove_heads = 0;
  int64_t remove_heads_per_group = 0;
  std::string head_rule = "within-groups";
  std::string structured_method = "osscar";
  nlohmann::json structured_options = nlohmann::json::object();
  /// Mixtures of experts (docs/moe.md): the fraction of each mixture layer's experts removed (0: none), first of the
  /// structured steps, and what ranks them: "reap" (the mean over an expert's routed tokens of its routing probability
  /// times the norm of its output) or "frequency" (how many tokens it was routed).
  double remove_experts = 0;
  std::string expert_score = "reap";
  std::vector<std::string> skip;  ///< globs of linears left dense
  std::vector<LayerRule> overrides;
  std::string device = "auto";
  /// Compute dtype of the forward passes; "auto": the checkpoint's fp16/bf16 on a GPU, else fp32 (RunPlan resolves it).
  std::string dtype = "auto";
  int64_t batch_size = 8;       ///< calibration windows per forward call
  int64_t solve_streams = 0;    ///< linears of a block solved at once on a GPU (0: RunPlan's default)
  std::string stats_dtype = "fp32";      ///< accumulation dtype of G
  std::string stats_device = "compute";  ///< where G accumulates: "compute" (the compute device) or "cpu"
  /// How the target sparsity is spread over the blocks: "uniform" (every block the same) or "owl" (OWL: blocks with
  /// more outlier scores keep more weights, mean unchanged; prune/owl.h)
  std::string sparsity_profile = "uniform";
  double owl_m = 5;         ///< OWL's outlier threshold M
  double owl_lambda = 0.08; ///< OWL's lambda: the block sparsities span 2 lambda
  std::vector<std::string> eval;     ///< datasets evaluated after pruning
  int64_t eval_seqlen = 0;           ///< their window length (0: min(2048, max positions))
  int64_t eval_max_windows = 0;      ///< perplexity over at most this many windows per dataset (0: all)
  int64_t eval_limit = 0;            ///< zero-shot tasks over their first this many documents (0: all)
  /// Distributed runs (docs/distributed.md): the backend ("auto": NCCL for GPUs, Gloo otherwise), whether a linear's
  /// rows are solved on several ranks (schedule.h's SplitRule: auto, off, all), and how long a rank waits for the
  /// others, in seconds.
  std::string dist_backend = "auto";
  std::string dist_split = "auto";
  int64_t dist_timeout = 1800;

  /// Whether a structured step (experts, neurons, heads) makes the model smaller.
  bool removes_units() const {
    return remove_experts > 0 || remove_neurons > 0 || remove_heads > 0 || remove_heads_per_group > 0;
  }
};

/// One scalar knob of a recipe, declared once: its JSON key (inside the "calibration" object when `calibration`),
/// the `alps prune` flag that overrides it, what it means, the Recipe field it sets and the values it takes.
/// Reading, checking and writing recipes, `prune --help` (with the live default) and flag overrides all read
/// recipe_knobs(). The structured knobs (pattern or sparsity, options, skip, overrides, eval) have code of their own.
struct RecipeKnob {
  using Field = std::variant<std::string Recipe::*, int64_t Recipe::*, uint64_t Recipe::*, double Recipe::*>;
  std::string key;
  bool calibration = false;
  std::string flag;  ///< "--nsamples"
  std::string help;
  Field field;
  std::vector<std::string> choices = {};      ///< the values a string knob takes (empty: any)
  std::optional<int64_t> min = std::nullopt;  ///< the smallest value of an integer knob
  bool zero_means_default = false;            ///< 0 is allowed too, meaning "the default"
  /// What is wrong with a string knob's value, "" if nothing (names read elsewhere: devices, dtypes).
  std::string (*problem)(std::string_view) = nullptr;
  /// Whether the pruned weights depend on it. Those that do not (where and in what batches the passes run, which
  /// changes rounding only; the evaluation after pruning) may change when an interrupted run is resumed.
  bool affects_result = true;
  bool fraction = false;  ///< a number knob that takes [0, 1)
  /// "calibration.nsamples" or "batch_size": how errors and documents name it.
  std::string path() const { return calibration ? "calibration." + key : key; }
};
const std::vector<RecipeKnob>& recipe_knobs();

/// Throws, naming `origin` and the knob, if a table knob holds a value outside its rule.
void check_recipe(const Recipe& r, const std::string& origin);

/// Parses and checks a recipe; unknown keys, wrong types and values outside a knob's rule are errors naming
/// `origin` and the key.
Recipe recipe_from_json(const nlohmann::json& j, const std::string& origin);
Recipe load_recipe(const std::filesystem::path& path);
nlohmann::json recipe_to_json(const Recipe& r);

/// Names `method` for the whole recipe. Method constants belong to the method they were given for: a new method drops
/// the recipe's options, and those of rules that keep the recipe's method (plan_for applies the same rule to a rule
/// that names its own method).
void set_method(Recipe& r, const std::string& method);

/// What to do with one linear after applying skip globs and overrides.
struct LayerPlan {
  bool skip = false;
  std::string method;
  std::optional<prune::Pattern> pattern;
  bool pattern_overridden = false;  ///< an override gave the pattern (a sparsity profile leaves it alone)
  std::string refine;
  nlohmann::json options;
};
LayerPlan plan_for(const Recipe& r, const std::string& linear_name);

/// Shell-style glob (fnmatch) used by skip and overrides.
bool glob_match(const std::string& pattern, const std::string& name);

}  // namespace alps::pipeline
