#pragma once
// RMSNorm as transformers' LlamaRMSNorm computes it: x normalised in fp32 by the root mean square of its last
// dimension, cast back to x's dtype, then scaled by the weight.
#include <ATen/core/Tensor.h>

namespace alps::model {

/// x [..., n], weight [n]. On the CPU in fp32 one pass reads each row twice (its sum of squares, in fp64, then the
/// scaled output) where the ATen form makes six passes; the two differ only in how the mean of squares rounds.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

}  // namespace alps::model
