#pragma once
// Private: top-k masks shared by the methods. Every mask is [out, in] bool, true = kept. On the CPU in fp32 they run
// the selection kernels of kernels/select_cpu.h; elsewhere ATen's topk.
#include <ATen/core/Tensor.h>

#include <cstdint>

#include "alps/prune/pattern.h"

namespace alps::prune {
struct RowSplit;
}

namespace alps::prune::detail {

/// Keeps the largest `score` entries: N:M per group of M along a row, otherwise
/// numel - pattern.zeros_total(out, in) across the whole matrix.
at::Tensor keep_mask_layer(const at::Tensor& score, const Pattern& pattern);
/// The per-row rule's zeros of each row, pattern.zeros_in_row, as a [out] int64 tensor on `device`.
at::Tensor row_zeros(const Pattern& pattern, int64_t out, int64_t in, const at::Device& device);
/// Like keep_mask_layer but for unstructured prunes pattern.zeros_in_row(r, in) in row r.
at::Tensor keep_mask_rows(const at::Tensor& score, const Pattern& pattern);
/// Keeps the largest entries of a flat tensor, dropping exactly `zeros` of them (bool, same shape).
at::Tensor keep_largest(const at::Tensor& score, int64_t zeros);
/// The same selection across the parts of a split layer (alps/prune/row_split.h): `score` (fp32, >= 0, any device)
/// is this part's, `zeros` the whole layer's count. A radix select on the scores' bits whose histograms are summed
/// over the parts: every part finds the same cut. Of the scores equal to the
/// cut, the parts prune the first ones in part order, then in memory order.
at::Tensor keep_largest_parts(const at::Tensor& score, int64_t zeros, const RowSplit& split);

}  // namespace alps::prune::detail
