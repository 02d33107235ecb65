#pragma once
// Log-likelihood requests scored as lm-evaluation-harness 0.4.9's Hugging Face backend scores them for a causal LM:
//  - whitespace at the end of the context (Python's str.isspace characters) moves to the front of the continuation;
//  - context + continuation is encoded as one string, and the continuation's tokens are those after the
//    len(encode(context)) first ones (so a token spanning the boundary belongs to the continuation);
//  - no BOS unless asked for (then both encodings carry the tokenizer's special tokens); an empty context becomes
//    the single token BOS (EOS when the tokenizer has none);
//  - the model sees (context + continuation)[-(max_length + 1):][:-1] (left truncation), and the score is the sum
//    of the continuation tokens' log-softmax (fp32) and whether each is the argmax (is-greedy).
// Unlike lm-eval, a prefix shared by several requests' inputs (the context of a question's choices, the sentence
// before WinoGrande's blank, a passage asked about twice) is computed once: the inputs are packed as token trees.
#include <cstdint>
#include <functional>
#include <vector>

#include "alps/eval/task.h"

namespace alps::model {
class CausalLM;
}
namespace alps::tokenizer {
class Tokenizer;
}

namespace alps::eval {

struct EncodedRequest {
  std::vector<int64_t> context, continuation;
};

struct RequestScore {
  double loglikelihood = 0;  ///< sum over the continuation tokens of log p(token | everything before it)
  bool is_greedy = false;    ///< every continuation token is the argmax of its logits
};

struct LoglikelihoodOptions {
  bool add_bos = false;    ///< lm-eval's add_bos_token
  int64_t max_length = 0;  ///< tokens the model sees at most (0: the model's max_position_embeddings)
  /// Sequences per forward pass. Packed sequences are as long as the longest packed input (at least 512 tokens)
  /// and hold as many inputs as fit; requests that run whole are sorted longest first and padded on the right.
  int64_t batch_size = 1;
  /// Inputs that share a prefix compute it once, packed into sequences as token trees (the same numbers up to
  /// rounding); false scores every request's whole input, as lm-eval does.
  bool reuse_context = true;
};

/// lm-eval's encoding of one request (see above).
EncodedRequest encode_request(const tokenizer::Tokenizer& tokenizer, const Request& request, bool add_bos);

/// Whether `index` is the index at::argmax picks in `row` (the first of its largest values), `largest` being that
/// value: the scorer's is-greedy test on the CPU, where ATen's argmax costs a dozen times the row's amax.
bool is_argmax(const float* row, float largest, int64_t index);

/// What scoring cost.
struct ScoringStats {
  int64_t positions = 0;        ///< token positions run through the blocks (padding excluded)
  int64_t whole_positions = 0;  ///< what scoring every request's whole input would have run
};

/// Scores every request with `model` as it is placed; results are in the order of `requests`. `on_progress` (may
/// be empty) is called with the number of requests done after every batch; `stats` (may be null) receives the cost.
std::vector<RequestScore> score_requests(const model::CausalLM& model, const std::vector<EncodedRequest>& requests,
                                         const LoglikelihoodOptions& options,
                                         const std::function<void(int64_t)>& on_progress = {},
                                         ScoringStats* stats = nullptr);

}  // namespace alps::eval
