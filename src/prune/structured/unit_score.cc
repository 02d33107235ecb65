// The score baseline of structured pruning (docs/structured.md): a unit's weight norm times its input's norm, as
// structured Wanda and FLAP rank them, with or without the least-squares refit of the kept columns.
#include <ATen/ATen.h>

#include "alps/io/option_table.h"
#include "prune/structured/elimination.h"
#include "prune/structured/methods.h"

namespace alps::prune {

namespace {

struct ScoreOptions {
  bool refit = false;
  double damp = 0.01;
};

const io::OptionTable<ScoreOptions>& score_options() {
  using O = ScoreOptions;
  static const auto table =
      io::OptionTable<O>()
          .add("refit", &O::refit, "refit the kept columns by least squares (false: keep their dense weights)")
          .add("damp", &O::damp, "the refit's lambda = damp * mean(diag G), added to G's diagonal");
  return table;
}

class UnitScore final : public UnitMethod {
 public:
  explicit UnitScore(ScoreOptions o) : o_(o) { ALPS_CHECK(o_.damp >= 0, "score: damp must be >= 0, got ", o_.damp); }
  std::string_view name() const override { return "score"; }

  UnitSolution solve(const UnitProblem& p) const override {
    check_unit_problem(p, "score");
    UnitSolution s;
    s.kept = detail::top_scored_units(p);
    const at::Tensor cols = unit_columns(s.kept, p.width, p.W0.device());
    s.W = o_.refit ? refit_columns(p.W0, p.G, cols, o_.damp) : p.W0.index_select(1, cols).to(at::kFloat);
    s.stats["refit"] = o_.refit;
    return s;
  }

 private:
  ScoreOptions o_;
};

}  // namespace

nlohmann::json score_option_list() { return score_options().describe(); }

std::unique_ptr<UnitMethod> make_unit_score(const nlohmann::json& options) {
  return std::make_unique<UnitScore>(score_options().read(options, "structured method 'score' options"));
}

}  // namespace alps::prune
