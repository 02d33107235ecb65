#include "alps/model/kv_cache.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "alps/core/error.h"

namespace alps::model {

void KVCache::pad_to(const at::Tensor& lengths) {
  ALPS_CHECK(lengths.dim() == 1 && !blocks.empty() && lengths.size(0) == blocks.front().keys.size(0),
             "KV cache: expected one length per cached sequence");
  const at::Tensor n = lengths.to(blocks.front().keys.device(), at::kLong);
  ALPS_CHECK(n.numel() == 0 || (n.min().item<int64_t>() >= 1 && n.max().item<int64_t>() <= length()),
             "KV cache: sequence lengths must lie in [1, ", length(), "]");
  next_position = n;
  hidden_keys = at::arange(length(), n.options()).unsqueeze(0) >= n.unsqueeze(1);
}

KVCache KVCache::select_rows(const at::Tensor& rows) const {
  KVCache out;
  if (blocks.empty()) return out;
  // Every tensor of a cache lives on the compute device: the index goes there once.
  const at::Tensor r = rows.to(blocks.front().keys.device(), at::kLong);
  for (const BlockCache& b : blocks) out.blocks.push_back({b.keys.index_select(0, r), b.values.index_select(0, r)});
  if (next_position.defined()) out.next_position = next_position.index_select(0, r);
  if (hidden_keys.defined()) out.hidden_keys = hidden_keys.index_select(0, r);
  return out;
}

KVCache KVCache::concat(const std::vector<KVCache>& parts) {
  ALPS_CHECK(!parts.empty(), "KV cache: nothing to concatenate");
  int64_t width = 0;
  bool ragged = false;
  for (const KVCache& p : parts) {
    ALPS_CHECK(p.blocks.size() == parts.front().blocks.size() && p.length() > 0,
               "KV cache: only filled caches of one model concatenate");
    ragged = ragged || p.hidden_keys.defined() || p.next_position.defined() || p.length() != parts.front().length();
    width = std::max(width, p.length());
  }
  KVCache out;
  for (size_t b = 0; b < parts.front().blocks.size(); ++b) {
    std::vector<at::Tensor> keys, values;
    for (const KVCache& p : parts) {
      const BlockCache& c = p.blocks[b];
      const int64_t pad = width - c.length();
      keys.push_back(pad > 0 ? at::constant_pad_nd(c.keys, {0, 0, 0, pad}) : c.keys);
      values.push_back(pad > 0 ? at::constant_pad_nd(c.values, {0, 0, 0, pad}) : c.values);
    }
    out.blocks.push_back({at::cat(keys), at::cat(values)});
  }
  if (ragged) {
    std::vector<at::Tensor> next, hidden;
    for (const KVCache& p : parts) {
      const at::TensorOptions on = at::TensorOptions(p.blocks.front().keys.device());
      const int64_t rows = p.blocks.front().keys.size(0), pad = width - p.length();
      next.push_back(p.next_position.defined() ? p.next_position
                                               : at::full({rows}, p.length(), on.dtype(at::kLong)));
      at::Tensor h = p.hidden_keys.defined() ? p.hidden_keys : at::zeros({rows, p.length()}, on.dtype(at::kBool));
      hidden.push_back(pad > 0 ? at::cat({h, at::ones({rows, pad}, h.options())}, 1) : h);
    }
    out.next_position = at::cat(next);
    out.hidden_keys = at::cat(hidden);
  }
  return out;
}

}  // namespace alps::model
