#include "alps/prune/methods/dsnot.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "alps/core/error.h"
#include "alps/io/option_table.h"
#include "alps/prune/methods/wanda.h"
#include "alps/prune/pattern.h"
#include "alps/prune/problem.h"
#include "prune/mask.h"

namespace alps::prune {

namespace {
// "The reference" in this file is the authors' code, github.com/zyxxmu/DSnoT; the commit read was not recorded, and
// what is said of it here holds at commit 4c029dfa66cae3dba7f4a77c78a524e272fc638c.
const io::OptionTable<DsnotOptions>& dsnot_options() {
  using O = DsnotOptions;
  static const auto table =
      io::OptionTable<O>()
          .add("max_cycles", &O::max_cycles, "swap cycles per row at most")
          .add("update_threshold", &O::update_threshold,
               "a row stops once its expected output change |e|, summed over one calibration sequence's tokens as "
               "the reference measures it, is <= this")
          .add("skip_layer", &O::skip_layer,
               "mlp: MLP linears (mlp., fc1, fc2) keep Wanda's result, as in the reference; none: refine every linear")
          .add("variance", &O::variance,
               "var_j of the regrow order: tokens, over all calibration tokens; sequences, the mean of the variances "
               "within each calibration sequence, as the reference computes it");
  return table;
}
}  // namespace

DsnotOptions dsnot_options_from_json(const nlohmann::json& j) {
  return dsnot_options().read(j, "method 'dsnot' options");
}

nlohmann::json dsnot_option_list() { return dsnot_options().describe(); }

bool is_mlp_layer(const std::string& name) {
  return name.find("mlp.") != std::string::npos || name.find("fc1") != std::string::npos ||
         name.find("fc2") != std::string::npos;
}

Dsnot::Dsnot(DsnotOptions options) : options_(std::move(options)) {
  ALPS_CHECK(options_.skip_layer == "mlp" || options_.skip_layer == "none",
             "dsnot: skip_layer must be 'mlp' or 'none', got '", options_.skip_layer, "'");
  ALPS_CHECK(options_.variance == "tokens" || options_.variance == "sequences",
             "dsnot: variance must be 'tokens' or 'sequences', got '", options_.variance, "'");
  ALPS_CHECK(options_.max_cycles >= 0 && options_.update_threshold >= 0,
             "dsnot: max_cycles and update_threshold must be >= 0");
}

at::Tensor dsnot_input_variance(const LayerProblem& problem, const std::string& variance) {
  const double T = static_cast<double>(problem.tokens);
  if (variance == "tokens") {
    at::Tensor mu = problem.mean.to(problem.W0.device(), at::kFloat);
    return (problem.G.diagonal().to(at::kFloat) / T - mu * mu).clamp_min(1e-12);
  }
  ALPS_CHECK(variance == "sequences", "dsnot: variance must be 'tokens' or 'sequences', got '", variance, "'");
  ALPS_CHECK(problem.sequence_mean_sq.defined(),
             "dsnot variance=sequences needs the per-sequence statistic "
             "sequence_mean_sq of layer '",
             problem.name,
             "' (a problem file written before it existed has none); "
             "use variance=tokens");
  // In fp64: where the features' means dwarf their spread the difference cancels most digits.
  return (problem.G.diagonal().to(at::kDouble) / T - problem.sequence_mean_sq.to(problem.W0.device(), at::kDouble))
      .to(at::kFloat)
      .clamp_min(1e-12);
}

namespace {

at::Tensor gather1(const at::Tensor& t, const at::Tensor& idx) { return t.gather(1, idx.unsqueeze(1)).squeeze(1); }

// Unstructured prune order (reference): kept entries by Wanda score ascending, split by the sign of W mu:
// [negatives ascending | positives descending], so e > 0 prunes from the front and e < 0 from the back, both
// taking the least important entry that moves e toward 0. A row keeps n_keep_r entries; rows of a spread count
// (Pattern::unstructured_count) keep one fewer or more than others, and the slot past a row's own count holds a
// pruned entry, sorted last and never reached.
struct PruneOrder {
  at::Tensor order;     // [out, n_keep]
  at::Tensor lo, hi;    // [out] the next entry to prune when e > 0 / e < 0
  at::Tensor n_keep_r;  // [out]
  int64_t n_keep = 0;   // the largest n_keep_r
};

PruneOrder unstructured_prune_order(const at::Tensor& score, const at::Tensor& keep, const at::Tensor& M,
                                    at::Tensor n_keep_r) {
  PruneOrder o;
  const int64_t out = keep.size(0);
  const auto longs = n_keep_r.options();
  o.n_keep = n_keep_r.max().item<int64_t>();
  at::Tensor by_score = std::get<1>(score.masked_fill(keep.logical_not(), INFINITY).sort(1)).narrow(1, 0, o.n_keep);
  at::Tensor rank = at::arange(o.n_keep, longs).unsqueeze(0).expand({out, o.n_keep});
  at::Tensor positive = M.gather(1, by_score) > 0;
  at::Tensor key = at::where(positive, 2 * o.n_keep - rank, rank);
  key = at::where(rank >= n_keep_r.unsqueeze(1), 3 * o.n_keep, key);
  o.order = by_score.gather(1, std::get<1>(key.sort(1)));
  o.lo = at::zeros({out}, longs);
  o.hi = n_keep_r - 1;
  o.n_keep_r = std::move(n_keep_r);
  return o;
}

// DSnoT's cycles (paper Algorithm 1): in every row still active, regrow the pruned entry and prune the kept one
// that move the expected output change e toward 0, until |e| is below the threshold, a swap would not help, or
// max_cycles; keep and e are updated in place. Returns the cycles run.
int64_t swap_cycles(const LayerProblem& problem, const Pattern& pattern, const at::Tensor& M, const at::Tensor& var,
                    double threshold, int64_t max_cycles, at::Tensor& keep, at::Tensor& e) {
  const int64_t out = keep.size(0), in = keep.size(1);
  const at::Tensor sign0 = e.sign();
  // Regrow order: pruned entries by W mu / var, ascending (kept entries sit at 0); e > 0 takes from the top.
  at::Tensor regrow_order = std::get<1>((M / var.unsqueeze(0)).masked_fill(keep, 0).sort(1));  // [out, in]
  at::Tensor lo = at::zeros({out}, e.options().dtype(at::kLong)), hi = at::full({out}, in - 1, lo.options());
  at::Tensor score = wanda_score(problem);
  at::Tensor rows = at::arange(out, lo.options());
  PruneOrder prune;
  if (!pattern.is_n_m())
    prune = unstructured_prune_order(score, keep, M, in - detail::row_zeros(pattern, out, in, lo.device()));
  // N:M: the pruned partner is the kept entry of the regrown entry's group with the lowest Wanda score; entries
  // pruned or regrown so far are taken out of the candidates.
  at::Tensor group_score = score.masked_fill(keep.logical_not(), INFINITY);

  at::Tensor active = at::ones({out}, keep.options());
  int64_t cycle = 0;
  for (; cycle < max_cycles && active.any().item<bool>(); ++cycle) {
    at::Tensor up = e > 0;
    at::Tensor pointers_ok = at::where(up, hi >= 0, lo < in);
    at::Tensor r = gather1(regrow_order, at::where(up, hi, lo).clamp(0, in - 1));  // [out]
    hi = hi - up.to(at::kLong);
    lo = lo + up.logical_not().to(at::kLong);
    at::Tensor p;
    if (pattern.is_n_m()) {
      at::Tensor start = r - r.remainder(pattern.m());
      at::Tensor cols = start.unsqueeze(1) + at::arange(pattern.m(), lo.options()).unsqueeze(0);  // [out, m]
      p = cols.gather(1, group_score.gather(1, cols).argmin(1, true)).squeeze(1);
    } else {
      pointers_ok = pointers_ok & at::where(up, prune.lo < prune.n_keep_r, prune.hi >= 0);
      p = gather1(prune.order, at::where(up, prune.lo, prune.hi).clamp(0, prune.n_keep - 1));
      prune.lo = prune.lo + up.to(at::kLong);
      prune.hi = prune.hi - up.logical_not().to(at::kLong);
    }
    at::Tensor Mr = gather1(M, r), Mp = gather1(M, p);
    at::Tensor after = e + Mp - Mr;
    // A swap needs a pruned entry to regrow and a kept one to prune (row sparsity preserved), |e| above the
    // threshold, and must not flip the sign of e (reference); a row that fails once stops for good. It must also
    // shrink |e|: once the prune pointer runs past the entries whose W mu opposes e, the next candidates push e
    // further away and would remove the row's most important weights (seen on stories260K: 2.5x Wanda's error).
    at::Tensor valid = pointers_ok & gather1(keep, r).logical_not() & gather1(keep, p);
    active = active & valid & (e.abs() > threshold) & (after.sign() == sign0) & (after.abs() < e.abs());
    if (pattern.is_n_m()) group_score.index_put_({rows, p}, INFINITY);
    keep.index_put_({rows, r}, gather1(keep, r) | active);
    keep.index_put_({rows, p}, gather1(keep, p) & active.logical_not());
    e = at::where(active, after, e);
  }
  return cycle;
}

}  // namespace

Solution Dsnot::solve(const LayerProblem& problem, const Pattern& pattern) const {
  check_problem(problem, "dsnot");
  const int64_t out = problem.rows(), in = problem.cols();
  pattern.check_shape(out, in);
  at::Tensor W0 = problem.W0.to(at::kFloat);
  Solution sol;
  if (pattern.is_dense()) {
    sol.W = W0.clone();
    return sol;
  }
  at::Tensor keep = wanda_mask(problem, pattern);  // [out, in] bool, the initial mask
  if (options_.skip_layer == "mlp" && is_mlp_layer(problem.name)) {
    sol.W = W0 * keep;
    return sol;
  }
  ALPS_CHECK(problem.mean.defined() && problem.tokens > 0, "dsnot needs the input mean and tokens (T > 0) of layer '",
             problem.name, "'");
  at::Tensor mu = problem.mean.to(W0.device(), at::kFloat);
  at::Tensor var = dsnot_input_variance(problem, options_.variance);
  at::Tensor M = W0 * mu.unsqueeze(0);             // [out, in], each weight's contribution to the expected output
  at::Tensor e = (M * keep.logical_not()).sum(1);  // [out], expected output change of the pruned entries
  // e is per token; the reference sums it over one calibration sequence (T / sequences tokens) before comparing
  // it with update_threshold. Unknown sequences: all T tokens are one.
  const double sequence_tokens = static_cast<double>(std::max<int64_t>(problem.tokens, 1)) /
                                 static_cast<double>(std::max<int64_t>(problem.sequences, 1));
  const int64_t cycles =
      swap_cycles(problem, pattern, M, var, options_.update_threshold / sequence_tokens, options_.max_cycles, keep, e);
  sol.stats["cycles"] = cycles;
  sol.W = W0 * keep;
  return sol;
}

std::unique_ptr<Method> make_dsnot(const nlohmann::json& options) {
  return std::make_unique<Dsnot>(dsnot_options_from_json(options));
}

}  // namespace alps::prune
