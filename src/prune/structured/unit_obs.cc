// Structured Optimal Brain Surgeon (docs/structured.md), the greedy baseline in the style of ZipLM: remove the unit
// whose removal raises the layer's error least, update the kept columns by the closed form, repeat.
#include <ATen/ATen.h>

#include "alps/io/option_table.h"
#include "prune/structured/elimination.h"
#include "prune/structured/methods.h"

namespace alps::prune {

namespace {

struct ObsOptions {
  double damp = 0.01;
};

const io::OptionTable<ObsOptions>& obs_options() {
  using O = ObsOptions;
  static const auto table =
      io::OptionTable<O>().add("damp", &O::damp, "lambda = damp * mean(diag G), added to G's diagonal");
  return table;
}

class UnitObs final : public UnitMethod {
 public:
  explicit UnitObs(ObsOptions o) : o_(o) { ALPS_CHECK(o_.damp >= 0, "obs: damp must be >= 0, got ", o_.damp); }
  std::string_view name() const override { return "obs"; }

  UnitSolution solve(const UnitProblem& p) const override {
    check_unit_problem(p, "obs");
    detail::KeptSet set(p, o_.damp);
    UnitSolution s;
    s.stats["removals"] = detail::eliminate(set, p.parts, p.keep, /*stage=*/1);
    s.kept = set.kept_units();
    s.W = set.kept_weights();
    return s;
  }

 private:
  ObsOptions o_;
};

}  // namespace

nlohmann::json unit_obs_option_list() { return obs_options().describe(); }

std::unique_ptr<UnitMethod> make_unit_obs(const nlohmann::json& options) {
  return std::make_unique<UnitObs>(obs_options().read(options, "structured method 'obs' options"));
}

}  // namespace alps::prune
