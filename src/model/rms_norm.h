#pragma once
// RMSNorm as transformers computes it: x normalised in fp32 by the root mean square of its last dimension, then
// scaled by the weight as the family does (NormScale: LLaMA casts back before the product, OLMo 2 and Gemma after).
#include <ATen/core/Tensor.h>

#include "alps/model/config.h"

namespace alps::model {

/// x [..., n], weight [n]. On the CPU in fp32 one pass reads each row twice (its sum of squares, in fp64, then the
/// scaled output) where the ATen form makes six passes; the two differ only in how the mean of squares rounds.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps, NormScale scale = NormScale::weight);

}  // namespace alps::model
