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
#include "cache_rows.h"

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

bool is_argmax(const float* row, float largest, int64_t index) {
  if (row[index] != largest) return false;
  int64_t earlier = 0;  // counted rather than searched for, so that the loop vectorises
  for (int64_t j = 0; j < index; ++j) earlier += row[j] == largest;
  return earlier == 0;
}

namespace {

// Scores of one batch: the rows of `hidden` [n, hidden] are final hidden states whose head predicts `targets`;
// request `requests[k]` owns the next `counts[k]` of them.
void accumulate(const model::CausalLM& model, const at::Tensor& hidden, const std::vector<int64_t>& targets,
                const std::vector<int64_t>& requests, const std::vector<int64_t>& counts,
                std::vector<RequestScore>& out) {
  const at::Tensor target = at::tensor(targets, at::kLong).to(hidden.device());
  const int64_t n = hidden.size(0), vocab = model.config().vocab_size;
  // The head's product runs on slices of up to 512 positions and 128 MiB of logits: the whole batch at once was
  // hundreds of MB (a batch of 128 HellaSwag continuations: 630 MB), while slices much under 512 rows leave the
  // sgemm rate (on SmolLM2's [576 x 49152] head, slices of 170 rows ran at 175 GFLOP/s, of 512 at 199 here).
  const int64_t slice = std::clamp<int64_t>((int64_t{128} << 20) / (4 * vocab), 1, 512);
  // On the CPU the log-softmax and the look-ups after it take a few rows at a time (cache_rows).
  const int64_t rows = hidden.is_cpu() ? cache_rows(vocab) : slice;
  at::Tensor ll = at::empty({n, 1}, hidden.options().dtype(at::kFloat));
  at::Tensor greedy = at::empty({n}, target.options());  // 1 where the target is the greedy token
  for (int64_t r0 = 0; r0 < n; r0 += slice) {
    const int64_t len = std::min(slice, n - r0);
    const at::Tensor logits = model.head(hidden.narrow(0, r0, len).unsqueeze(0))[0].to(at::kFloat).contiguous();
    for (int64_t b0 = 0; b0 < len; b0 += rows) {
      const int64_t k = std::min(rows, len - b0), at_row = r0 + b0;
      at::Tensor logp = logits.narrow(0, b0, k);
      at::_log_softmax_out(logp, logp, -1, false);
      at::Tensor ll_rows = ll.narrow(0, at_row, k), greedy_rows = greedy.narrow(0, at_row, k);
      const at::Tensor t = target.narrow(0, at_row, k);
      at::gather_out(ll_rows, logp, 1, t.unsqueeze(1));
      if (!logp.is_cpu()) {
        at::argmax_out(greedy_rows, logp, 1);
        greedy_rows.copy_(greedy_rows == t);
        continue;
      }
      const at::Tensor largest = at::amax(logp, 1);
      for (int64_t i = 0; i < k; ++i)
        greedy_rows.data_ptr<int64_t>()[i] = is_argmax(logp.data_ptr<float>() + i * logp.size(1),
                                                       largest.data_ptr<float>()[i], t.data_ptr<int64_t>()[i]);
    }
  }
  at::Tensor token_ll = ll.squeeze(1).to(at::kDouble).cpu();
  at::Tensor hit = greedy.cpu();
  auto ll_of = token_ll.accessor<double, 1>();
  auto greedy_at = hit.accessor<int64_t, 1>();
  int64_t pos = 0;
  for (size_t k = 0; k < requests.size(); ++k) {
    RequestScore& s = out[static_cast<size_t>(requests[k])];
    s.is_greedy = true;
    for (int64_t t = 0; t < counts[k]; ++t, ++pos) {
      s.loglikelihood += ll_of[pos];
      s.is_greedy = s.is_greedy && greedy_at[pos] != 0;
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

// context + continuation without its last token: the positions whose states predict the continuation.
std::vector<int64_t> full_input(const EncodedRequest& r) {
  std::vector<int64_t> all = r.context;
  all.insert(all.end(), r.continuation.begin(), r.continuation.end() - 1);
  return all;
}

// The input lm-eval gives the model: (context + continuation)[-(max_length + 1):][:-1].
std::vector<int64_t> model_input(const EncodedRequest& r, int64_t max_length) {
  std::vector<int64_t> all = full_input(r);
  const int64_t start = std::max<int64_t>(0, static_cast<int64_t>(all.size()) - max_length);
  return {all.begin() + start, all.end()};
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
    accumulate(model, at::cat(rows), targets, batch, counts, out);
    done(b);
  }
}

// Tokens a packed sequence holds at least.
constexpr size_t kPackedLength = 512;
// A forward over n packed sequences of T tokens holds its per-query mask, n T^2 bools, on the host and on the
// device: fewer sequences than the batch size go together where T is so long that it would pass this.
constexpr size_t kMaskBytes = size_t{64} << 20;

// One packed sequence, or one tree of it: the token trees of the requests placed in it, nodes in creation order (a
// parent before its children), and for each of its requests the nodes whose states predict the continuation's
// tokens.
struct PackedSequence {
  std::vector<int64_t> tokens, parents, depths;  // parent -1: a root
  std::vector<int64_t> requests;
  std::vector<std::vector<int64_t>> predictors;
};

// Lays the inputs of `order` out as token trees in sequences of at most `length` nodes. Sorted, the inputs that
// share a prefix are neighbours, and each shares with the one before it exactly its longest common prefix with
// everything already in its tree. The trees then fill the sequences largest first, each into the sequence it fits
// best, so that few sequences end in padding and no tree is cut for want of room (only one that outgrows a
// sequence by itself).
std::vector<PackedSequence> pack(const std::vector<EncodedRequest>& requests, std::vector<int64_t> order,
                                 size_t length) {
  std::vector<std::vector<int64_t>> inputs(requests.size());
  for (int64_t r : order) inputs[static_cast<size_t>(r)] = full_input(requests[static_cast<size_t>(r)]);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return inputs[a] < inputs[b]; });
  std::vector<PackedSequence> trees;
  std::vector<int64_t> path;  // the nodes of the previous input, by depth
  const std::vector<int64_t>* previous = nullptr;
  for (int64_t r : order) {
    const std::vector<int64_t>& in = inputs[static_cast<size_t>(r)];
    size_t shared = 0;
    if (previous != nullptr)
      while (shared < in.size() && shared < previous->size() && in[shared] == (*previous)[shared]) ++shared;
    // A short shared prefix (ARC's "Question:", a common first word) is not worth it: every query of the new
    // branch would attend over the whole tree before it, where a tree of its own repeats only a few positions.
    if (4 * shared < in.size() - shared) shared = 0;
    if (shared == 0 || trees.back().tokens.size() + (in.size() - shared) > length) {
      trees.emplace_back();
      shared = 0;
    }
    PackedSequence& tree = trees.back();
    path.resize(shared);
    for (size_t t = shared; t < in.size(); ++t) {
      path.push_back(static_cast<int64_t>(tree.tokens.size()));
      tree.tokens.push_back(in[t]);
      tree.parents.push_back(t == 0 ? -1 : path[t - 1]);
      tree.depths.push_back(static_cast<int64_t>(t));
    }
    // The context's last position predicts the first continuation token, each later input position the next.
    const size_t first = requests[static_cast<size_t>(r)].context.size() - 1;
    tree.requests.push_back(r);
    tree.predictors.emplace_back(path.begin() + static_cast<std::ptrdiff_t>(first), path.end());
    previous = &in;
  }
  std::stable_sort(trees.begin(), trees.end(),
                   [](const PackedSequence& a, const PackedSequence& b) { return a.tokens.size() > b.tokens.size(); });
  std::vector<PackedSequence> out;
  std::multimap<size_t, size_t> room;  // free nodes -> sequence
  for (const PackedSequence& tree : trees) {
    const size_t size = tree.tokens.size();
    auto fit = room.lower_bound(size);
    size_t free = length, s = out.size();
    if (fit == room.end()) {
      out.emplace_back();
    } else {
      free = fit->first;
      s = fit->second;
      room.erase(fit);
    }
    PackedSequence& seq = out[s];
    const int64_t offset = static_cast<int64_t>(seq.tokens.size());
    seq.tokens.insert(seq.tokens.end(), tree.tokens.begin(), tree.tokens.end());
    for (int64_t p : tree.parents) seq.parents.push_back(p < 0 ? p : p + offset);
    seq.depths.insert(seq.depths.end(), tree.depths.begin(), tree.depths.end());
    seq.requests.insert(seq.requests.end(), tree.requests.begin(), tree.requests.end());
    for (const std::vector<int64_t>& nodes : tree.predictors) {
      seq.predictors.emplace_back();
      for (int64_t n : nodes) seq.predictors.back().push_back(n + offset);
    }
    if (free > size) room.emplace(free - size, s);
  }
  return out;
}

// Runs sequences [s0, s1) as one batch [n, T] (T: the longest of them) and scores their requests. A node sees
// itself and its ancestors. The pad slots after a shorter sequence form one chain of their own (whose states
// nobody reads), so that the attention treats them as one tree rather than as one tree per slot.
void run_packed(const model::CausalLM& model, const std::vector<EncodedRequest>& requests,
                const std::vector<PackedSequence>& seqs, size_t s0, size_t s1, std::vector<RequestScore>& out) {
  size_t T = 0;
  for (size_t s = s0; s < s1; ++s) T = std::max(T, seqs[s].tokens.size());
  const int64_t n = static_cast<int64_t>(s1 - s0), width = static_cast<int64_t>(T);
  at::Tensor ids = at::zeros({n, width}, at::kLong), positions = at::zeros({n, width}, at::kLong);
  at::Tensor hidden = at::ones({n, width, width}, at::kBool);
  std::vector<int64_t> batch, counts, targets, rows;
  for (size_t s = s0; s < s1; ++s) {
    const PackedSequence& seq = seqs[s];
    const int64_t b = static_cast<int64_t>(s - s0);
    int64_t* id = ids[b].data_ptr<int64_t>();
    int64_t* pos = positions[b].data_ptr<int64_t>();
    bool* h = hidden[b].data_ptr<bool>();
    for (size_t t = 0; t < T; ++t) {
      if (t < seq.tokens.size()) {
        id[t] = seq.tokens[t];
        pos[t] = seq.depths[t];
        if (seq.parents[t] >= 0) std::copy_n(h + seq.parents[t] * width, width, h + t * width);
      } else if (t > seq.tokens.size()) {
        std::copy_n(h + (t - 1) * width, width, h + t * width);
      }
      h[t * width + t] = false;
    }
    for (size_t k = 0; k < seq.requests.size(); ++k) {
      const std::vector<int64_t>& cont = requests[static_cast<size_t>(seq.requests[k])].continuation;
      batch.push_back(seq.requests[k]);
      counts.push_back(static_cast<int64_t>(cont.size()));
      targets.insert(targets.end(), cont.begin(), cont.end());
      for (int64_t node : seq.predictors[k]) rows.push_back(b * width + node);
    }
  }
  const c10::Device device = model.compute_device();
  const at::Tensor states = model.packed_hidden_states(ids.to(device), positions, hidden);
  const at::Tensor picked =
      states.view({n * width, states.size(2)}).index_select(0, at::tensor(rows, at::kLong).to(device));
  accumulate(model, picked, targets, batch, counts, out);
}

}  // namespace

namespace {

void check_requests(const std::vector<EncodedRequest>& requests, int64_t max_length) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const EncodedRequest& r = requests[i];
    ALPS_CHECK(!r.context.empty(), "request ", i, ": the context encodes to no tokens");
    ALPS_CHECK(!r.continuation.empty(), "request ", i, ": the continuation encodes to no tokens");
    ALPS_CHECK(static_cast<int64_t>(r.continuation.size()) <= max_length, "request ", i, ": the continuation's ",
               r.continuation.size(), " tokens exceed the maximum length ", max_length);
  }
}

// Which requests run whole and which are packed (their indices), the longest packed input, and the positions the
// whole ones cost beside what scoring every request whole would.
struct Split {
  std::vector<int64_t> whole, packed;
  size_t longest = 0;
  ScoringStats cost;
};

// A request whose input is cut on the left runs whole, as does one that a cache-free forward over its prefix
// alone would place differently (dynamic RoPE beyond max_position_embeddings) or whose positions reach a sliding
// window (which counts slots, not depths). Every other request is packed: inputs that share a prefix hold it once.
Split split_requests(const model::CausalLM& model, const std::vector<EncodedRequest>& requests, int64_t max_length,
                     bool reuse_context) {
  int64_t window = 0;
  for (int64_t i = 0; i < model.num_blocks(); ++i) {
    const int64_t w = model.config().window_of_layer(i);
    if (w > 0) window = window > 0 ? std::min(window, w) : w;
  }
  Split split;
  for (size_t i = 0; i < requests.size(); ++i) {
    const EncodedRequest& r = requests[i];
    const int64_t input = static_cast<int64_t>(r.context.size() + r.continuation.size()) - 1;
    split.cost.whole_positions += std::min(input, max_length);
    if (reuse_context && input <= max_length && model.cache_exact(input) && (window == 0 || input <= window)) {
      split.packed.push_back(static_cast<int64_t>(i));
      split.longest = std::max(split.longest, static_cast<size_t>(input));
    } else {
      split.whole.push_back(static_cast<int64_t>(i));
      split.cost.positions += std::min(input, max_length);
    }
  }
  return split;
}

}  // namespace

std::vector<RequestScore> score_requests(const model::CausalLM& model, const std::vector<EncodedRequest>& requests,
                                         const LoglikelihoodOptions& options,
                                         const std::function<void(int64_t)>& on_progress, ScoringStats* stats) {
  const int64_t max_length = options.max_length > 0 ? options.max_length : model.config().max_positions;
  ALPS_CHECK(max_length >= 1, "max length must be at least 1, got ", max_length);
  ALPS_CHECK(options.batch_size >= 1, "batch size must be at least 1, got ", options.batch_size);
  const int64_t n = static_cast<int64_t>(requests.size());
  check_requests(requests, max_length);
  Split split = split_requests(model, requests, max_length, options.reuse_context);
  // Sequences as long as the longest packed input and at least kPackedLength: a batch of them holds as much as a
  // batch of whole inputs padded to the longest, and the linears' products stay large.
  const size_t length = std::max(kPackedLength, split.longest);
  const std::vector<PackedSequence> seqs = pack(requests, split.packed, length);
  for (const PackedSequence& seq : seqs) split.cost.positions += static_cast<int64_t>(seq.tokens.size());
  if (stats != nullptr) *stats = split.cost;
  // Longest first, so that a batch pads little and the first batch shows the peak memory.
  auto total = [&](int64_t i) { return requests[i].context.size() + requests[i].continuation.size(); };
  std::stable_sort(split.whole.begin(), split.whole.end(), [&](int64_t a, int64_t b) { return total(a) > total(b); });

  std::vector<RequestScore> out(n);
  at::NoGradGuard no_grad;
  int64_t finished = 0;
  auto done = [&](int64_t k) {
    finished += k;
    if (on_progress) on_progress(finished);
  };
  const size_t per_batch =
      std::max<size_t>(1, std::min(static_cast<size_t>(options.batch_size), kMaskBytes / (length * length)));
  for (size_t s0 = 0; s0 < seqs.size(); s0 += per_batch) {
    const size_t s1 = std::min(seqs.size(), s0 + per_batch);
    run_packed(model, requests, seqs, s0, s1, out);
    int64_t k = 0;
    for (size_t s = s0; s < s1; ++s) k += static_cast<int64_t>(seqs[s].requests.size());
    done(k);
  }
  score_whole(model, requests, split.whole, max_length, options.batch_size, out, done);
  return out;
}

}  // namespace alps::eval
