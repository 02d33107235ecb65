#pragma once
// The calibration windows' hidden states as they enter the next block (docs/pipeline.md): held on the host between
// blocks (page-locked for a GPU, so that a batch's upload is one DMA the host does not wait for), run through one
// block at a time in batches, the block's outputs replacing its inputs. A run whose methods read no calibration data
// holds none, and its passes do nothing.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <utility>

#include "alps/model/causal_lm.h"
#include "alps/pipeline/layer_stats.h"

namespace alps::pipeline {

class Phases;
class RunPlan;

class Activations {
 public:
  /// `windows`: the range [first, end) of the calibration windows this rank holds; `batch`: windows per forward.
  Activations(model::CausalLM& m, const RunPlan& plan, std::pair<int64_t, int64_t> windows, int64_t batch,
              Phases& phases);

  int64_t windows() const { return windows_.second - windows_.first; }
  /// The host tensor [windows, seqlen, hidden] (empty when the run holds none), for the resume state.
  const at::Tensor& host() const { return x_; }

  /// Block 0's inputs: this rank's windows of `ids` [every window, seqlen], embedded.
  void embed(const at::Tensor& ids);
  /// The inputs an interrupted run saved: `load(first, end)` reads this rank's windows.
  template <typename Load>
  void restore(Load&& load) {
    if (windows() > 0) adopt(load(windows_.first, windows_.second));
  }
  /// The statistics of block b's linears over the windows, every linear seeing the block's inputs as they were
  /// before any of its linears was pruned (the "statistics" phase).
  BlockStats observe(int64_t b);
  /// The windows through the pruned block b: the next block sees what the pruned block produces, so errors do not
  /// compound unnoticed (the "pruned_forward" phase).
  void forward(int64_t b);
  /// The windows through block b's linears with `outputs` seeing its experts' outputs, in the caller's phase (the
  /// choice of the experts --remove-experts keeps). The windows stay as they are.
  void observe_experts(int64_t b, const model::ExpertObserver& outputs);
  /// The windows through block b with `observer` seeing its linears' inputs, outside any phase (OWL's dense pass).
  void pass(int64_t b, const model::LinearObserver& observer);
  /// A copy of the windows, passes run on it leaving these as they are.
  Activations copy() const;

 private:
  void adopt(at::Tensor host);
  at::Tensor to_device(const at::Tensor& host) const;
  void through_block(int64_t b, const model::LinearObserver* observer);
  template <typename F>
  void each_batch(F&& f) const {
    for (int64_t i = 0; i < windows(); i += batch_) f(i, std::min(batch_, windows() - i));
  }

  model::CausalLM& m_;
  const RunPlan& plan_;
  std::pair<int64_t, int64_t> windows_;
  int64_t batch_;
  Phases& phases_;
  at::Tensor x_;  // [windows, seqlen, hidden] on the host, compute dtype
};

}  // namespace alps::pipeline
