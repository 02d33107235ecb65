#pragma once
// Private: the fused CPU fp32 kernels (this folder), behind the interfaces whose ATen forms live one level up and
// run on every device. Each does the same arithmetic as its ATen form in fewer passes over memory; the dispatch
// (make_admm_iterates, pcg_masked, the mask functions) picks them for CPU fp32 tensors.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>

#include "prune/admm_iterates.h"
#include "prune/pcg.h"

namespace alps::prune::detail {

/// The ALPS iterates in a compact form (D and V from Z and the kept mask); Y, B0 CPU fp32 [in, out], and a pattern
/// whose cut lies strictly inside the layer.
std::unique_ptr<AdmmIterates> make_fused_cpu_iterates(const at::Tensor& Y, const at::Tensor& B0,
                                                      const Pattern& pattern);

/// The masked CG vector updates; R and keep CPU [in, out], R fp32.
std::unique_ptr<CgVectors> make_fused_cpu_cg(const at::Tensor& R, const at::Tensor& keep);

/// N:M keep mask of an fp32 score view [rows, cols] (any strides): the n largest of every m consecutive columns.
at::Tensor keep_mask_groups_cpu(const at::Tensor& score, int64_t n, int64_t m);

/// R[g, q] = sum_o max(0, V[o, q] - a[o, g]) for CPU fp32 V and a [out, groups]: RIA's assignment values
/// (ria.cc), fp32 [groups, groups].
at::Tensor relu_gain_cpu(const at::Tensor& V, const at::Tensor& a);

/// Keeps all but the `zeros` smallest entries of an fp32 score (0 < zeros < numel), ties pruned in memory order.
at::Tensor keep_largest_cpu(const at::Tensor& score, int64_t zeros);

}  // namespace alps::prune::detail
