#pragma once
// The keys and values a forward computed, kept so that a later forward continues the same sequences (see
// CausalLM::hidden_states): decoding one token per step.
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

/// Every block's cache: a forward given one continues the sequences it holds (decoding one token per step) instead
/// of recomputing their positions.
struct KVCache {
  std::vector<BlockCache> blocks;

  /// Slots held (those of block 0, the first a forward extends).
  int64_t length() const { return blocks.empty() ? 0 : blocks.front().length(); }
};

}  // namespace alps::model
