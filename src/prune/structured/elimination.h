#pragma once
// What the structured methods share (docs/structured.md): the damped Gram matrix, the least-squares weights of a kept
// set of units with the inverse that gives them, and removal by exact block updates of both (Optimal Brain Surgeon
// applied to whole units).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "alps/prune/structured.h"

namespace alps::prune::detail {

/// H = G + lambda I in fp64, lambda = damp * mean(diag G); a dead input (G_jj = 0) gets a unit diagonal so that H
/// stays invertible whatever damp is.
at::Tensor damped_unit_gram(const at::Tensor& G, double damp);

/// The kept units of each part with the highest `score` [units]: `keep` per part, ascending.
std::vector<int64_t> top_units_per_part(const at::Tensor& score, int64_t parts, int64_t keep);

/// The score method's kept set: in each part the `keep` units of largest sum over their columns j of
/// ||W0[:, j]||^2 G_jj (for a neuron, its weight norm times its input's norm, squared), as structured Wanda and FLAP
/// rank them.
std::vector<int64_t> top_scored_units(const UnitProblem& p);

/// A kept set S of units with its least-squares weights: W = C_S H_SS^-1 for C = W0 H (zeros outside S), and
/// Hinv = H_SS^-1 embedded in an [in, in] matrix (zeros outside S). Removing units updates both exactly.
class KeptSet {
 public:
  /// Every unit kept: W = W0, Hinv = H^-1.
  KeptSet(const UnitProblem& p, double damp);

  /// The increase of the (damped) objective that removing each unit alone and refitting the others costs:
  /// tr(W_u (Hinv_uu)^-1 W_u^T) [units] (infinite for removed units).
  at::Tensor removal_costs() const;
  /// Removes `units` together by one block update of W and Hinv.
  void remove(const std::vector<int64_t>& units);
  /// Makes `units` the kept set, solving W and Hinv afresh.
  void reset(const std::vector<int64_t>& units);
  /// What adding each removed unit back gains: tr(R_u M_u^-1 R_u^T), R = C - W H its residual correlation and M_u
  /// the Schur complement of H_SS in H over it [units] (-infinite for kept units).
  at::Tensor addition_gains() const;
  /// The damped objective tr(W0 H W0^T) - tr(W C^T) >= 0 of the current set.
  double loss() const;
  /// The damped objective of keeping `units` instead, refit; the set stays as it is.
  double loss_of(const std::vector<int64_t>& units) const;

  const std::vector<bool>& kept() const { return kept_; }
  std::vector<int64_t> kept_units() const;
  /// Kept units per part.
  std::vector<int64_t> part_counts() const;
  /// The kept columns of W, fp32 [out, kept * width].
  at::Tensor kept_weights() const;

 private:
  at::Tensor unit_blocks(const at::Tensor& M) const;  // the diagonal [width, width] blocks of an [in, in] matrix
  at::Tensor kept_mask() const;                       // kept_ as a bool tensor [units] on H's device

  int64_t width_, units_, parts_;
  at::Tensor H_, C_, W_, Hinv_;  // fp64
  double base_ = 0;              // tr(W0 H W0^T)
  std::vector<bool> kept_;
};

/// Removes units from `set` until each part keeps `keep`: `stage` units at a time (each stage takes those whose
/// removal alone costs least, within what each part may still give), each stage one exact block update. Returns the
/// number of stages.
int64_t eliminate(KeptSet& set, int64_t parts, int64_t keep, int64_t stage);

}  // namespace alps::prune::detail
