#include "alps/eval/loglikelihood.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <numeric>

#include "alps/core/error.h"
#include "alps/eval/py_text.h"
#include "alps/model/causal_lm.h"
#include "alps/tokenizer/tokenizer.h"

namespace alps::eval {

EncodedRequest encode_request(const tokenizer::Tokenizer& tokenizer, const Request& request, bool add_bos) {
  EncodedRequest out;
  if (request.context.empty()) {
    const auto prefix = tokenizer.bos_id() ? tokenizer.bos_id() : tokenizer.eos_id();
    ALPS_CHECK(prefix.has_value(), "an empty context needs a BOS or EOS token, and the tokenizer has neither");
    out.context = {*prefix};
    out.continuation = tokenizer.encode(request.continuation, add_bos);
    return out;
  }
  const std::string_view context = py_rstrip(request.context);
  const std::string continuation = request.context.substr(context.size()) + request.continuation;
  const std::vector<int64_t> whole = tokenizer.encode(std::string(context) + continuation, add_bos);
  out.context = tokenizer.encode(context, add_bos);
  const size_t n = std::min(out.context.size(), whole.size());
  out.continuation.assign(whole.begin() + static_cast<std::ptrdiff_t>(n), whole.end());
  return out;
}

std::vector<RequestScore> score_requests(const model::CausalLM& model, const std::vector<EncodedRequest>& requests,
                                         const LoglikelihoodOptions& options,
                                         const std::function<void(int64_t)>& on_progress) {
  const int64_t max_length = options.max_length > 0 ? options.max_length : model.config().max_positions;
  ALPS_CHECK(max_length >= 1, "max length must be at least 1, got ", max_length);
  ALPS_CHECK(options.batch_size >= 1, "batch size must be at least 1, got ", options.batch_size);
  const int64_t n = static_cast<int64_t>(requests.size());
  for (int64_t i = 0; i < n; ++i) {
    const EncodedRequest& r = requests[i];
    ALPS_CHECK(!r.context.empty(), "request ", i, ": the context encodes to no tokens");
    ALPS_CHECK(!r.continuation.empty(), "request ", i, ": the continuation encodes to no tokens");
    ALPS_CHECK(static_cast<int64_t>(r.continuation.size()) <= max_length, "request ", i, ": the continuation's ",
               r.continuation.size(), " tokens exceed the maximum length ", max_length);
  }
  // Longest first, so that a batch pads little and the first batch shows the peak memory.
  std::vector<int64_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  auto total = [&](int64_t i) { return requests[i].context.size() + requests[i].continuation.size(); };
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return total(a) > total(b); });

  std::vector<RequestScore> out(n);
  at::NoGradGuard no_grad;
  const c10::Device device = model.compute_device();
  for (int64_t b0 = 0; b0 < n; b0 += options.batch_size) {
    const int64_t b = std::min(options.batch_size, n - b0);
    std::vector<std::vector<int64_t>> inputs(b);
    int64_t width = 0;
    for (int64_t k = 0; k < b; ++k) {
      const EncodedRequest& r = requests[order[b0 + k]];
      std::vector<int64_t> all = r.context;
      all.insert(all.end(), r.continuation.begin(), r.continuation.end());
      const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(all.size()) - (max_length + 1));
      inputs[k].assign(all.begin() + start, all.end() - 1);
      width = std::max<int64_t>(width, static_cast<int64_t>(inputs[k].size()));
    }
    // Right padding: with causal attention no real position sees a pad, so the pad id does not matter.
    at::Tensor ids = at::zeros({b, width}, at::kLong);
    auto acc = ids.accessor<int64_t, 2>();
    for (int64_t k = 0; k < b; ++k)
      for (size_t t = 0; t < inputs[k].size(); ++t) acc[k][static_cast<int64_t>(t)] = inputs[k][t];
    at::Tensor h = model.embed(ids.to(device));
    for (int64_t i = 0; i < model.num_blocks(); ++i) h = model.block_forward(i, h);
    // Only the continuation positions go through the head: [sum of continuation lengths, hidden].
    std::vector<at::Tensor> rows;
    std::vector<int64_t> targets;
    for (int64_t k = 0; k < b; ++k) {
      const EncodedRequest& r = requests[order[b0 + k]];
      const int64_t inplen = static_cast<int64_t>(inputs[k].size()),
                    contlen = static_cast<int64_t>(r.continuation.size());
      rows.push_back(h[k].narrow(0, inplen - contlen, contlen));
      targets.insert(targets.end(), r.continuation.begin(), r.continuation.end());
    }
    at::Tensor logp = at::log_softmax(model.head(at::cat(rows).unsqueeze(0))[0].to(at::kFloat), -1);
    at::Tensor target = at::tensor(targets, at::kLong).to(logp.device());
    at::Tensor token_ll = logp.gather(1, target.unsqueeze(1)).squeeze(1).to(at::kDouble).cpu();
    at::Tensor hit = (logp.argmax(-1) == target).cpu();
    auto ll = token_ll.accessor<double, 1>();
    auto greedy = hit.accessor<bool, 1>();
    int64_t pos = 0;
    for (int64_t k = 0; k < b; ++k) {
      RequestScore& s = out[order[b0 + k]];
      s.is_greedy = true;
      for (size_t t = 0; t < requests[order[b0 + k]].continuation.size(); ++t, ++pos) {
        s.loglikelihood += ll[pos];
        s.is_greedy = s.is_greedy && greedy[pos];
      }
    }
    if (on_progress) on_progress(b0 + b);
  }
  return out;
}

}  // namespace alps::eval
