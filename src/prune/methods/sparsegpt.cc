#include "alps/prune/methods/sparsegpt.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "prune/mask.h"
#include "alps/core/error.h"
#include "alps/io/option_table.h"
#include "alps/prune/pattern.h"
#include "alps/prune/problem.h"

namespace alps::prune {

namespace {
// "The reference" in this file (help texts included) is the authors' code, github.com/IST-DASLab/sparsegpt at commit
// 147d2159dc4f3e9f73e47b32c04d7b3708f44436 (docs/benchmarks.md).
const io::OptionTable<SparseGptOptions>& sparsegpt_options() {
  using O = SparseGptOptions;
  static const auto table =
      io::OptionTable<O>()
          .add("blocksize", &O::blocksize, "columns per lazy-update block; the unstructured mask is chosen per block")
          .add("damp", &O::damp, "lambda = damp * mean(diag H), added to H's diagonal (the reference's percdamp)");
  return table;
}
}  // namespace

SparseGptOptions sparsegpt_options_from_json(const nlohmann::json& j) {
  return sparsegpt_options().read(j, "method 'sparsegpt' options");
}

nlohmann::json sparsegpt_option_list() { return sparsegpt_options().describe(); }

SparseGpt::SparseGpt(SparseGptOptions options) : options_(options) {
  ALPS_CHECK(options_.blocksize >= 1, "sparsegpt: blocksize must be >= 1, got ", options_.blocksize);
  ALPS_CHECK(options_.damp >= 0, "sparsegpt: damp must be >= 0, got ", options_.damp);
}

Solution SparseGpt::solve(const LayerProblem& problem, const Pattern& pattern) const {
  check_problem(problem, "sparsegpt");
  const int64_t rows = problem.rows(), cols = problem.cols(), bs = options_.blocksize;
  pattern.check_shape(rows, cols);
  ALPS_CHECK(!pattern.is_n_m() || bs % pattern.m() == 0, "sparsegpt: blocksize ", bs, " must be a multiple of M = ",
             pattern.m(), " for ", pattern.str());
  at::Tensor W = problem.W0.to(at::kFloat).clone();  // [out, in]
  if (pattern.is_dense()) return {W};
  at::Tensor H = problem.G.to(at::kFloat).clone();   // [in, in]
  // Dead inputs never reach the output: give them a unit diagonal so H stays invertible, and zero their weights.
  at::Tensor dead = H.diagonal().eq(0);
  H.diagonal().masked_fill_(dead, 1.0);
  W.masked_fill_(dead.unsqueeze(0), 0.0);
  H.diagonal().add_(options_.damp * H.diagonal().mean().item<double>());
  auto [L, info] = at::linalg_cholesky_ex(H);
  ALPS_CHECK(info.item<int64_t>() == 0, "sparsegpt: G + damping is not positive definite (damp = ", options_.damp,
             "); increase damp");
  at::Tensor U = at::linalg_cholesky(at::cholesky_inverse(L), /*upper=*/true);  // upper factor of H^-1

  const int64_t prune_per_group = pattern.is_n_m() ? pattern.m() - pattern.n() : 0;
  for (int64_t i1 = 0; i1 < cols; i1 += bs) {
    const int64_t i2 = std::min(i1 + bs, cols), count = i2 - i1;
    at::Tensor W1 = W.narrow(1, i1, count).clone();  // [out, count]
    at::Tensor Q1 = at::zeros_like(W1);
    at::Tensor Err1 = at::zeros_like(W1);
    at::Tensor U1 = U.narrow(0, i1, count).narrow(1, i1, count);
    at::Tensor u1 = U1.diagonal();
    at::Tensor pruned;  // [out, count] bool
    if (pattern.is_n_m()) {
      pruned = at::zeros({rows, count}, W.options().dtype(at::kBool));
    } else {
      // Cumulative rounding so that the blocks together prune exactly floor(s * out * in) (docs/algorithms.md).
      const int64_t zeros = pattern.zeros_total(rows, i2) - pattern.zeros_total(rows, i1);
      pruned = detail::keep_largest(W1.pow(2) / u1.pow(2).unsqueeze(0), zeros).logical_not();
    }
    for (int64_t i = 0; i < count; ++i) {
      if (pattern.is_n_m() && i % pattern.m() == 0 && prune_per_group > 0) {
        const int64_t m = pattern.m();
        at::Tensor score = W1.narrow(1, i, m).pow(2) / u1.narrow(0, i, m).pow(2).unsqueeze(0);
        pruned.narrow(1, i, m).scatter_(1, std::get<1>(score.topk(prune_per_group, 1, /*largest=*/false)), true);
      }
      at::Tensor w = W1.select(1, i);
      at::Tensor q = w.masked_fill(pruned.select(1, i), 0.0);
      at::Tensor err = (w - q) / u1[i];
      // OBS update of the remaining columns of the block: W1[:, i:] -= err U1[i, i:].
      W1.narrow(1, i, count - i).addr_(err, U1[i].narrow(0, i, count - i), 1.0, -1.0);
      Q1.select(1, i).copy_(q);
      Err1.select(1, i).copy_(err);
    }
    W.narrow(1, i1, count).copy_(Q1);
    // Lazy batch update of every later column with the block's accumulated errors.
    if (i2 < cols) W.narrow(1, i2, cols - i2).sub_(Err1.matmul(U.narrow(0, i1, count).narrow(1, i2, cols - i2)));
  }
  Solution s;
  s.W = W;
  s.stats["factorizations"] = 1;
  return s;
}

std::unique_ptr<Method> make_sparsegpt(const nlohmann::json& options) {
  return std::make_unique<SparseGpt>(sparsegpt_options_from_json(options));
}

}  // namespace alps::prune
