#include "alps/eval/loglikelihood.h"

#include <ATen/ATen.h>
#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <map>
#include <utility>

#include "alps/core/error.h"
#include "alps/core/py_text.h"
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

namespace {

// Scores of one batch: `rows` [n, hidden] are final hidden states whose head predicts `targets`; request
// `requests[k]` owns the next `counts[k]` of them.
void accumulate(const model::CausalLM& model, const std::vector<at::Tensor>& rows, const std::vector<int64_t>& targets,
                const std::vector<int64_t>& requests, const std::vector<int64_t>& counts,
                std::vector<RequestScore>& out) {
  const at::Tensor hidden = at::cat(rows);  // [n, hidden]
  const at::Tensor target = at::tensor(targets, at::kLong).to(hidden.device());
  // The head runs on slices of about 32 MB of logits: a batch's [n, vocab] log-probabilities at once were hundreds
  // of MB (a batch of 128 HellaSwag continuations: 630 MB, twice), whose fresh pages cost more than the head.
  const int64_t n = hidden.size(0), slice = std::max<int64_t>(1, (int64_t{8} << 20) / model.config().vocab_size);
  std::vector<at::Tensor> lls, hits;
  for (int64_t r0 = 0; r0 < n; r0 += slice) {
    const int64_t len = std::min(slice, n - r0);
    const at::Tensor logp = at::log_softmax(model.head(hidden.narrow(0, r0, len).unsqueeze(0))[0].to(at::kFloat), -1);
    const at::Tensor t = target.narrow(0, r0, len);
    lls.push_back(logp.gather(1, t.unsqueeze(1)).squeeze(1));
    hits.push_back(logp.argmax(-1) == t);
  }
  at::Tensor token_ll = at::cat(lls).to(at::kDouble).cpu();
  at::Tensor hit = at::cat(hits).cpu();
  auto ll = token_ll.accessor<double, 1>();
  auto greedy = hit.accessor<bool, 1>();
  int64_t pos = 0;
  for (size_t k = 0; k < requests.size(); ++k) {
    RequestScore& s = out[static_cast<size_t>(requests[k])];
    s.is_greedy = true;
    for (int64_t t = 0; t < counts[k]; ++t, ++pos) {
      s.loglikelihood += ll[pos];
      s.is_greedy = s.is_greedy && greedy[pos];
    }
  }
}

// [rows, width] int64 ids, each row right-padded with 0: under causal attention no real position sees a pad, so
// the pad id does not matter.
at::Tensor padded_ids(const std::vector<std::vector<int64_t>>& rows) {
  size_t width = 0;
  for (const auto& r : rows) width = std::max(width, r.size());
  at::Tensor ids = at::zeros({static_cast<int64_t>(rows.size()), static_cast<int64_t>(width)}, at::kLong);
  auto acc = ids.accessor<int64_t, 2>();
  for (size_t k = 0; k < rows.size(); ++k)
    for (size_t t = 0; t < rows[k].size(); ++t) acc[static_cast<int64_t>(k)][static_cast<int64_t>(t)] = rows[k][t];
  return ids;
}

// The input lm-eval gives the model: (context + continuation)[-(max_length + 1):][:-1].
std::vector<int64_t> model_input(const EncodedRequest& r, int64_t max_length) {
  std::vector<int64_t> all = r.context;
  all.insert(all.end(), r.continuation.begin(), r.continuation.end());
  const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(all.size()) - (max_length + 1));
  return {all.begin() + start, all.end() - 1};
}

// Every request on its own: the model reads its whole input.
void score_whole(const model::CausalLM& model, const std::vector<EncodedRequest>& requests,
                 const std::vector<int64_t>& order, int64_t max_length, int64_t batch_size,
                 std::vector<RequestScore>& out, const std::function<void(int64_t)>& done) {
  const int64_t n = static_cast<int64_t>(order.size());
  for (int64_t b0 = 0; b0 < n; b0 += batch_size) {
    const int64_t b = std::min(batch_size, n - b0);
    const std::vector<int64_t> batch(order.begin() + b0, order.begin() + b0 + b);
    std::vector<std::vector<int64_t>> inputs;
    for (int64_t r : batch) inputs.push_back(model_input(requests[static_cast<size_t>(r)], max_length));
    const at::Tensor h = model.hidden_states(padded_ids(inputs).to(model.compute_device()));
    // Only the continuation positions go through the head.
    std::vector<at::Tensor> rows;
    std::vector<int64_t> targets, counts;
    for (int64_t k = 0; k < b; ++k) {
      const EncodedRequest& r = requests[static_cast<size_t>(batch[k])];
      const int64_t inplen = static_cast<int64_t>(inputs[k].size()),
                    contlen = static_cast<int64_t>(r.continuation.size());
      rows.push_back(h[k].narrow(0, inplen - contlen, contlen));
      targets.insert(targets.end(), r.continuation.begin(), r.continuation.end());
      counts.push_back(contlen);
    }
    accumulate(model, rows, targets, batch, counts, out);
    done(b);
  }
}

// Requests sharing one context token sequence.
struct ContextGroup {
  const std::vector<int64_t>* context;
  std::vector<int64_t> requests;
};

// Contexts of one forward and what they leave for their continuations.
struct ContextBatch {
  model::KVCache cache;
  at::Tensor last;  // [contexts, hidden]: the final hidden state of each context's last token
};

// Runs groups[g0, g1) (longest context first) as one padded batch.
ContextBatch run_contexts(const model::CausalLM& model, const std::vector<ContextGroup>& groups, size_t g0,
                          size_t g1) {
  std::vector<std::vector<int64_t>> contexts;
  std::vector<int64_t> lengths;
  for (size_t g = g0; g < g1; ++g) {
    contexts.push_back(*groups[g].context);
    lengths.push_back(static_cast<int64_t>(groups[g].context->size()));
  }
  ContextBatch out;
  const at::Tensor h = model.hidden_states(padded_ids(contexts).to(model.compute_device()), &out.cache);
  const at::Tensor length = at::tensor(lengths, at::kLong).to(h.device());
  if (lengths.back() != lengths.front()) out.cache.pad_to(length);
  out.last = h.index({at::arange(h.size(0), length.options()), length - 1});
  return out;
}

// A continuation to score: its request, and where its context's cache is (batch, row).
struct Row {
  int64_t request, batch, context;
};

size_t continuation_length(const std::vector<EncodedRequest>& requests, const Row& row) {
  return requests[static_cast<size_t>(row.request)].continuation.size();
}

// Rows [r0, r1) (at most one batch) continue from copies of their contexts' caches.
void run_continuations(const model::CausalLM& model, const std::vector<EncodedRequest>& requests,
                       const std::vector<ContextBatch>& batches, std::vector<Row> rows,
                       std::vector<RequestScore>& out) {
  const c10::Device device = model.compute_device();
  // Grouped by context batch: the order in which the caches are concatenated.
  std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.batch < b.batch; });
  // Continuations of one token (BoolQ's " yes" / " no") are predicted by their context's last position alone.
  const bool tails_run =
      std::any_of(rows.begin(), rows.end(), [&](const Row& row) { return continuation_length(requests, row) > 1; });
  std::vector<model::KVCache> parts;
  std::vector<at::Tensor> firsts;
  for (size_t k0 = 0; k0 < rows.size();) {
    size_t k1 = k0;
    std::vector<int64_t> contexts;
    while (k1 < rows.size() && rows[k1].batch == rows[k0].batch) contexts.push_back(rows[k1++].context);
    const ContextBatch& b = batches[static_cast<size_t>(rows[k0].batch)];
    const at::Tensor index = at::tensor(contexts, at::kLong).to(device);
    firsts.push_back(b.last.index_select(0, index));
    if (tails_run) parts.push_back(b.cache.select_rows(index));
    k0 = k1;
  }
  std::vector<std::vector<int64_t>> tails;
  std::vector<int64_t> batch, counts, targets;
  for (const Row& row : rows) {
    const std::vector<int64_t>& cont = requests[static_cast<size_t>(row.request)].continuation;
    batch.push_back(row.request);
    counts.push_back(static_cast<int64_t>(cont.size()));
    tails.emplace_back(cont.begin(), cont.end() - 1);  // the last token is only predicted
    targets.insert(targets.end(), cont.begin(), cont.end());
  }
  // A context's last position predicts its continuations' first tokens; the rest come from the tails' forward.
  const at::Tensor first = at::cat(firsts);  // [rows, hidden]
  at::Tensor rest;
  if (tails_run) {
    model::KVCache cache = model::KVCache::concat(parts);
    parts.clear();
    rest = model.hidden_states(padded_ids(tails).to(device), &cache);
  }
  std::vector<at::Tensor> states;
  for (size_t k = 0; k < batch.size(); ++k) {
    states.push_back(first.narrow(0, static_cast<int64_t>(k), 1));
    if (counts[k] > 1) states.push_back(rest[static_cast<int64_t>(k)].narrow(0, 0, counts[k] - 1));
  }
  accumulate(model, states, targets, batch, counts, out);
}

// The context of each group runs once, with a KV cache; the continuations then run from copies of its cache.
// Contexts run up to `batch_size` at a time, longest first and padded on the right while padding stays a small
// part of the work (`ragged`; otherwise only contexts of one length share a forward). The caches of a window of
// contexts (bounded in memory) are kept, and the window's continuations run `batch_size` at a time sorted by
// length, so that little of a batch is padding.
void score_shared(const model::CausalLM& model, const std::vector<EncodedRequest>& requests,
                  const std::vector<ContextGroup>& groups, int64_t batch_size, bool ragged,
                  std::vector<RequestScore>& out, const std::function<void(int64_t)>& done) {
  const model::ModelConfig& c = model.config();
  const int64_t slot_bytes = c.num_layers * 2 * c.num_kv_heads * c.head_dim *
                             static_cast<int64_t>(c10::elementSize(model.compute_dtype()));
  const int64_t window_slots = std::max<int64_t>(1, (int64_t{512} << 20) / slot_bytes);
  for (size_t w0 = 0; w0 < groups.size();) {
    std::vector<ContextBatch> batches;
    std::vector<Row> rows;
    int64_t slots = 0;
    size_t g0 = w0;
    // Without `ragged`, a window holds contexts of one length too: its continuations share batches, whose caches
    // would otherwise be padded to a common width.
    auto joins = [&](size_t g) {
      return ragged || groups[g].context->size() == groups[w0].context->size();
    };
    while (g0 < groups.size() && (batches.empty() || (slots < window_slots && joins(g0)))) {
      // Longest first: L is the batch's width. A shorter context joins while padding stays under 1/8 of the work.
      const size_t L = groups[g0].context->size();
      size_t g1 = g0, tokens = 0;
      while (g1 < groups.size() && static_cast<int64_t>(g1 - g0) < batch_size) {
        const size_t n = groups[g1].context->size();
        if (n != L && (!ragged || 8 * (g1 - g0 + 1) * L > 9 * (tokens + n))) break;
        tokens += n;
        ++g1;
      }
      for (size_t g = g0; g < g1; ++g)
        for (int64_t r : groups[g].requests)
          rows.push_back({r, static_cast<int64_t>(batches.size()), static_cast<int64_t>(g - g0)});
      batches.push_back(run_contexts(model, groups, g0, g1));
      slots += static_cast<int64_t>((g1 - g0) * L);
      g0 = g1;
    }
    std::stable_sort(rows.begin(), rows.end(), [&](const Row& a, const Row& b) {
      return continuation_length(requests, a) > continuation_length(requests, b);
    });
    for (size_t r0 = 0; r0 < rows.size(); r0 += static_cast<size_t>(batch_size)) {
      const size_t r1 = std::min(rows.size(), r0 + static_cast<size_t>(batch_size));
      const auto first = rows.begin() + static_cast<std::ptrdiff_t>(r0);
      run_continuations(model, requests, batches, {first, first + static_cast<std::ptrdiff_t>(r1 - r0)}, out);
      done(static_cast<int64_t>(r1 - r0));
    }
    w0 = g0;
  }
}

}  // namespace

std::vector<RequestScore> score_requests(const model::CausalLM& model, const std::vector<EncodedRequest>& requests,
                                         const LoglikelihoodOptions& options,
                                         const std::function<void(int64_t)>& on_progress, ScoringStats* stats) {
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
  // A request whose input is cut on the left sees a context of its own; every other one may share its context's
  // keys and values with the requests that have the same context tokens.
  std::vector<int64_t> whole;
  std::map<std::vector<int64_t>, std::vector<int64_t>> by_context;
  ScoringStats cost;
  for (int64_t i = 0; i < n; ++i) {
    const EncodedRequest& r = requests[i];
    const int64_t input = static_cast<int64_t>(r.context.size() + r.continuation.size()) - 1;
    cost.whole_positions += std::min(input, max_length);
    if (options.reuse_context && input <= max_length && model.cache_exact(input)) {
      auto [it, fresh] = by_context.try_emplace(r.context);
      if (fresh) cost.positions += static_cast<int64_t>(r.context.size());
      it->second.push_back(i);
      cost.positions += static_cast<int64_t>(r.continuation.size()) - 1;
    } else {
      whole.push_back(i);
      cost.positions += std::min(input, max_length);
    }
  }
  if (stats != nullptr) *stats = cost;
  // Longest first, so that a batch pads little and the first batch shows the peak memory.
  auto total = [&](int64_t i) { return requests[i].context.size() + requests[i].continuation.size(); };
  std::stable_sort(whole.begin(), whole.end(), [&](int64_t a, int64_t b) { return total(a) > total(b); });
  std::vector<ContextGroup> groups;
  for (const auto& [context, members] : by_context) groups.push_back({&context, members});
  std::stable_sort(groups.begin(), groups.end(), [](const ContextGroup& a, const ContextGroup& b) {
    return a.context->size() > b.context->size();
  });

  std::vector<RequestScore> out(n);
  at::NoGradGuard no_grad;
  int64_t finished = 0;
  auto done = [&](int64_t k) {
    finished += k;
    if (on_progress) on_progress(finished);
  };
  // A sliding window counts cache slots, so padding inside one would shift what it covers: models with a window
  // share a forward only among contexts of one length. (A padded batch's slots can exceed any one input's length,
  // so a window as long as the inputs is no exception.)
  bool ragged = true;
  for (int64_t i = 0; i < model.num_blocks(); ++i) ragged = ragged && model.config().window_of_layer(i) == 0;
  score_shared(model, requests, groups, options.batch_size, ragged, out, done);
  score_whole(model, requests, whole, max_length, options.batch_size, out, done);
  return out;
}

}  // namespace alps::eval
