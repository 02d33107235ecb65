// CPU fp32 masks on whole score matrices, by the selection kernels of select_cpu.h.
#include <ATen/ATen.h>

#include "prune/kernels/cpu_kernels.h"
#include "prune/kernels/select_cpu.h"

namespace alps::prune::detail {

// N:M on the CPU straight on the fp32 score, which ALPS passes as a transposed view of its [in, out] iterates.
at::Tensor keep_mask_groups_cpu(const at::Tensor& score, int64_t n, int64_t m) {
  at::Tensor keep = at::empty_like(score, score.options().dtype(at::kBool));
  keep_top_n_of_m<false>(score.data_ptr<float>(), score.stride(0), score.stride(1), keep.data_ptr<bool>(),
                         keep.stride(0), keep.stride(1), score.size(0), score.size(1), n, m);
  return keep;
}

// CPU exact selection by radix select on the order-preserving keys (find_cut): three linear passes instead of a
// sort or topk. Keys below the cut are pruned, and of the keys equal to it the first ones in memory order, so
// exactly `zeros` go.
at::Tensor keep_largest_cpu(const at::Tensor& score, int64_t zeros) {
  at::Tensor flat = score.contiguous();
  const int64_t numel = flat.numel();
  const float* z = flat.data_ptr<float>();
  std::vector<int64_t> hist(65536, 0);
  for (int64_t i = 0; i < numel; ++i) ++hist[float_key(z[i]) >> 16];
  auto key_at = [z](int64_t i) { return float_key(z[i]); };
  const KeyCut cut = find_cut(hist, numel, zeros, key_at);
  at::Tensor keep = at::empty(score.sizes(), score.options().dtype(at::kBool));
  bool* k = keep.data_ptr<bool>();
  for (int64_t i = 0; i < numel; ++i) k[i] = key_at(i) >= cut.key;
  prune_ties(k, numel, cut, key_at);
  return keep;
}

}  // namespace alps::prune::detail
