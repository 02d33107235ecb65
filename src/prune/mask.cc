#include "prune/mask.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "alps/core/error.h"
#include "alps/prune/row_split.h"
#include "prune/kernels/cpu_kernels.h"
#include "prune/kernels/select_cpu.h"

namespace alps::prune::detail {

namespace {
// N:M: top-N per group of M consecutive columns of each row.
at::Tensor keep_mask_groups(const at::Tensor& score, const Pattern& pattern) {
  const int64_t out = score.size(0), in = score.size(1), m = pattern.m(), n = pattern.n();
  pattern.check_shape(out, in);
  if (score.device().is_cpu() && score.scalar_type() == at::kFloat) return keep_mask_groups_cpu(score, n, m);
  at::Tensor grouped = score.reshape({out, in / m, m});
  if (m <= 8) {
    // Rank by count (as the CPU kernel does): an entry is kept when fewer than n of its group beat it, with a
    // larger score or an equal one earlier in the group. m elementwise rounds over the layer, where topk along a
    // dimension of m entries took 22 ms per ALPS iteration at 4096x11008 on an H100, more than the iteration's
    // product; each round holds one byte per entry.
    const at::Tensor j = at::arange(m, score.options().dtype(at::kLong));
    at::Tensor beaten = at::zeros(grouped.sizes(), score.options().dtype(at::kByte));
    for (int64_t i = 0; i < m; ++i) {
      const at::Tensor a_i = grouped.narrow(2, i, 1);
      beaten.add_(a_i.gt(grouped).logical_or_(a_i.eq(grouped).logical_and_(j.gt(i))));
    }
    return beaten.lt(n).reshape({out, in});
  }
  at::Tensor keep = at::zeros({out, in / m, m}, score.options().dtype(at::kBool));
  if (n > 0) keep.scatter_(2, std::get<1>(grouped.topk(n, 2)), true);
  return keep.reshape({out, in});
}

// Exact selection through a band around a sampled quantile: everything below the band is pruned, everything
// above kept, and only the (small) band goes through topk. Returns an undefined tensor when the sample missed
// (the band does not contain the cut), and the caller falls back to a full topk. On a GPU every host read waits for
// the queue: the band's bounds stay on the device (a sorted sample, no kthvalue) and both counts come back in one
// read.
at::Tensor keep_largest_banded(const at::Tensor& flat, int64_t zeros) {
  const int64_t numel = flat.numel();
  const int64_t step = std::max<int64_t>(1, numel / (int64_t{1} << 18));
  const at::Tensor sample = std::get<0>(flat.slice(0, 0, numel, step).sort());
  const int64_t m = sample.numel();
  const double q = static_cast<double>(zeros) / static_cast<double>(numel);
  const double margin = 6.0 / std::sqrt(static_cast<double>(m));  // ~6 standard deviations of a sample quantile
  auto sample_quantile = [&](double f) {  // a 0-dim tensor on flat's device
    return sample.select(0, std::clamp<int64_t>(static_cast<int64_t>(f * static_cast<double>(m)), 0, m - 1));
  };
  at::Tensor below = q - margin <= 0 ? at::zeros_like(flat, flat.options().dtype(at::kBool))
                                     : flat.lt(sample_quantile(q - margin));
  at::Tensor up_to_hi = q + margin >= 1 ? at::ones_like(flat, flat.options().dtype(at::kBool))
                                        : flat.le(sample_quantile(q + margin));
  const at::Tensor counts = at::stack({below.sum(), up_to_hi.sum()}).to(at::kCPU);
  const int64_t n_below = counts[0].item<int64_t>(), n_up_to_hi = counts[1].item<int64_t>();
  if (n_below > zeros || n_up_to_hi < zeros) return {};
  at::Tensor keep = below.logical_not_();
  if (zeros > n_below) {
    // The band is what lies up to hi and not below lo (lo <= hi: both from one sorted sample).
    const at::Tensor band_idx = up_to_hi.logical_and_(keep).nonzero().squeeze(1);
    // Unsorted: only the set matters, and sorting a million selected values costs more than selecting them.
    at::Tensor prune =
        std::get<1>(flat.index_select(0, band_idx).topk(zeros - n_below, 0, /*largest=*/false, /*sorted=*/false));
    keep.index_fill_(0, band_idx.index_select(0, prune), false);
  }
  return keep;
}

}  // namespace

at::Tensor keep_largest(const at::Tensor& score, int64_t zeros) {
  const int64_t numel = score.numel();
  if (score.device().is_cpu() && score.scalar_type() == at::kFloat && zeros > 0 && zeros < numel)
    return keep_largest_cpu(score, zeros);
  at::Tensor flat = score.reshape({-1});
  // A full topk over a whole layer costs as much as an ADMM product; the banded selection is exact and ~5x cheaper.
  if (numel >= (int64_t{1} << 18) && zeros > 0 && zeros < numel) {
    at::Tensor keep = keep_largest_banded(flat, zeros);
    if (keep.defined()) return keep.reshape(score.sizes());
  }
  // topk on the smaller side: pruning 10% picks the 10% smallest, pruning 90% picks the 10% largest.
  if (zeros <= numel - zeros) {
    at::Tensor keep = at::ones({numel}, score.options().dtype(at::kBool));
    if (zeros > 0) keep.index_fill_(0, std::get<1>(flat.topk(zeros, 0, /*largest=*/false, /*sorted=*/false)), false);
    return keep.reshape(score.sizes());
  }
  at::Tensor keep = at::zeros({numel}, score.options().dtype(at::kBool));
  if (numel - zeros > 0)
    keep.index_fill_(0, std::get<1>(flat.topk(numel - zeros, 0, /*largest=*/true, /*sorted=*/false)), true);
  return keep.reshape(score.sizes());
}

at::Tensor keep_largest_parts(const at::Tensor& score, int64_t zeros, const RowSplit& split) {
  ALPS_CHECK(score.scalar_type() == at::kFloat, "keep_largest_parts: fp32 scores expected");
  // Non-negative floats order as their bit patterns do, read as integers (31 bits). Three levels of 11, 11 and 9
  // bits: each histograms the keys that share the bits found so far, summed over the parts (16 KB each, where two
  // levels of 16 bits would move 512 KB twice per projection).
  const at::Tensor keys = score.contiguous().reshape({-1}).view(at::kInt);
  constexpr std::array<std::pair<int, int>, 3> kLevels{{{20, 11}, {9, 11}, {0, 9}}};  // (shift, width)
  at::Tensor candidates = keys;  // the keys whose bits above the level's match the cut's
  int64_t prefix = 0, below = 0;  // the cut's bits so far; keys of all parts below them
  for (const auto& [shift, width] : kLevels) {
    const int64_t bins = int64_t{1} << width;
    if (shift != kLevels.front().first)
      candidates = candidates.masked_select(candidates.div(int64_t{1} << (shift + width), "floor").eq(prefix));
    at::Tensor h = at::bincount(candidates.div(int64_t{1} << shift, "floor").remainder(bins), {}, bins)
                       .to(at::kCPU, at::kLong)
                       .contiguous();
    split.sum(h);
    prefix = (prefix << width) | cut_digit(h.data_ptr<int64_t>(), bins, zeros, below);
  }
  // Keys below the cut are pruned; of those equal to it, the first zeros - below.
  const int64_t ties = zeros - below;
  at::Tensor keep = keys.ge(prefix);
  if (ties == 0) return keep.reshape(score.sizes());  // the same on every part: none makes the call below
  // Each part learns how many ties lie on the parts before it.
  const at::Tensor equal = keys.eq(prefix);
  const int64_t mine = equal.sum().item<int64_t>();
  at::Tensor counts = at::zeros({split.parts}, at::kLong);
  counts[split.part] = mine;
  split.sum(counts);
  const int64_t before = split.part == 0 ? 0 : counts.slice(0, 0, split.part).sum().item<int64_t>();
  const int64_t prune_here = std::clamp<int64_t>(ties - before, 0, mine);
  if (prune_here > 0) keep.index_fill_(0, equal.nonzero().squeeze(1).slice(0, 0, prune_here), false);
  return keep.reshape(score.sizes());
}

at::Tensor keep_mask_layer(const at::Tensor& score, const Pattern& pattern) {
  if (pattern.is_n_m()) return keep_mask_groups(score, pattern);
  return keep_largest(score, pattern.zeros_total(score.size(0), score.size(1)));
}

at::Tensor row_zeros(const Pattern& pattern, int64_t out, int64_t in, const at::Device& device) {
  std::vector<int64_t> z(static_cast<size_t>(out));
  for (int64_t r = 0; r < out; ++r) z[static_cast<size_t>(r)] = pattern.zeros_in_row(r, in);
  return at::tensor(z, at::kLong).to(device);
}

at::Tensor keep_mask_rows(const at::Tensor& score, const Pattern& pattern) {
  if (pattern.is_n_m()) return keep_mask_groups(score, pattern);
  const int64_t out = score.size(0), in = score.size(1);
  at::Tensor keep = at::ones({out, in}, score.options().dtype(at::kBool));
  if (pattern.spreads_rows()) {  // rows of floor(s in) zeros and of one more: each prunes its first zeros_r
    const at::Tensor zeros = row_zeros(pattern, out, in, score.device());
    const int64_t most = zeros.max().item<int64_t>();
    if (most == 0) return keep;
    const at::Tensor order = std::get<1>(score.topk(most, 1, /*largest=*/false, /*sorted=*/true));
    keep.scatter_(1, order, at::arange(most, zeros.options()).unsqueeze(0) >= zeros.unsqueeze(1));
    return keep;
  }
  const int64_t zeros = pattern.zeros_per_row(in);
  if (zeros > 0) keep.scatter_(1, std::get<1>(score.topk(zeros, 1, /*largest=*/false)), false);
  return keep;
}

}  // namespace alps::prune::detail
