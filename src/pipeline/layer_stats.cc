#include "alps/pipeline/layer_stats.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include "alps/core/error.h"
#include "alps/core/linalg.h"
#include "alps/dist/group.h"

namespace alps::pipeline {

LayerStats::LayerStats(int64_t in_features, c10::Device device, c10::ScalarType dtype)
    : in_(in_features),
      options_(at::TensorOptions().device(device).dtype(dtype)),
      G_(at::zeros({in_features, in_features}, options_)),
      sum_(at::zeros({in_features}, options_.dtype(at::kDouble))),
      sequence_sq_(at::zeros_like(sum_)) {}

void LayerStats::add(const at::Tensor& x) {
  RECORD_USER_SCOPE("alps::layer_stats");
  const int64_t in = G_.size(0);
  ALPS_CHECK(x.dim() >= 1 && x.size(-1) == in, "layer statistics expect inputs [..., ", in, "], got ", x.sizes());
  // Half-precision inputs stay as they are where the Gram takes them exactly (gram_update); the column sums
  // accumulate in fp32 whatever the input dtype (ATen's half reductions do), so no fp32 copy of x is made there.
  const at::Tensor x2 = x.reshape({-1, in}).to(G_.device());  // [tokens, in]
  const at::Tensor X = gram_takes_half_inputs(x2.scalar_type(), x2.device()) && G_.scalar_type() == at::kFloat
                           ? x2.contiguous()
                           : x2.to(G_.scalar_type()).contiguous();
  gram_update(G_, X);  // G += X^T X
  upper_stale_ = true;
  const auto sum_dtype = X.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  // A batch's column sums (ATen sums by cascades: error ~ log2(tokens) u of fp32), accumulated over batches in
  // fp64; summing in fp64 directly converted every element on one thread and cost a third of the syrk.
  sum_.add_(X.sum(0, /*keepdim=*/false, sum_dtype));
  // Each sequence's column sums like the mean's, squared and accumulated in fp64.
  const int64_t L = x.dim() >= 2 ? x.size(-2) : 1;
  if (L > 0) {
    // [sequences, in]
    const at::Tensor sequence_sums = X.reshape({-1, L, in}).sum(1, /*keepdim=*/false, sum_dtype).to(at::kDouble);
    sequence_sq_.add_(sequence_sums.pow(2).sum(0) / static_cast<double>(L));
    S_ += sequence_sums.size(0);
  }
  T_ += X.size(0);
}

const at::Tensor& LayerStats::gram() const {
  if (upper_stale_) {
    at::Tensor G = G_;
    mirror_lower(G);
    upper_stale_ = false;
  }
  return G_;
}

void LayerStats::keep_inputs(const at::Tensor& cols) {
  const at::Tensor c = cols.to(options_.device());
  if (G_.defined()) {  // a rank that reduced them to another holds none
    G_ = gram().index_select(0, c).index_select(1, c).contiguous();
    sum_ = sum_.index_select(0, c);
    sequence_sq_ = sequence_sq_.index_select(0, c);
  }
  in_ = c.numel();
  shared_ = std::make_shared<prune::SharedFactors>();
}

void LayerStats::reduce_to(dist::Group& group, int owner, const std::string& what) {
  if (group.size() == 1 || owner == owner_) return;
  if (owner_ >= 0 && group.rank() != owner_) {  // summed into another rank before: the others add nothing to it
    G_ = at::zeros({in_, in_}, options_);
    sum_ = at::zeros({in_}, options_.dtype(at::kDouble));
    sequence_sq_ = at::zeros_like(sum_);
    T_ = S_ = 0;
  }
  // The whole of G goes (add() fills its lower triangle; packing one would cost a copy of its own); the owner's
  // upper triangle is mirrored from the summed lower one when it is read.
  group.reduce_sum(G_, owner, what);
  group.reduce_sum(sum_, owner, what);
  group.reduce_sum(sequence_sq_, owner, what);
  at::Tensor counts = at::tensor({T_, S_}, at::kLong);
  group.reduce_sum(counts, owner, what);
  if (group.rank() == owner) {
    T_ = counts[0].item<int64_t>();
    S_ = counts[1].item<int64_t>();
    upper_stale_ = true;
  } else {
    G_ = at::Tensor();
    sum_ = sequence_sq_ = at::Tensor();
    T_ = S_ = 0;
  }
  owner_ = owner;
}

void LayerStats::share_among(dist::Group& members, const std::string& what) {
  if (members.size() == 1) return;
  if (members.rank() != 0) {  // reduce_to freed them here
    G_ = at::empty({in_, in_}, options_);
    sum_ = at::empty({in_}, options_.dtype(at::kDouble));
    sequence_sq_ = at::empty_like(sum_);
  }
  members.broadcast(G_, 0, what);  // the lower triangle holds the sum; the upper is mirrored when read
  members.broadcast(sum_, 0, what);
  members.broadcast(sequence_sq_, 0, what);
  at::Tensor counts = at::tensor({T_, S_}, at::kLong);
  members.broadcast(counts, 0, what);
  T_ = counts[0].item<int64_t>();
  S_ = counts[1].item<int64_t>();
  upper_stale_ = true;
}

at::Tensor LayerStats::mean() const {
  return T_ > 0 ? (sum_ / static_cast<double>(T_)).to(at::kFloat) : at::zeros_like(sum_, at::kFloat);
}

at::Tensor LayerStats::sequence_mean_sq() const {
  return T_ > 0 ? sequence_sq_ / static_cast<double>(T_) : at::zeros_like(sequence_sq_);
}

BlockStats::BlockStats(c10::Device device, c10::ScalarType dtype) : device_(device), dtype_(dtype) {}

void BlockStats::observe(const std::string& linear, const at::Tensor& input) {
  // Holding the previous input keeps its memory alive, so an equal data pointer really is the same activations
  // (not a freed buffer the allocator handed out again).
  // Empty inputs (an expert no token chose) all point nowhere: only the very tensor is the same one.
  const bool same_input = last_input_.defined() && input.data_ptr() == last_input_.data_ptr() &&
                          input.sizes() == last_input_.sizes() &&
                          (input.numel() > 0 || input.unsafeGetTensorImpl() == last_input_.unsafeGetTensorImpl());
  auto it = group_of_.find(linear);
  if (it == group_of_.end()) {
    if (!same_input) {
      groups_.push_back(std::make_unique<LayerStats>(input.size(-1), device_, dtype_));
      last_group_ = groups_.size() - 1;
      groups_.back()->add(input);
    } else {
      groups_[last_group_]->shared_factors()->users += 1;
    }
    group_of_[linear] = last_group_;
  } else if (!same_input || it->second != last_group_) {
    last_group_ = it->second;
    groups_[last_group_]->add(input);
  }
  last_input_ = input;
}

void BlockStats::end_forward() { last_input_ = at::Tensor(); }

LayerStats& BlockStats::at(const std::string& linear) {
  return const_cast<LayerStats&>(static_cast<const BlockStats&>(*this).at(linear));
}

const LayerStats& BlockStats::at(const std::string& linear) const {
  auto it = group_of_.find(linear);
  ALPS_CHECK(it != group_of_.end(), "no calibration statistics were collected for '", linear,
             "' (the block forward never called the observer for it)");
  return *groups_[it->second];
}

std::vector<LayerStats*> BlockStats::inputs(const std::vector<std::string>& linears) {
  std::vector<LayerStats*> out;
  for (const auto& linear : linears) {
    const auto it = group_of_.find(linear);
    out.push_back(it == group_of_.end() ? nullptr : groups_[it->second].get());
  }
  return out;
}

void BlockStats::clear() {
  groups_.clear();
  group_of_.clear();
  last_input_ = at::Tensor();
}

int64_t BlockStats::bytes() const {
  int64_t b = 0;
  for (const auto& g : groups_) b += g->gram().numel() * static_cast<int64_t>(g->gram().element_size());
  return b;
}

}  // namespace alps::pipeline
