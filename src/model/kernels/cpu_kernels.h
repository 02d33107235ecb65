#pragma once
// Private: fused CPU fp32 forms of elementwise steps of the forwards (this folder), behind interfaces whose ATen
// forms live one level up and run on every device; each does the same arithmetic in fewer passes over memory.
#include <ATen/core/Tensor.h>

namespace alps::model::detail {

/// apply_rotary (model/rotary.h) for CPU fp32 x [B, H, T, D] whose last dimension is contiguous and CPU fp32 tables
/// [B or 1, 1, T, D/2] (apply_rotary takes this form only for such shapes).
at::Tensor apply_rotary_cpu(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

/// rms_norm (model/rms_norm.h) for CPU fp32 x [..., n] and weight [n].
at::Tensor rms_norm_cpu(const at::Tensor& x, const at::Tensor& weight, double eps);

}  // namespace alps::model::detail
