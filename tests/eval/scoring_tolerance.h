#pragma once
// How far two fp32 computations of one request's log-likelihood may differ: alps against lm-eval (another BLAS
// library), or alps against itself with other matrix shapes (a shared context, another batch).
#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "alps/eval/loglikelihood.h"
#include "alps/model/causal_lm.h"

namespace alps::eval::test_tolerance {

// A sum is known to about half an fp32 ulp of itself (lm-eval returns float() of an fp32 sum: 6e-8 |ll|), so it is
// compared to 1e-4 absolute or 2 fp32 epsilons relative (a 278-token PIQA solution scores -1209, where one ulp is
// 1.2e-4). Each token's term is a logit minus a log-sum-exp of logits, and a logit ends a chain of `chain`
// accumulated fp32 roundings (logit_chain) that two computations order differently: rounding errors of either sign
// add up like a random walk, about sqrt(chain) u |logit| (u = 2^-24), twice per term. A wrong token split or
// position shifts a term by 0.1 or more.
inline double tolerance(double ll, size_t tokens, double chain, double max_logit) {
  const double u = 5.9604645e-8;
  return std::max(1e-4, 4 * u * std::abs(ll)) + static_cast<double>(tokens) * 2 * std::sqrt(chain) * u * max_logit;
}

// The longest chain of fp32 roundings behind a logit of a T-token forward pass: per block the attention scores
// (head_dim terms), softmax and weighted values (T terms each), four projections (hidden terms), the MLP's second
// matrix (intermediate terms); then the final norm and the head.
inline double logit_chain(const model::ModelConfig& c, int64_t T) {
  return static_cast<double>(c.num_layers * (c.head_dim + 2 * T + 4 * c.hidden_size + c.intermediate_size) +
                             2 * c.hidden_size);
}

// The chain and the logits' size of the longest of `requests` (its input cut to the model's positions), from one
// forward over it: the others' logits are of the same order.
struct Scale {
  double chain = 0, max_logit = 0;
};
inline Scale scale_of(const model::CausalLM& model, const std::vector<EncodedRequest>& requests) {
  size_t longest = 0;
  for (size_t i = 0; i < requests.size(); ++i)
    if (requests[i].context.size() + requests[i].continuation.size() >
        requests[longest].context.size() + requests[longest].continuation.size())
      longest = i;
  std::vector<int64_t> ids = requests[longest].context;
  ids.insert(ids.end(), requests[longest].continuation.begin(), requests[longest].continuation.end());
  const int64_t T = std::min<int64_t>(static_cast<int64_t>(ids.size()), model.config().max_positions);
  at::NoGradGuard no_grad;
  const at::Tensor logits =
      model.forward(at::tensor(std::vector<int64_t>(ids.end() - T, ids.end()), at::kLong).unsqueeze(0));
  return {logit_chain(model.config(), T), logits.abs().max().item<double>()};
}

}  // namespace alps::eval::test_tolerance
