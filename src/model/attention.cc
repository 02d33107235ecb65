#include <ATen/ATen.h>

#include <algorithm>
#include <limits>

#include "alps/core/error.h"
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

}  // namespace

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale, int64_t chunk,
                            int64_t window, int64_t past, const at::Tensor& hidden_keys) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3), KV = k.size(1), S = k.size(2);
  ALPS_CHECK(S == past + T, "attention: ", S, " keys for ", past, " cached and ", T, " new positions");
  ALPS_CHECK(!hidden_keys.defined() || window == 0 || S <= window,
             "attention: a sliding window over padded sequences is not supported");
  const int64_t rep = H / KV;
  // Query head h = g * rep + r reads KV head g (transformers' repeat_kv order): [B, H, T, D] viewed as
  // [B, KV, rep, T, D] lines each group's queries up against its own K and V without copying K or V.
  const at::Tensor q5 = q.contiguous().view({B, KV, rep, T, D});
  const at::Tensor kt = k.transpose(-1, -2);  // [B, KV, D, T]
  at::Tensor out = at::empty({B, KV, rep, T, D}, q.options());
  // Queries in chunks: a chunk ending at query position e only needs keys [0, e), so about half of the T x T
  // scores and softmax work is never done, and only the diagonal block needs the mask. Each chunk is one batched
  // matmul over all heads. Chunks keep a score block under ~24 MB (below glibc's largest mmap threshold, so the
  // buffer is reused instead of being mapped and page-faulted afresh for every chunk).
  const int64_t kChunk =
      chunk > 0 ? chunk : std::clamp<int64_t>((int64_t{6} << 20) / std::max<int64_t>(1, B * H * S), 64, 512);
  // A sliding window only matters once some query has more than `window` keys before it.
  const bool slide = window > 0 && S > window;
  for (int64_t s = 0; s < T; s += kChunk) {
    // Rows s..e-1 hold query positions past + s .. past + e - 1.
    const int64_t len = std::min(kChunk, T - s), e = past + s + len;
    // Keys [k0, e): with a sliding window, those before the first row's window are never seen by the chunk.
    const int64_t k0 = slide ? std::max<int64_t>(0, past + s - window + 1) : 0, n = e - k0;
    at::Tensor qc = q5.narrow(3, s, len).reshape({B, KV, rep * len, D});
    at::Tensor scores = at::matmul(qc, kt.narrow(-1, k0, n));  // [B, KV, rep*len, n]
    scores.mul_(scale);
    const auto dtype = scores.scalar_type();
    if (slide)
      scores.view({B, KV, rep, len, n})
          .add_(sliding_window_mask(past + s, len, k0, n, window, dtype, scores.device()));
    else  // k0 = 0: the last len keys are the chunk's own positions
      scores.view({B, KV, rep, len, n}).narrow(-1, n - len, len).add_(causal_mask(len, dtype, scores.device()));
    if (hidden_keys.defined())
      scores.view({B, KV, rep * len, n})
          .masked_fill_(hidden_keys.narrow(1, k0, n).view({B, 1, 1, n}), -std::numeric_limits<double>::infinity());
    // Softmax in fp32 even for half compute, as transformers does.
    at::Tensor probs = at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
    scores.reset();
    out.narrow(3, s, len).copy_(at::matmul(probs, v.narrow(2, k0, n)).view({B, KV, rep, len, D}));
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
