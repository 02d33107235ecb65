#include "alps/eval/perplexity.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <algorithm>
#include <cmath>

#include "alps/core/error.h"
#include "alps/core/log.h"
#include "alps/model/causal_lm.h"
#include "cache_rows.h"

namespace alps::eval {

PerplexityResult perplexity(const model::CausalLM& model, const std::vector<int64_t>& ids,
                            const PerplexityOptions& options) {
  const int64_t seqlen = options.seqlen, positions = model.config().max_positions, vocab = model.config().vocab_size;
  ALPS_CHECK(seqlen >= 2, "perplexity: seqlen must be at least 2, got ", seqlen);
  ALPS_CHECK(seqlen <= model.config().max_sequence_length(), "perplexity: seqlen ", seqlen, " exceeds the model's ",
             positions, " positions (max_position_embeddings)");
  ALPS_CHECK(options.batch_size >= 1, "perplexity: batch size must be at least 1, got ", options.batch_size);
  int64_t n = static_cast<int64_t>(ids.size()) / seqlen;  // the tail after the last full window is dropped
  ALPS_CHECK(n > 0, "perplexity: ", ids.size(), " tokens are fewer than one window of ", seqlen);
  if (options.max_windows > 0) n = std::min(n, options.max_windows);

  PerplexityResult r;
  r.windows = n;
  r.tokens = n * seqlen;
  const auto start = std::chrono::steady_clock::now();
  at::Tensor all = at::tensor(ids, at::kLong).narrow(0, 0, n * seqlen).view({n, seqlen});
  Progress progress("perplexity windows", n, /*min_interval=*/5.0);
  at::NoGradGuard no_grad;
  for (int64_t w0 = 0; w0 < n; w0 += options.batch_size) {
    const int64_t b = std::min(options.batch_size, n - w0);
    at::Tensor x = all.narrow(0, w0, b).to(model.compute_device());
    at::Tensor h = model.embed(x);
    for (int64_t i = 0; i < model.num_blocks(); ++i) h = model.block_forward(i, h);
    // The head runs on slices of positions (it is per position): [b, rows, vocab] logits stay within max_logits
    // (256 MiB) instead of b * seqlen * vocab floats (400 MB for each OPT window of the batch).
    const int64_t rows = std::max<int64_t>(1, options.max_logits / (b * vocab));
    at::Tensor nll_sum = at::zeros({b}, at::TensorOptions().dtype(at::kDouble).device(x.device()));
    for (int64_t s = 0; s < seqlen - 1; s += rows) {
      const int64_t len = std::min(rows, seqlen - 1 - s);
      const at::Tensor logits = model.head(h.narrow(1, s, len)).reshape({b * len, vocab});  // fp32
      const at::Tensor target = x.narrow(1, s + 1, len).reshape({b * len, 1});
      // -log softmax(z)_y = logsumexp(z) - z_y, in fp32 without materialising the log-softmax; on the CPU a few
      // rows at a time (cache_rows).
      at::Tensor nll = at::empty({b * len}, logits.options());
      const int64_t k = logits.is_cpu() ? cache_rows(vocab) : b * len;
      for (int64_t r0 = 0; r0 < b * len; r0 += k) {
        const at::Tensor z = logits.narrow(0, r0, std::min(k, b * len - r0));
        const at::Tensor y = target.narrow(0, r0, z.size(0));
        nll.narrow(0, r0, z.size(0)).copy_(z.logsumexp(-1) - z.gather(-1, y).squeeze(-1));
      }
      nll_sum += nll.view({b, len}).to(at::kDouble).sum(1);
    }
    at::Tensor l = (nll_sum / static_cast<double>(seqlen - 1)).cpu();
    for (int64_t i = 0; i < b; ++i) {
      r.window_nll.push_back(l[i].item<double>());
      // A NaN would otherwise come out as a perplexity of nan with success.
      model.check_finite_result(r.window_nll.back(), "perplexity: the loss of window " + std::to_string(w0 + i));
    }
    progress.step(w0 + b, "");
  }
  double sum = 0;
  for (double l : r.window_nll) sum += l * static_cast<double>(seqlen);
  r.nll = sum / static_cast<double>(n * seqlen);
  r.ppl = std::exp(r.nll);
  r.seconds = seconds_since(start);
  return r;
}

double sequence_nll(const model::CausalLM& model, const std::vector<int64_t>& ids) {
  ALPS_CHECK(ids.size() >= 2, "sequence_nll: need at least 2 tokens, got ", ids.size());
  at::NoGradGuard no_grad;
  const int64_t n = static_cast<int64_t>(ids.size()) - 1;
  at::Tensor x = at::tensor(ids, at::kLong).unsqueeze(0);
  at::Tensor logp = at::log_softmax(model.forward(x)[0].narrow(0, 0, n).to(at::kDouble), -1);
  at::Tensor target = x[0].narrow(0, 1, n).to(logp.device()).unsqueeze(1);
  const double nll = -logp.gather(1, target).mean().item<double>();
  model.check_finite_result(nll, "sequence_nll");
  return nll;
}

}  // namespace alps::eval
