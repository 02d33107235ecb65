#include "mask.h"

#include <ATen/ATen.h>

namespace alps::prune::detail {

namespace {
// N:M: top-N per group of M consecutive columns of each row.
at::Tensor keep_mask_groups(const at::Tensor& score, const Pattern& pattern) {
  const int64_t out = score.size(0), in = score.size(1), m = pattern.m(), n = pattern.n();
  pattern.check_shape(out, in);
  at::Tensor grouped = score.reshape({out, in / m, m});
  at::Tensor keep = at::zeros({out, in / m, m}, score.options().dtype(at::kBool));
  if (n > 0) keep.scatter_(2, std::get<1>(grouped.topk(n, 2)), true);
  return keep.reshape({out, in});
}
}  // namespace

at::Tensor keep_largest(const at::Tensor& score, int64_t zeros) {
  const int64_t numel = score.numel();
  at::Tensor flat = score.reshape({-1});
  // topk on the smaller side: pruning 10% picks the 10% smallest, pruning 90% picks the 10% largest.
  if (zeros <= numel - zeros) {
    at::Tensor keep = at::ones({numel}, score.options().dtype(at::kBool));
    if (zeros > 0) keep.index_fill_(0, std::get<1>(flat.topk(zeros, 0, /*largest=*/false)), false);
    return keep.reshape(score.sizes());
  }
  at::Tensor keep = at::zeros({numel}, score.options().dtype(at::kBool));
  if (numel - zeros > 0) keep.index_fill_(0, std::get<1>(flat.topk(numel - zeros, 0, /*largest=*/true)), true);
  return keep.reshape(score.sizes());
}

at::Tensor keep_mask_layer(const at::Tensor& score, const Pattern& pattern) {
  if (pattern.is_n_m()) return keep_mask_groups(score, pattern);
  return keep_largest(score, pattern.zeros_total(score.size(0), score.size(1)));
}

at::Tensor keep_mask_rows(const at::Tensor& score, const Pattern& pattern) {
  if (pattern.is_n_m()) return keep_mask_groups(score, pattern);
  const int64_t out = score.size(0), in = score.size(1), zeros = pattern.zeros_per_row(in);
  at::Tensor keep = at::ones({out, in}, score.options().dtype(at::kBool));
  if (zeros > 0) keep.scatter_(1, std::get<1>(score.topk(zeros, 1, /*largest=*/false)), false);
  return keep;
}

}  // namespace alps::prune::detail
