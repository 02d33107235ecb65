#pragma once
// What an `alps prune` run will do, checked and typed before any work: the recipe's names and texts resolved once
// (device, dtypes, windows) and every linear's job (method built, pattern checked against its shape). Building the
// plan is the validation: a bad pattern or option stops the run at once instead of hours in.
#include <c10/core/Device.h>
#include <c10/core/ScalarType.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "alps/model/causal_lm.h"
#include "alps/model/config.h"
#include "alps/pipeline/recipe.h"
#include "alps/pipeline/schedule.h"
#include "alps/prune/method.h"
#include "alps/prune/owl.h"
#include "alps/prune/pattern.h"
#include "alps/prune/refit.h"
#include "alps/prune/structured.h"

namespace alps::model {
class CausalLM;
}

namespace alps::pipeline {

/// What happens to one linear.
struct LayerJob {
  std::string weight;  ///< checkpoint tensor name
  std::string name;    ///< without ".weight", what globs match
  bool skip = false;
  std::string method;                     ///< its name, for the report
  const prune::Method* solver = nullptr;  ///< owned by the RunPlan
  std::optional<prune::Pattern> pattern;  ///< set unless skipped
  /// Whether a sparsity profile (--sparsity-profile owl) sets its sparsity: the recipe's own pattern, no override's.
  bool follows_profile = false;
  prune::Refine refine = prune::Refine::kNone;
  /// Whether the solve reads calibration statistics (the method's, or a refit's).
  bool needs_statistics() const { return !skip && (solver->needs_statistics() || refine != prune::Refine::kNone); }
};

/// How many units one kind of rule has and keeps: `units` in `parts` equal parts, each part keeping `keep`, a
/// multiple of `multiple` (why: `multiple_why`).
struct UnitCount {
  int64_t units = 0, parts = 1, keep = 0, multiple = 1;
  std::string multiple_why;
};

/// One structured step of every block (docs/structured.md): a kind of unit, the flag that asked for it, and what
/// each of the block's rules (model::UnitRule: a dense MLP's neurons, each expert's, the heads) has and keeps, by the
/// config.json field that states its count (the experts step: "experts"), the same in every block.
struct UnitStep {
  model::Structure structure = model::Structure::neurons;
  std::string flag;
  std::map<std::string, UnitCount> counts;
};

/// What --remove-experts ranks the experts by (docs/moe.md): REAP's saliency or the routing frequency.
enum class ExpertScore { reap, frequency };
/// "reap", "frequency": --expert-score's names, as the report writes them.
std::string expert_score_name(ExpertScore s);

class RunPlan {
 public:
  /// Checks `r` against the model `m` and builds every linear's job; throws alps::UsageError naming the flag (or the
  /// layer, for what one layer's shape or an override makes wrong) and alps::Error for what the model cannot do.
  RunPlan(const model::CausalLM& m, const Recipe& r);
  RunPlan(const RunPlan&) = delete;
  RunPlan& operator=(const RunPlan&) = delete;

  const std::vector<LayerJob>& block(int64_t b) const { return blocks_.at(static_cast<size_t>(b)); }
  int64_t num_blocks() const { return static_cast<int64_t>(blocks_.size()); }
  /// Block b's linears as its jobs list them, within the block: the model's (CausalLM::linear_names, as its tensors
  /// are now), then its router where prunes_router(b).
  std::vector<std::string> linears(const model::CausalLM& m, int64_t b) const;
  /// Whether block b's router has a job (a recipe rule names it, docs/moe.md): the forwards then show it its input.
  bool prunes_router(int64_t b) const { return router_job_.at(static_cast<size_t>(b)); }

  c10::Device device{c10::kCPU};           ///< --device, resolved
  c10::ScalarType dtype = c10::kFloat;      ///< of the forward passes
  c10::ScalarType stats_dtype = c10::kFloat;
  bool stats_on_host = false;              ///< --stats-device cpu: the Gram matrices accumulate on the host
  model::ExpertInputs expert_inputs = model::ExpertInputs::routed;  ///< --moe-calibration
  c10::Device stats_device{c10::kCPU};     ///< where they accumulate: the host, or the compute device
  int64_t seqlen = 0;                       ///< calibration window, the default resolved
  int64_t eval_seqlen = 0;                  ///< evaluation window, the default resolved
  int64_t solve_streams = 1;                ///< linears of a block solved at once (1 on the CPU)
  /// --dist-split, resolved: auto splits on GPUs only. Its cost model comes from an H100's phases, where a part's
  /// meeting with the others (tens of microseconds) is nothing beside a large linear's iteration; on a CPU the parts
  /// run the unfused iterates and meet through Gloo on the cores that solve: splitting every linear over two
  /// processes took 1.6x as long (docs/distributed.md); all still splits there.
  SplitRule split_rule = SplitRule::kOff;
  /// Whether any job reads calibration statistics: a run of magnitude pruning alone reads no calibration text.
  bool needs_calibration = false;
  /// The routers that recipe rules name (full names, without ".weight"), each a job after its block's other linears;
  /// the resume state records them.
  std::vector<std::string> pruned_routers;
  /// --sparsity-profile owl: its constants (the run measures the dense model's blocks before pruning any).
  std::optional<prune::OwlOptions> owl;
  /// --remove-experts, --remove-heads, then --remove-neurons, as each block takes them before its unstructured solves;
  /// empty: none. An experts step has no consumer linear (its choice reads the experts' outputs).
  std::vector<UnitStep> unit_steps;
  /// --expert-score, when --remove-experts asks for experts to go.
  std::optional<ExpertScore> expert_score;
  /// --structured-method with its constants, built when a neurons or heads step asks for it.
  const prune::UnitMethod* unit_method() const { return unit_method_.get(); }

 private:
  LayerJob make_job(const model::CausalLM& m, const Recipe& r, const std::string& weight, const std::string& linear);
  void plan_unit_steps(const model::CausalLM& m, const Recipe& r);
  void plan_expert_step(const model::CausalLM& m, const Recipe& r);
  void add_router_job(const model::CausalLM& m, const Recipe& r, int64_t b, const std::vector<std::string>& globs,
                      std::vector<LayerJob>& jobs);

  std::unique_ptr<prune::UnitMethod> unit_method_;
  struct ConsumerInput {
    int64_t in;        // the input width a consumer's weight keeps
    const char* flag;  // the structured step that narrows it
  };
  std::map<std::string, ConsumerInput> consumer_inputs_;  // by the consumer's full weight name
  const prune::Method& method(const std::string& name, const nlohmann::json& options);

  std::map<std::string, std::unique_ptr<prune::Method>> methods_;
  std::vector<bool> router_job_;  // by block
  std::vector<std::vector<LayerJob>> blocks_;
};

/// The recipe with what "the default" stood for written in: the windows the plan resolved. Reports and the resume
/// key hold this one, so that a run resumes whether or not its command named the default.
Recipe resolved_recipe(const Recipe& r, const RunPlan& plan);

/// Warns about skip globs and override matches that match no linear of `m` (almost always typos).
void warn_unmatched_globs(const model::CausalLM& m, const Recipe& r);

}  // namespace alps::pipeline
