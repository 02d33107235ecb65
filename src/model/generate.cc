#include "alps/model/generate.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <cmath>
#include <string>

#include "alps/core/error.h"
#include "alps/core/log.h"
#include "alps/model/kv_cache.h"

namespace alps::model {

double Generation::decode_tokens_per_second() const {
  const auto steps = static_cast<int64_t>(ids.size());
  return steps > 1 ? static_cast<double>(steps - 1) / (seconds - first_token_seconds) : 0.0;
}

Generation greedy_decode(const CausalLM& m, const std::vector<int64_t>& prompt, const GreedyOptions& options) {
  ALPS_CHECK(!prompt.empty(), "generate: an empty prompt (start from BOS)");
  const int64_t max_length = m.config().max_sequence_length();
  const int64_t room = max_length - static_cast<int64_t>(prompt.size());
  ALPS_CHECK(options.max_tokens == 0 || room >= 1, "the prompt is ", prompt.size(), " tokens and the model has ",
             max_length, " positions (max_position_embeddings in ", (m.dir() / "config.json").string(),
             "): no room for a new token; shorten the prompt");
  if (options.max_tokens > 0 && room < options.max_tokens)
    spdlog::warn("the prompt is {} tokens of the model's {} positions: at most {} new tokens, not {}", prompt.size(),
                 max_length, room, options.max_tokens);
  at::NoGradGuard no_grad;
  std::vector<int64_t> ids = prompt;
  Generation g;
  const auto start = std::chrono::steady_clock::now();
  KVCache cache;
  for (int64_t t = 0; t < options.max_tokens && static_cast<int64_t>(ids.size()) < max_length; ++t) {
    const int64_t n = static_cast<int64_t>(ids.size());
    if (!m.cache_exact(n)) cache = KVCache{};  // positions whose encoding changes with the length
    const std::vector<int64_t> fresh(ids.begin() + cache.length(), ids.end());
    const at::Tensor logits = m.forward(at::tensor(fresh, at::kLong).unsqueeze(0), &cache, true)[0][0];
    // argmax over NaN logits picks an arbitrary token; refuse instead of printing plausible-looking text.
    if (!at::isfinite(logits).all().item<bool>())
      m.check_finite_result(at::isnan(logits).any().item<bool>() ? NAN : INFINITY,
                            "generate: a logit of step " + std::to_string(t));
    const int64_t next = logits.argmax().item<int64_t>();
    ids.push_back(next);
    g.ids.push_back(next);
    if (t == 0) g.first_token_seconds = seconds_since(start);
    if (options.eos && next == *options.eos && !options.ignore_eos) break;
  }
  g.seconds = seconds_since(start);
  return g;
}

}  // namespace alps::model
