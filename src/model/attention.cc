#include <ATen/ATen.h>
#include <ATen/record_function.h>

#include <algorithm>
#include <limits>

#include "alps/core/error.h"
#include "alps/core/parallel.h"
#include "model/architecture.h"

namespace alps::model {

at::Tensor causal_mask(int64_t seq, c10::ScalarType dtype, c10::Device device) {
  return at::full({seq, seq}, -std::numeric_limits<double>::infinity(), at::TensorOptions().dtype(dtype).device(device))
      .triu(1);
}

namespace {

// Additive mask of rows [row0, row0 + rows) against keys [col0, col0 + cols): 0 where key j may be seen by query i
// (i - window < j <= i, transformers' sliding-window mask), -inf elsewhere.
at::Tensor sliding_window_mask(int64_t row0, int64_t rows, int64_t col0, int64_t cols, int64_t window,
                               c10::ScalarType dtype, c10::Device device) {
  const at::Tensor i = at::arange(row0, row0 + rows, at::TensorOptions(at::kLong).device(device)).unsqueeze(1);
  const at::Tensor j = at::arange(col0, col0 + cols, at::TensorOptions(at::kLong).device(device)).unsqueeze(0);
  const at::Tensor hidden = (j > i).logical_or(j <= i - window);
  return at::zeros({rows, cols}, at::TensorOptions(dtype).device(device))
      .masked_fill_(hidden, -std::numeric_limits<double>::infinity());
}

// Row softmax of fp32 scores, in place. On the CPU the rows are split over alps's threads: libtorch's own pool
// stays at one thread beside the BLAS threads (core/threads.h), and the softmax is the largest elementwise step of
// a forward pass.
at::Tensor softmax_in_place(at::Tensor& scores) {
  if (!scores.is_cpu()) return at::_softmax_out(scores, scores, -1, false);
  const int64_t n = scores.size(-1), rows = scores.numel() / std::max<int64_t>(n, 1);
  const at::Tensor flat = scores.view({rows, n});
  parallel_chunks(rows, parallel_threads(scores.numel()), [&](int64_t r0, int64_t r1, int) {
    if (r1 > r0) {
      at::Tensor part = flat.narrow(0, r0, r1 - r0);
      at::_softmax_out(part, part, -1, false);
    }
  });
  return scores;
}

}  // namespace

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale, int64_t chunk,
                            int64_t window, int64_t past, const at::Tensor& hidden_keys, int64_t max_scores) {
  RECORD_USER_SCOPE("alps::causal_attention");
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3), KV = k.size(1), S = k.size(2);
  ALPS_CHECK(S == past + T, "attention: ", S, " keys for ", past, " cached and ", T, " new positions");
  ALPS_CHECK(!hidden_keys.defined() || window == 0 || S <= window,
             "attention: a sliding window over padded sequences is not supported");
  const int64_t rep = H / KV;
  // Query head h = g * rep + r reads KV head g (transformers' repeat_kv order): [B, H, T, D] viewed as
  // [B, KV, rep, T, D] lines each group's queries up against its own K and V without copying K or V.
  const at::Tensor q5 = q.contiguous().view({B, KV, rep, T, D});
  const at::Tensor kt = k.transpose(-1, -2);  // [B, KV, D, S]
  at::Tensor out = at::empty({B, KV, rep, T, D}, q.options());
  // Work in steps of (sequences, KV groups, query chunk) whose score block stays under `max_scores` elements:
  // ~24 MB, below glibc's largest mmap threshold, so the buffer is reused instead of being mapped and page-faulted
  // afresh for every step. Query chunks come first: a chunk ending at query position e only needs keys [0, e), so
  // most of the masked half of the T x T scores is never computed, and only the diagonal block needs the mask. The
  // chunk is as long as the budget allows up to 512 rows (the masked work left is then 1/8 of a 2048-token
  // window); the groups and sequences that fit beside it share one batched product. Large products keep the
  // BLAS threads busy; many small ones (64-row chunks over all heads) ran at a sixth of the sgemm rate.
  const int64_t budget = max_scores > 0 ? max_scores : int64_t{6} << 20;
  const int64_t len_max = chunk > 0 ? chunk : std::clamp<int64_t>(budget / std::max<int64_t>(1, rep * S), 64, 512);
  const int64_t step_scores = rep * std::min(len_max, T) * S;
  const int64_t groups = std::clamp<int64_t>(budget / std::max<int64_t>(1, step_scores), 1, KV);
  const int64_t seqs = groups < KV ? 1 : std::clamp<int64_t>(budget / std::max<int64_t>(1, KV * step_scores), 1, B);
  // A sliding window only matters once some query has more than `window` keys before it.
  const bool slide = window > 0 && S > window;
  const auto dtype = q.scalar_type();
  for (int64_t b = 0; b < B; b += seqs) {
    const int64_t bn = std::min(seqs, B - b);
    for (int64_t g = 0; g < KV; g += groups) {
      const int64_t gn = std::min(groups, KV - g);
      const at::Tensor qg = q5.narrow(0, b, bn).narrow(1, g, gn), kg = kt.narrow(0, b, bn).narrow(1, g, gn),
                       vg = v.narrow(0, b, bn).narrow(1, g, gn);
      at::Tensor og = out.narrow(0, b, bn).narrow(1, g, gn);
      for (int64_t s = 0; s < T; s += len_max) {
        // Rows s..e-1 hold query positions past + s .. past + e - 1.
        const int64_t len = std::min(len_max, T - s), e = past + s + len;
        // Keys [k0, e): with a sliding window, those before the first row's window are never seen by the chunk.
        const int64_t k0 = slide ? std::max<int64_t>(0, past + s - window + 1) : 0, n = e - k0;
        at::Tensor scores = at::matmul(qg.narrow(3, s, len).reshape({bn, gn, rep * len, D}), kg.narrow(-1, k0, n));
        scores.mul_(scale);
        const at::Tensor rows = scores.view({bn, gn, rep, len, n});
        if (slide)
          rows.add_(sliding_window_mask(past + s, len, k0, n, window, dtype, scores.device()));
        else  // k0 = 0: the last len keys are the chunk's own positions
          rows.narrow(-1, n - len, len).add_(causal_mask(len, dtype, scores.device()));
        if (hidden_keys.defined())
          scores.masked_fill_(hidden_keys.narrow(0, b, bn).narrow(1, k0, n).view({bn, 1, 1, n}),
                              -std::numeric_limits<double>::infinity());
        // Softmax in fp32 even for half compute, as transformers does; in place for fp32.
        const at::Tensor probs =
            dtype == at::kFloat ? softmax_in_place(scores) : at::softmax(scores, -1, at::kFloat).to(dtype);
        og.narrow(3, s, len).copy_(at::matmul(probs, vg.narrow(2, k0, n)).view({bn, gn, rep, len, D}));
      }
    }
  }
  return out.view({B, H, T, D}).transpose(1, 2).reshape({B, T, H * D});
}

std::pair<at::Tensor, at::Tensor> extend_cache(BlockCache* cache, at::Tensor keys, at::Tensor values) {
  if (cache == nullptr) return {std::move(keys), std::move(values)};
  if (cache->keys.defined()) {
    keys = at::cat({cache->keys, keys}, 2);
    values = at::cat({cache->values, values}, 2);
  }
  cache->keys = keys;
  cache->values = values;
  return {std::move(keys), std::move(values)};
}

at::Tensor apply_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return bias.defined() ? at::linear(x, weight, bias) : at::matmul(x, weight.t());
}

}  // namespace alps::model
