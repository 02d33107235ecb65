// OSSCAR (docs/structured.md): the kept set by exact block eliminations of a few units at a time (or the score's set
// where it fits better), then a local search that swaps units out and back in while the layer's least-squares error
// falls.
#include <ATen/ATen.h>

#include <algorithm>

#include "alps/io/option_table.h"
#include "prune/structured/elimination.h"
#include "prune/structured/methods.h"

namespace alps::prune {

namespace {

// "The authors' code" is github.com/mazumder-lab/OSSCAR; its runs remove 10 neurons or 2 heads per stage and swap
// 10 neurons or 5 heads per local-search move.
struct OsscarOptions {
  double damp = 0.01;
  int64_t stage = 0;
  int64_t swap = 0;
  int64_t iterations = 30;
};

const io::OptionTable<OsscarOptions>& osscar_options() {
  using O = OsscarOptions;
  static const auto table =
      io::OptionTable<O>()
          .add("damp", &O::damp, "lambda = damp * mean(diag G), added to G's diagonal")
          .add("stage", &O::stage,
               "units removed together by each elimination stage (0: as the authors' code, 10 neurons or 2 heads)")
          .add("swap", &O::swap,
               "units each local-search move takes out and puts back (0: as the authors' code, 10 neurons or 5 heads)")
          .add("iterations", &O::iterations,
               "local-search moves tried at most (0: no search); a move that does not lower the error halves the "
               "swap, and one of a single unit ends the search");
  return table;
}

class Osscar final : public UnitMethod {
 public:
  explicit Osscar(OsscarOptions o) : o_(o) {
    ALPS_CHECK(o_.damp >= 0, "osscar: damp must be >= 0, got ", o_.damp);
    ALPS_CHECK(o_.stage >= 0 && o_.swap >= 0 && o_.iterations >= 0, "osscar: stage, swap and iterations must be >= 0");
  }
  std::string_view name() const override { return "osscar"; }

  UnitSolution solve(const UnitProblem& p) const override {
    check_unit_problem(p, "osscar");
    const bool neurons = p.width == 1;
    detail::KeptSet set(p, o_.damp);
    UnitSolution s;
    s.stats["stages"] = detail::eliminate(set, p.parts, p.keep, o_.stage > 0 ? o_.stage : neurons ? 10 : 2);
    // OSSCAR starts its search from a cheap score's set; alps from that set or elimination's, whichever fits the
    // damped problem better (usually elimination's, greedy as it is).
    const std::vector<int64_t> scored = detail::top_scored_units(p);
    const bool from_score = set.loss_of(scored) < set.loss();
    if (from_score) set.reset(scored);
    s.stats["start"] = from_score ? "score" : "elimination";
    const double start = set.loss();
    const int64_t moves = local_search(set, p, std::min(o_.swap > 0 ? o_.swap : neurons ? 10 : 5, p.keep * p.parts));
    s.stats["moves"] = moves;
    // The share of the starting set's damped error that the search took off.
    s.stats["search_gain"] = moves > 0 && start > 0 ? 1.0 - set.loss() / start : 0.0;
    s.kept = set.kept_units();
    s.W = set.kept_weights();
    return s;
  }

 private:
  // Each move takes out the `swap` units whose removal costs least, puts back as many of each part's removed units
  // (the ones just taken out among them) as gain most, and refits; it stays when the damped error fell, and a move
  // that does not help halves `swap` for the next one, until a swap of one unit does not help. At most
  // o_.iterations moves are tried. Returns the moves that stayed.
  int64_t local_search(detail::KeptSet& set, const UnitProblem& p, int64_t swap) const {
    std::vector<int64_t> best = set.kept_units();
    double best_loss = set.loss();
    int64_t moves = 0;
    for (int64_t it = 0; it < o_.iterations && swap >= 1; ++it) {
      std::vector<int64_t> kept = swapped(set, p, swap);
      set.reset(kept);
      const double loss = set.loss();
      if (!(loss < best_loss * (1 - 1e-12))) {
        set.reset(best);
        swap /= 2;
        continue;
      }
      best = std::move(kept);
      best_loss = loss;
      ++moves;
    }
    return moves;
  }

  // The kept set one move makes of `set`'s: the `swap` units whose removal costs least out, then as many of each
  // part's removed units back as gain most. Leaves `set` with the units taken out.
  static std::vector<int64_t> swapped(detail::KeptSet& set, const UnitProblem& p, int64_t swap) {
    const int64_t per_part = p.units_per_part();
    const at::Tensor cost = set.removal_costs().cpu();
    const at::Tensor out = std::get<1>(at::sort(cost, c10::optional<bool>(true), 0)).narrow(0, 0, swap);
    std::vector<int64_t> taken(static_cast<size_t>(p.parts), 0), removed;
    for (int64_t i = 0; i < swap; ++i) {
      removed.push_back(out[i].item<int64_t>());
      ++taken[static_cast<size_t>(removed.back() / per_part)];
    }
    set.remove(removed);
    const at::Tensor gain = set.addition_gains().cpu().view({p.parts, per_part});
    std::vector<int64_t> kept = set.kept_units();
    for (int64_t q = 0; q < p.parts; ++q) {
      const at::Tensor order = std::get<1>(at::sort(gain[q], c10::optional<bool>(true), 0, /*descending=*/true));
      for (int64_t i = 0; i < taken[static_cast<size_t>(q)]; ++i)
        kept.push_back(q * per_part + order[i].item<int64_t>());
    }
    std::sort(kept.begin(), kept.end());
    return kept;
  }

  OsscarOptions o_;
};

}  // namespace

nlohmann::json osscar_option_list() { return osscar_options().describe(); }

std::unique_ptr<UnitMethod> make_osscar(const nlohmann::json& options) {
  return std::make_unique<Osscar>(osscar_options().read(options, "structured method 'osscar' options"));
}

}  // namespace alps::prune
