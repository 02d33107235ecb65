#pragma once
// The keys and values a forward computed, kept so that a later forward continues the same sequences (see
// CausalLM::hidden_states): decoding one token per step, or scoring several continuations of one context.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

namespace alps::model {

/// One block's keys and values for the positions already seen: [batch, kv_heads, length, head_dim] each, keys with
/// their position encoding applied. Undefined before the first forward.
struct BlockCache {
  at::Tensor keys, values;
  int64_t length() const { return keys.defined() ? keys.size(2) : 0; }
};

/// Every block's cache: a forward given one continues the sequences it holds (decoding one token per step, or
/// scoring several continuations of one context) instead of recomputing their positions. Sequences of different
/// lengths share one batch padded on the right: after pad_to(lengths), each continues at its own length and no
/// later position sees its padding.
struct KVCache {
  std::vector<BlockCache> blocks;
  /// [batch] int64: the position of each sequence's next token. Undefined: length() for every sequence.
  at::Tensor next_position;
  /// [batch, length()] bool: cached keys that no later position sees (padding). Undefined: none.
  at::Tensor hidden_keys;

  /// Slots held (those of block 0, the first a forward extends).
  int64_t length() const { return blocks.empty() ? 0 : blocks.front().length(); }
  /// Declares sequence b to be `lengths[b]` tokens long: its slots from there to length() are padding.
  void pad_to(const at::Tensor& lengths);
  /// The sequences `rows` (int64 indices into the batch, repeats allowed) of every block.
  KVCache select_rows(const at::Tensor& rows) const;
  /// The sequences of `parts` one after another in one batch; shorter caches are padded on the right.
  static KVCache concat(const std::vector<KVCache>& parts);
};

}  // namespace alps::model
