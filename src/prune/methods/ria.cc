#include "alps/prune/methods/ria.h"

#include <ATen/ATen.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cfloat>
#include <vector>

#include "alps/core/error.h"
#include "alps/io/option_table.h"
#include "alps/prune/pattern.h"
#include "alps/prune/problem.h"
#include "prune/assignment.h"
#include "prune/kernels/cpu_kernels.h"
#include "prune/mask.h"

namespace alps::prune {

namespace {
// "The reference" in this file is the authors' code, github.com/biomedical-cybernetics/
// Relative-importance-and-activation-pruning, read at commit 7bc55b06924659ea977f7804b773ce3ef0d55c2f
// (lib/prune.py, prune_ria).
const io::OptionTable<RiaOptions>& ria_options() {
  using O = RiaOptions;
  static const auto table =
      io::OptionTable<O>()
          .add("a", &O::a, "exponent of the input channel's RMS ||X_j|| / sqrt(T) in the score (the reference's a)")
          .add("per_row", &O::per_row,
               "unstructured: prune the lowest scores of each output row (Wanda's rule) instead of the layer's")
          .add("permutation", &O::permutation,
               "N:M: none, groups of M consecutive inputs; heuristic, the reference's channel reallocation; lsa, "
               "that and then its linear sum assignment. The written weights keep the model's order; the order in "
               "which they are N:M goes into the output's channel_orders.safetensors")
          .add("lsa_blocks", &O::lsa_blocks,
               "lsa solves its assignments within this many runs of consecutive groups (the reference's --fast "
               "uses 4 to 16): less time, a smaller gain");
  return table;
}

// The score kept by N:M groups formed in `order`: the n largest of every M, summed.
double grouped_kept_score(const at::Tensor& score, const at::Tensor& order, int64_t n, int64_t m) {
  const at::Tensor grouped = score.index_select(1, order).view({score.size(0), -1, m});
  return std::get<0>(grouped.topk(n, 2)).sum().item<double>();
}

// R[g, q] = sum_o max(0, V[o, q] - a[o, g]) ([out, groups] each): fused on the CPU, elsewhere in slices of g that
// hold at most 2^25 differences at once.
at::Tensor relu_gain(const at::Tensor& V, const at::Tensor& a) {
  if (V.is_cpu() && V.scalar_type() == at::kFloat) return detail::relu_gain_cpu(V, a);
  const int64_t out = V.size(0), groups = V.size(1);
  const int64_t slice = std::max<int64_t>(1, (int64_t{1} << 25) / std::max<int64_t>(1, out * groups));
  std::vector<at::Tensor> rows;
  for (int64_t g = 0; g < groups; g += slice) {
    const at::Tensor ag = a.slice(1, g, std::min(groups, g + slice));  // [out, s]
    rows.push_back((V.unsqueeze(1) - ag.unsqueeze(2)).clamp_min(0).sum(0));
  }
  return at::cat(rows);
}

// One round of the assignment for member c of the groups in [g0, g1): group g may take, at member c, the channel
// that member c of any group in the run holds. Keeping the n largest of M scores per row, a group whose other
// members' n-th largest score in row o is a_go gains max(0, v_o - a_go) over their own n largest from a channel
// with score v_o there; the rest of its kept score does not depend on the choice.
void assign_member(const at::Tensor& score, at::Tensor& order, int64_t m, int64_t n, int64_t c, int64_t g0,
                   int64_t g1) {
  const int64_t groups = g1 - g0, out = score.size(0);
  const at::Tensor positions = order.slice(0, g0 * m, g1 * m).view({groups, m});
  const at::Tensor V = score.index_select(1, positions.select(1, c));  // [out, groups]: the candidates
  std::vector<int64_t> others;
  for (int64_t j = 0; j < m; ++j)
    if (j != c) others.push_back(j);
  const at::Tensor other = positions.index_select(1, at::tensor(others, order.options())).reshape({-1});
  const at::Tensor a = std::get<0>(score.index_select(1, other).view({out, groups, m - 1}).topk(n, 2))
                           .select(2, n - 1);  // [out, groups]
  const at::Tensor R = relu_gain(V, a).to(at::kCPU, at::kDouble).contiguous();
  const std::vector<double> value(R.data_ptr<double>(), R.data_ptr<double>() + R.numel());
  const std::vector<int64_t> take = detail::max_weight_assignment(value, groups);
  const at::Tensor from = at::tensor(take, order.options().device(at::kCPU)).to(order.device());
  const at::Tensor members = positions.select(1, c).clone();
  positions.select(1, c).copy_(members.index_select(0, from));
}
}  // namespace

RiaOptions ria_options_from_json(const nlohmann::json& j) { return ria_options().read(j, "method 'ria' options"); }

nlohmann::json ria_option_list() { return ria_options().describe(); }

Ria::Ria(RiaOptions options) : options_(std::move(options)) {
  ALPS_CHECK(options_.permutation == "none" || options_.permutation == "heuristic" || options_.permutation == "lsa",
             "ria: permutation must be 'none', 'heuristic' or 'lsa', got '", options_.permutation, "'");
  ALPS_CHECK(options_.a >= 0, "ria: a must be >= 0, got ", options_.a);
  ALPS_CHECK(options_.lsa_blocks >= 1, "ria: lsa_blocks must be >= 1, got ", options_.lsa_blocks);
}

at::Tensor ria_score(const LayerProblem& problem, double a) {
  const at::Tensor A = problem.W0.to(at::kFloat).abs();
  // An all-zero column or row adds nothing to its weights' importance (the reference would divide 0 by 0).
  const at::Tensor relative = A / A.sum(0, true).clamp_min(FLT_MIN) + A / A.sum(1, true).clamp_min(FLT_MIN);
  // The reference's activation term is (sum_t x_tj^2 / sequences)^(a/2). Any divisor scales every score of the
  // layer alike; the reference's own, where the problem knows it, also rounds the scores as the reference does, so
  // that channel sums within a rounding of each other sort alike in the channel reallocation.
  const double count =
      static_cast<double>(std::max<int64_t>(problem.sequences > 0 ? problem.sequences : problem.tokens, 1));
  const at::Tensor norm = (problem.G.diagonal().to(at::kFloat) / count).clamp_min(0).sqrt();
  return relative * norm.pow(a).unsqueeze(0);
}

at::Tensor ria_channel_order(const at::Tensor& score, const Pattern& pattern, const std::string& permutation,
                             int64_t lsa_blocks) {
  ALPS_CHECK(pattern.is_n_m(), "ria: a channel permutation needs an N:M pattern, got ", pattern.str());
  const int64_t in = score.size(1), m = pattern.m(), n = pattern.n(), groups = in / m;
  pattern.check_shape(score.size(0), in);
  // Low to high summed score, dealt member by member: member j of the groups takes the j-th M-th of that order,
  // reversed for odd j, so that every group holds channels from every part of the order.
  const at::Tensor sorted = std::get<1>(score.sum(0).sort(/*stable=*/true, 0, false));
  at::Tensor order = at::empty({in}, sorted.options());
  for (int64_t j = 0; j < m; ++j) {
    at::Tensor deal = sorted.slice(0, j * groups, (j + 1) * groups);
    order.slice(0, j, in, m).copy_(j % 2 == 1 ? deal.flip(0) : deal);
  }
  const bool say = spdlog::should_log(spdlog::level::debug);
  if (say)
    spdlog::debug("ria: kept score {:.9g} in groups of consecutive inputs, {:.9g} after the reallocation",
                  grouped_kept_score(score, at::arange(in, order.options()), n, m),
                  grouped_kept_score(score, order, n, m));
  if (permutation != "lsa" || n == 0 || n == m) return order;
  const int64_t blocks = std::min(lsa_blocks, groups);
  for (int64_t c = 0; c < m; ++c) {
    for (int64_t b = 0; b < blocks; ++b)
      assign_member(score, order, m, n, c, groups * b / blocks, groups * (b + 1) / blocks);
    if (say)
      spdlog::debug("ria: kept score {:.9g} after the assignment of member {}", grouped_kept_score(score, order, n, m),
                    c);
  }
  return order;
}

Solution Ria::solve(const LayerProblem& problem, const Pattern& pattern) const {
  check_problem(problem, "ria");
  pattern.check_shape(problem.rows(), problem.cols());
  const at::Tensor W0 = problem.W0.to(at::kFloat);
  if (pattern.is_dense()) return {W0.clone()};
  const at::Tensor score = ria_score(problem, options_.a);
  if (!pattern.is_n_m())
    return {W0 * (options_.per_row ? detail::keep_mask_rows(score, pattern) : detail::keep_mask_layer(score, pattern))};
  if (options_.permutation == "none") return {W0 * detail::keep_mask_layer(score, pattern)};
  Solution s;
  s.input_order = ria_channel_order(score, pattern, options_.permutation, options_.lsa_blocks);
  // Masks chosen in the permuted order are put back in the model's: the layer computes what it computed, with
  // zeros that are N:M once its inputs are read in input_order.
  const at::Tensor keep =
      at::empty(score.sizes(), score.options().dtype(at::kBool))
          .index_copy_(1, s.input_order, detail::keep_mask_layer(score.index_select(1, s.input_order), pattern));
  s.W = W0 * keep;
  const double consecutive =
      grouped_kept_score(score, at::arange(score.size(1), s.input_order.options()), pattern.n(), pattern.m());
  s.stats["kept_score_gain"] =
      grouped_kept_score(score, s.input_order, pattern.n(), pattern.m()) / std::max(consecutive, DBL_MIN) - 1;
  return s;
}

std::unique_ptr<Method> make_ria(const nlohmann::json& options) {
  return std::make_unique<Ria>(ria_options_from_json(options));
}

}  // namespace alps::prune
