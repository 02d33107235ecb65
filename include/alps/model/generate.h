#pragma once
// Greedy decoding with a KV cache: each step runs only the positions the cache has not seen (the prompt first, then
// one token per step) and appends the most likely next token.
#include <cstdint>
#include <optional>
#include <vector>

#include "alps/model/causal_lm.h"

namespace alps::model {

struct GreedyOptions {
  int64_t max_tokens = 32;         ///< new tokens at most (fewer at EOS or at the model's positions)
  std::optional<int64_t> eos;      ///< stop after this token, unless ignore_eos
  bool ignore_eos = false;
};

struct Generation {
  std::vector<int64_t> ids;          ///< the new tokens
  double seconds = 0;                ///< all steps
  double first_token_seconds = 0;    ///< the prompt's forward and the first token
  /// New tokens per second after the first (each costs one position's forward); 0 with fewer than two.
  double decode_tokens_per_second() const;
};

/// Continues `prompt` (non-empty) greedily on `m` (compute device and dtype set). A prompt that leaves no position
/// free is an error (when a token is asked for); fewer free positions than max_tokens a warning. Non-finite logits
/// are an error naming the step (CausalLM::check_finite_result), never an arbitrary argmax.
Generation greedy_decode(const CausalLM& m, const std::vector<int64_t>& prompt, const GreedyOptions& options);

}  // namespace alps::model
