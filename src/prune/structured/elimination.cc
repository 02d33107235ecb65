#include "prune/structured/elimination.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <numeric>

#include "alps/core/error.h"

namespace alps::prune::detail {

namespace {

// A symmetric positive definite matrix's Cholesky factor.
at::Tensor spd_factor(const at::Tensor& A) {
  auto [L, info] = at::linalg_cholesky_ex(A);
  ALPS_CHECK(info.item<int64_t>() == 0,
             "structured pruning: the damped Gram matrix is not positive definite; raise damp");
  return L;
}

at::Tensor spd_inverse(const at::Tensor& A) { return at::cholesky_inverse(spd_factor(A)); }

// tr(A_u B_u^-1 A_u^T) for every unit u: A [units, out, width], B [units, width, width].
at::Tensor block_quadratic(const at::Tensor& A, const at::Tensor& B) {
  if (B.size(-1) == 1) return A.pow(2).sum({1, 2}) / B.view({-1});
  return (A.transpose(1, 2) * at::linalg_solve(B, A.transpose(1, 2))).sum({1, 2});
}

}  // namespace

at::Tensor damped_unit_gram(const at::Tensor& G, double damp) {
  at::Tensor H = G.to(at::kDouble).clone();
  H.diagonal().masked_fill_(H.diagonal().eq(0), 1.0);
  H.diagonal().add_(damp * H.diagonal().mean().item<double>());
  return H;
}

std::vector<int64_t> top_units_per_part(const at::Tensor& score, int64_t parts, int64_t keep) {
  const at::Tensor s = score.to(at::kCPU, at::kDouble).contiguous().view({parts, -1});
  const int64_t per_part = s.size(1);
  // Ties go to the lower index (a stable sort), so equal scores choose the same units on every machine.
  const at::Tensor order = std::get<1>(at::sort(s, c10::optional<bool>(true), /*dim=*/1, /*descending=*/true));
  std::vector<int64_t> kept;
  for (int64_t p = 0; p < parts; ++p)
    for (int64_t i = 0; i < keep; ++i) kept.push_back(p * per_part + order[p][i].item<int64_t>());
  std::sort(kept.begin(), kept.end());
  return kept;
}

std::vector<int64_t> top_scored_units(const UnitProblem& p) {
  const at::Tensor per_column = p.W0.to(at::kDouble).pow(2).sum(0) * p.G.to(at::kDouble).diagonal();
  return top_units_per_part(per_column.view({p.units(), p.width}).sum(1), p.parts, p.keep);
}

KeptSet::KeptSet(const UnitProblem& p, double damp)
    : width_(p.width), units_(p.units()), parts_(p.parts), kept_(static_cast<size_t>(p.units()), true) {
  H_ = damped_unit_gram(p.G, damp);
  const at::Tensor W0 = p.W0.to(at::kDouble);
  C_ = at::matmul(W0, H_);
  W_ = W0.clone();  // C H^-1: every unit kept, nothing to make up for
  Hinv_ = spd_inverse(H_);
  base_ = (W0 * C_).sum().item<double>();
}

at::Tensor KeptSet::unit_blocks(const at::Tensor& M) const {
  return M.view({units_, width_, units_, width_}).diagonal(0, 0, 2).permute({2, 0, 1});
}

at::Tensor KeptSet::kept_mask() const {
  return at::tensor(std::vector<uint8_t>(kept_.begin(), kept_.end())).to(H_.device()).to(at::kBool);
}

at::Tensor KeptSet::removal_costs() const {
  const at::Tensor keep = kept_mask();
  at::Tensor B = unit_blocks(Hinv_).clone();
  // A removed unit's block is zero: give it the identity and its cost infinity.
  const at::Tensor eye = at::eye(width_, B.options()).expand_as(B);
  B = at::where(keep.view({-1, 1, 1}), B, eye);
  const at::Tensor A = W_.view({W_.size(0), units_, width_}).permute({1, 0, 2});
  return block_quadratic(A, B).masked_fill(keep.logical_not(), std::numeric_limits<double>::infinity());
}

void KeptSet::remove(const std::vector<int64_t>& units) {
  if (units.empty()) return;
  for (int64_t u : units) {
    ALPS_CHECK(kept_.at(static_cast<size_t>(u)), "structured pruning: unit ", u, " is already removed");
    kept_[static_cast<size_t>(u)] = false;
  }
  std::vector<int64_t> sorted = units;
  std::sort(sorted.begin(), sorted.end());
  const at::Tensor P = unit_columns(sorted, width_, H_.device());
  const at::Tensor M = at::linalg_inv(Hinv_.index_select(0, P).index_select(1, P));  // (Hinv_PP)^-1
  const at::Tensor HinvP = Hinv_.index_select(0, P);                                 // [p, in]
  W_.sub_(at::matmul(at::matmul(W_.index_select(1, P), M), HinvP));
  Hinv_.sub_(at::matmul(at::matmul(HinvP.t(), M), HinvP));
  // Exact zeros where rounding leaves crumbs: the removed units take no part from here on.
  W_.index_fill_(1, P, 0.0);
  Hinv_.index_fill_(0, P, 0.0).index_fill_(1, P, 0.0);
}

void KeptSet::reset(const std::vector<int64_t>& units) {
  std::fill(kept_.begin(), kept_.end(), false);
  for (int64_t u : units) kept_.at(static_cast<size_t>(u)) = true;
  const at::Tensor S = unit_columns(kept_units(), width_, H_.device());
  const at::Tensor HinvS = spd_inverse(H_.index_select(0, S).index_select(1, S));
  Hinv_.zero_();
  Hinv_.index_put_({S.unsqueeze(1), S.unsqueeze(0)}, HinvS);
  W_.zero_();
  W_.index_copy_(1, S, at::matmul(C_.index_select(1, S), HinvS));
}

at::Tensor KeptSet::addition_gains() const {
  const std::vector<int64_t> kept = kept_units();
  const at::Tensor S = unit_columns(kept, width_, H_.device());
  const at::Tensor R = C_ - at::matmul(W_, H_);                                                         // [out, in]
  const at::Tensor T = at::matmul(H_.index_select(1, S), Hinv_.index_select(0, S).index_select(1, S));  // [in, |S|]
  at::Tensor M;  // the Schur complements' diagonal blocks [units, width, width]
  if (width_ == 1) {
    M = (H_.diagonal() - (T * H_.index_select(1, S)).sum(1)).view({-1, 1, 1});
  } else {
    M = unit_blocks(H_ - at::matmul(T, H_.index_select(0, S))).clone();
  }
  const at::Tensor keep = kept_mask();
  M = at::where(keep.view({-1, 1, 1}), at::eye(width_, M.options()).expand_as(M), M);
  const at::Tensor A = R.view({R.size(0), units_, width_}).permute({1, 0, 2});
  return block_quadratic(A, M).masked_fill(keep, -std::numeric_limits<double>::infinity());
}

double KeptSet::loss() const { return base_ - (W_ * C_).sum().item<double>(); }

double KeptSet::loss_of(const std::vector<int64_t>& units) const {
  const at::Tensor S = unit_columns(units, width_, H_.device());
  const at::Tensor L = spd_factor(H_.index_select(0, S).index_select(1, S));
  const at::Tensor CS = C_.index_select(1, S);
  return base_ - (CS.t() * at::cholesky_solve(CS.t(), L)).sum().item<double>();
}

std::vector<int64_t> KeptSet::kept_units() const {
  std::vector<int64_t> units;
  for (size_t u = 0; u < kept_.size(); ++u)
    if (kept_[u]) units.push_back(static_cast<int64_t>(u));
  return units;
}

std::vector<int64_t> KeptSet::part_counts() const {
  std::vector<int64_t> counts(static_cast<size_t>(parts_), 0);
  const int64_t per_part = units_ / parts_;
  for (size_t u = 0; u < kept_.size(); ++u)
    if (kept_[u]) ++counts[u / static_cast<size_t>(per_part)];
  return counts;
}

at::Tensor KeptSet::kept_weights() const {
  return W_.index_select(1, unit_columns(kept_units(), width_, H_.device())).to(at::kFloat);
}

int64_t eliminate(KeptSet& set, int64_t parts, int64_t keep, int64_t stage) {
  ALPS_CHECK(stage >= 1, "structured pruning: a stage removes at least one unit, got ", stage);
  const int64_t per_part = static_cast<int64_t>(set.kept().size()) / parts;
  int64_t stages = 0;
  for (;;) {
    std::vector<int64_t> left = set.part_counts();  // what each part may still give
    int64_t total = 0;
    for (int64_t& l : left) total += (l -= keep);
    if (total == 0) return stages;
    const at::Tensor cost = set.removal_costs().cpu();
    const at::Tensor order = std::get<1>(at::sort(cost, c10::optional<bool>(true), 0));
    std::vector<int64_t> picks;
    for (int64_t i = 0; i < order.size(0) && static_cast<int64_t>(picks.size()) < std::min(stage, total); ++i) {
      const int64_t u = order[i].item<int64_t>();
      int64_t& may = left[static_cast<size_t>(u / per_part)];
      if (!set.kept()[static_cast<size_t>(u)] || may == 0) continue;
      --may;
      picks.push_back(u);
    }
    set.remove(picks);
    ++stages;
  }
}

}  // namespace alps::prune::detail
