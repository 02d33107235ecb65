#pragma once
// Rotary position embedding of queries or keys in transformers' rotate_half convention: x * cos + rotate_half(x) *
// sin, where the tables' two halves are equal (each angle rotates the pair x_j, x_{j + D/2}) and so are passed once.
#include <ATen/core/Tensor.h>

namespace alps::model {

/// x [B, H, T, D] (any strides), cos and sin [B or 1, 1, T, D/2] in x's dtype and on its device. The result is laid
/// out like x, as ATen's elementwise result would be, and equals x * cat(cos, cos) + rotate_half(x) * cat(sin, sin)
/// computed by ATen, to the bit on the CPU in fp32 (the same products and sums in the same order, in one pass
/// instead of six).
at::Tensor apply_rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

}  // namespace alps::model
