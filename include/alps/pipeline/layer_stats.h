#pragma once
// Calibration statistics of a linear layer (docs/algorithms.md): G = sum_t x_t x_t^T, the input mean, the token
// count T, and the squared means of the calibration sequences (for DSnoT's variance within sequences).
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "alps/prune/shared_factors.h"

namespace alps::dist {
class Group;
}

namespace alps::pipeline {

class LayerStats {
 public:
  /// `dtype`: accumulation precision of G (fp32, as mazumder-lab/ALPS at commit 8af9e6b and IST-DASLab/sparsegpt at
  /// commit 147d215 accumulate it, or fp64).
  LayerStats(int64_t in_features, c10::Device device, c10::ScalarType dtype);
  /// Adds inputs x [..., seq, in] (any float dtype, on any device): each slice [seq, in] is one calibration
  /// sequence (a [in] vector one token).
  void add(const at::Tensor& x);
  const at::Tensor& gram() const;                 ///< [in, in]
  at::Tensor mean() const;                        ///< [in], fp32
  /// [in], fp64: (1/T) sum_s L_s m_s^2 over the sequences s (L_s tokens, mean input m_s), so that G_jj / T minus
  /// it is the token-weighted mean of the variances within the sequences.
  at::Tensor sequence_mean_sq() const;
  int64_t tokens() const { return T_; }
  /// The calibration sequences behind them: the slices add() was given (the tokens an expert was routed in one
  /// forward count as one).
  int64_t sequences() const { return S_; }
  /// Sums every rank's statistics (of its share of the windows) into `owner`'s: G, the sums and T, each reduced in
  /// the backend's fixed order. The other ranks' statistics are freed: only the owner solves with them. Statistics
  /// summed into another rank before (a structured step's choice, then a solve elsewhere) move from it to `owner`.
  void reduce_to(dist::Group& group, int owner, const std::string& what);
  /// The statistics of `members`' rank 0 (the owner after reduce_to) to every member: the ranks that solve parts of
  /// this input's linears (schedule.h) each solve with the whole layer's.
  void share_among(dist::Group& members, const std::string& what);
  /// Keeps the statistics of input columns `cols` only (int64, ascending): what a structured step leaves of the input
  /// (docs/structured.md). The factors shared by the linears reading the input start afresh.
  void keep_inputs(const at::Tensor& cols);
  /// What the solves of the linears reading this input share (their G is this one).
  const std::shared_ptr<prune::SharedFactors>& shared_factors() const { return shared_; }

 private:
  std::shared_ptr<prune::SharedFactors> shared_ = std::make_shared<prune::SharedFactors>();
  int64_t in_;
  at::TensorOptions options_;  // G's; the sums are fp64 on its device
  at::Tensor G_;    // [in, in]; add() accumulates its lower triangle (a syrk: half the flops of a product)
  mutable bool upper_stale_ = false;  // gram() copies the lower triangle over when set
  at::Tensor sum_;  // [in], fp64
  at::Tensor sequence_sq_;  // [in], fp64: sum_s (sum_{t in s} x_t)^2 / L_s
  int64_t T_ = 0;
  int64_t S_ = 0;
  int owner_ = -1;  // the rank reduce_to summed them into, on every rank
};

/// Statistics for every prunable linear of one block, fed by the block's LinearObserver. Linears that read the same
/// input tensor (q/k/v; gate/up) share one accumulator: same G, a third of the work.
class BlockStats {
 public:
  BlockStats(c10::Device device, c10::ScalarType dtype);
  /// The observer callback: (linear short name, its input [batch, seq, in]).
  void observe(const std::string& linear, const at::Tensor& input);
  /// Ends one forward call (input sharing is detected within a call).
  void end_forward();
  const LayerStats& at(const std::string& linear) const;
  LayerStats& at(const std::string& linear);
  /// Each linear's statistics, in the order given; null for a linear the block's forward never showed (all of them
  /// when no calibration pass ran).
  std::vector<LayerStats*> inputs(const std::vector<std::string>& linears);
  /// Frees the accumulators once the block is pruned.
  void clear();
  /// Bytes held by the accumulators.
  int64_t bytes() const;

 private:
  c10::Device device_;
  c10::ScalarType dtype_;
  std::vector<std::unique_ptr<LayerStats>> groups_;
  std::map<std::string, size_t> group_of_;
  at::Tensor last_input_;
  size_t last_group_ = 0;
};

}  // namespace alps::pipeline
