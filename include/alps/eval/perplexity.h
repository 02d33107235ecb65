#pragma once
// Perplexity exactly as SparseGPT / Wanda / ALPS evaluate it (docs/pipeline.md): the token stream is cut into
// non-overlapping windows of `seqlen` (the tail is dropped), window i scores its seqlen-1 predicted tokens with mean
// cross-entropy l_i, and ppl = exp(sum_i l_i * seqlen / (n * seqlen)) = exp(mean_i l_i).
#include <cstdint>
#include <vector>

namespace alps::model {
class CausalLM;
}

namespace alps::eval {

struct PerplexityOptions {
  /// Tokens per window (the literature uses 2048 for OPT/LLaMA-1, 4096 for LLaMA-2).
  int64_t seqlen = 2048;
  /// Score at most this many windows (0 = all): quick checks on long datasets.
  int64_t max_windows = 0;
  /// Windows per forward pass.
  int64_t batch_size = 1;
  /// The head runs on slices of positions holding at most this many logits (memory bound; the result is the same).
  int64_t max_logits = int64_t{64} << 20;
};

struct PerplexityResult {
  int64_t windows = 0;  ///< n = min(numel / seqlen, max_windows)
  int64_t tokens = 0;   ///< n * seqlen (tokens fed to the model)
  double nll = 0;       ///< mean_i l_i, nats per predicted token
  double ppl = 0;       ///< exp(nll)
  double seconds = 0;   ///< wall time of the forward passes
  std::vector<double> window_nll;  ///< l_i per window
};

/// Runs `model` (on its compute device) over `ids`; log-softmax in fp32, sums in fp64. Errors when seqlen exceeds
/// the model's positions or `ids` holds less than one window.
PerplexityResult perplexity(const model::CausalLM& model, const std::vector<int64_t>& ids,
                            const PerplexityOptions& options);

/// Mean negative log-likelihood of ids[1:] given their prefixes, one sequence, log-softmax in fp64 (the
/// stories260K README protocol: one story at a time).
double sequence_nll(const model::CausalLM& model, const std::vector<int64_t>& ids);

}  // namespace alps::eval
