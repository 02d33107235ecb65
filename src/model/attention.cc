#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <limits>
#include <optional>
#include <vector>

#include "alps/core/error.h"
#include "alps/core/parallel.h"
#include "alps/core/threads.h"
#include "model/architecture.h"

namespace alps::model {

at::Tensor causal_mask(int64_t seq, c10::ScalarType dtype, c10::Device device) {
  return at::full({seq, seq}, -std::numeric_limits<double>::infinity(), at::TensorOptions().dtype(dtype).device(device))
      .triu(1);
}

namespace {

// Additive mask of rows [row0, row0 + rows) against keys [col0, col0 + cols): 0 where key j may be seen by query i
// (i - window < j <= i, transformers' sliding-window mask), -inf elsewhere.
at::Tensor sliding_window_mask(int64_t row0, int64_t rows, int64_t col0, int64_t cols, int64_t window,
                               c10::ScalarType dtype, c10::Device device) {
  const at::Tensor i = at::arange(row0, row0 + rows, at::TensorOptions(at::kLong).device(device)).unsqueeze(1);
  const at::Tensor j = at::arange(col0, col0 + cols, at::TensorOptions(at::kLong).device(device)).unsqueeze(0);
  const at::Tensor hidden = (j > i).logical_or(j <= i - window);
  return at::zeros({rows, cols}, at::TensorOptions(dtype).device(device))
      .masked_fill_(hidden, -std::numeric_limits<double>::infinity());
}

// Row softmax of fp32 scores, in place. On the CPU the rows are split over alps's threads: libtorch's own pool
// stays at one thread beside the BLAS threads (core/threads.h), and the softmax is the largest elementwise step of
// a forward pass.
at::Tensor softmax_in_place(at::Tensor& scores) {
  // Where libtorch's own pool has the threads (the CUDA build's MKL libtorch), its softmax already uses them, and
  // each of alps's threads calling it would open a pool of its own.
  if (!scores.is_cpu() || products_in_intra_op_pool()) return at::_softmax_out(scores, scores, -1, false);
  const int64_t n = scores.size(-1), rows = scores.numel() / std::max<int64_t>(n, 1);
  const at::Tensor flat = scores.view({rows, n});
  parallel_chunks(rows, parallel_threads(scores.numel()), [&](int64_t r0, int64_t r1, int) {
    if (r1 > r0) {
      at::Tensor part = flat.narrow(0, r0, r1 - r0);
      at::_softmax_out(part, part, -1, false);
    }
  });
  return scores;
}

}  // namespace

namespace {

// Where a step's queries and keys sit: its rows hold query positions q0 .. q0 + len - 1, its columns keys
// k0 .. k0 + n - 1.
struct Step {
  int64_t q0, len, k0, n;
};

// The keys a step over rows [s, s + len) of sequences [b, b + bn) must see: up to the last row's position, and,
// with a sliding window, from the first row's window on; with `first_keys` (host [B, T] int64, may be undefined),
// from the first key any of the step's queries may see.
Step step_of(int64_t past, int64_t s, int64_t len, int64_t window, const at::Tensor& first_keys = {}, int64_t b = 0,
             int64_t bn = 1) {
  const int64_t e = past + s + len;
  int64_t k0 = window > 0 ? std::max<int64_t>(0, past + s - window + 1) : 0;
  if (first_keys.defined()) {
    const auto fk = first_keys.accessor<int64_t, 2>();
    int64_t first = e;
    for (int64_t i = b; i < b + bn; ++i)
      for (int64_t t = s; t < s + len; ++t) first = std::min(first, fk[i][t]);
    k0 = std::max(k0, std::min(first, past + s));  // the diagonal block stays whole
  }
  return {past + s, len, k0, e - k0};
}

// Soft-capping of scaled scores, in their dtype as transformers' eager attention does it; nothing for cap 0.
void cap_scores(at::Tensor& scores, double cap) {
  if (cap > 0) scores.div_(cap).tanh_().mul_(cap);
}

// Hides from a step's scores what its queries may not see. `rows` views the scores as [.., rep, len, n];
// `diagonal` is causal_mask(len) (or the top-left corner of a larger one); `hidden` (may be undefined) is true for
// the keys the step's queries may not see, shaped to broadcast against `rows`.
void mask_step(const at::Tensor& rows, const Step& st, int64_t window, const at::Tensor& diagonal,
               const at::Tensor& hidden) {
  if (window > 0 && st.k0 + st.n > window)
    rows.add_(sliding_window_mask(st.q0, st.len, st.k0, st.n, window, rows.scalar_type(), rows.device()));
  else  // k0 = 0: the last len keys are the rows' own positions
    rows.narrow(-1, st.n - st.len, st.len).add_(diagonal);
  if (hidden.defined()) rows.masked_fill_(hidden, -std::numeric_limits<double>::infinity());
}

// The part of `hidden` ([B, T, S], see causal_attention) for sequences [b, b + bn) and the step `st` whose first
// row is new token s, shaped [bn, 1, 1, len, n] to broadcast against a step's [bn, groups, rep, len, n] scores.
at::Tensor hidden_part(const at::Tensor& hidden, int64_t b, int64_t bn, int64_t s, const Step& st) {
  if (!hidden.defined()) return {};
  return hidden.narrow(0, b, bn).narrow(1, s, st.len).narrow(2, st.k0, st.n).view({bn, 1, 1, st.len, st.n});
}

// Many (sequences, KV groups) per step, each step's products run by BLAS over all its threads. Scores of a step stay
// under `budget` elements. Query chunks come first: a chunk ending at query position e only needs keys [0, e), so
// most of the masked half of the T x T scores is never computed, and only the diagonal block needs the mask. The
// chunk is as long as the budget allows up to 512 rows (the masked work left is then 1/8 of a 2048-token window);
// the groups and sequences that fit beside it share one batched product.
void attend_batched(const at::Tensor& q5, const at::Tensor& kt, const at::Tensor& v, const at::Tensor& out5,
                    int64_t chunk, int64_t window, int64_t past, const at::Tensor& hidden, const at::Tensor& first_keys,
                    double softcap, int64_t budget) {
  const int64_t B = q5.size(0), KV = q5.size(1), rep = q5.size(2), T = q5.size(3), D = q5.size(4), S = kt.size(-1);
  const int64_t len_max = chunk > 0 ? chunk : std::clamp<int64_t>(budget / std::max<int64_t>(1, rep * S), 64, 512);
  const int64_t step_scores = rep * std::min(len_max, T) * S;
  const int64_t groups = std::clamp<int64_t>(budget / std::max<int64_t>(1, step_scores), 1, KV);
  const int64_t seqs = groups < KV ? 1 : std::clamp<int64_t>(budget / std::max<int64_t>(1, KV * step_scores), 1, B);
  const auto dtype = q5.scalar_type();
  const at::Tensor diagonal = causal_mask(std::min(len_max, T), dtype, q5.device());
  for (int64_t b = 0; b < B; b += seqs) {
    const int64_t bn = std::min(seqs, B - b);
    for (int64_t g = 0; g < KV; g += groups) {
      const int64_t gn = std::min(groups, KV - g);
      const at::Tensor qg = q5.narrow(0, b, bn).narrow(1, g, gn), kg = kt.narrow(0, b, bn).narrow(1, g, gn),
                       vg = v.narrow(0, b, bn).narrow(1, g, gn), og = out5.narrow(0, b, bn).narrow(1, g, gn);
      for (int64_t s = 0; s < T; s += len_max) {
        const Step st = step_of(past, s, std::min(len_max, T - s), window, first_keys, b, bn);
        at::Tensor scores =
            at::matmul(qg.narrow(3, s, st.len).reshape({bn, gn, rep * st.len, D}), kg.narrow(-1, st.k0, st.n));
        cap_scores(scores, softcap);
        mask_step(scores.view({bn, gn, rep, st.len, st.n}), st, window,
                  diagonal.narrow(0, 0, st.len).narrow(1, 0, st.len), hidden_part(hidden, b, bn, s, st));
        // Softmax in fp32 even for half compute, as transformers does; in place for fp32.
        const at::Tensor probs =
            dtype == at::kFloat ? softmax_in_place(scores) : at::softmax(scores, -1, at::kFloat).to(dtype);
        og.narrow(3, s, st.len).copy_(at::matmul(probs, vg.narrow(2, st.k0, st.n)).view({bn, gn, rep, st.len, D}));
      }
    }
  }
}

// mask_step for a tile: its [rep * len, n] fp32 scores (contiguous) in one pass, where ATen's broadcast masked_fill
// and the diagonal's add took a fifth of the time of a small tile (a packed tree of 75 tokens). `hidden` is the
// host bool tensor of causal_attention, contiguous; b and s place the tile in it.
void mask_tile(float* scores, int64_t rep, const Step& st, int64_t window, const at::Tensor& hidden, int64_t b,
               int64_t s) {
  const float hide = -std::numeric_limits<float>::infinity();
  const int64_t row_stride = hidden.defined() ? hidden.size(2) : 0;  // between the hidden keys of two queries
  const bool* keys =
      hidden.defined() ? hidden.data_ptr<bool>() + b * hidden.stride(0) + s * row_stride + st.k0 : nullptr;
  for (int64_t i = 0; i < st.len; ++i) {
    // Key j is the position k0 + j: visible from query q0 + i up to that position and, with a window, from the
    // window's first position on.
    const int64_t last = std::min(st.n, st.q0 + i - st.k0 + 1);
    const int64_t first = window > 0 ? std::clamp<int64_t>(st.q0 + i - window + 1 - st.k0, 0, st.n) : 0;
    const bool* hidden_keys = keys == nullptr ? nullptr : keys + i * row_stride;
    for (int64_t r = 0; r < rep; ++r) {
      float* row = scores + (r * st.len + i) * st.n;
      std::fill(row, row + first, hide);
      std::fill(row + last, row + st.n, hide);
      if (hidden_keys != nullptr)
        for (int64_t j = first; j < last; ++j) row[j] = hidden_keys[j] ? hide : row[j];
    }
  }
}

// One (sequence, KV group, query tile) per task on alps's pool, each task's products on its own core (BLAS kept to
// the calling thread): a tile's scores (at most `budget` elements) stay in that core's cache from the product that
// makes them through the softmax to the product that consumes them, where a batched step's scores go out to memory
// and back between each of those (its products ran at about half the sgemm rate with K = head_dim). The largest
// tiles are dealt out first. With `first_keys`, a tile never spans two runs of queries with different first keys
// (two trees of a packed sequence), so that no query computes the keys of a tree before its own.
void attend_tiled(const at::Tensor& q5, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out5, int64_t chunk,
                  int64_t window, int64_t past, const at::Tensor& hidden, const at::Tensor& first_keys, double softcap,
                  int64_t budget) {
  const int64_t B = q5.size(0), KV = q5.size(1), rep = q5.size(2), T = q5.size(3), D = q5.size(4), S = k.size(2);
  const int64_t len_max =
      std::min(T, chunk > 0 ? chunk : std::clamp<int64_t>(budget / std::max<int64_t>(1, rep * S), 16, 512));
  struct Tile {
    int64_t b, s;
    Step st;
  };
  std::vector<Tile> tiles;
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t a = 0; a < T;) {
      int64_t z = T;
      if (first_keys.defined()) {
        const auto fk = first_keys.accessor<int64_t, 2>();
        for (z = a + 1; z < T && fk[b][z] == fk[b][a];) ++z;
      }
      for (int64_t s = a; s < z; s += len_max)
        tiles.push_back({b, s, step_of(past, s, std::min(len_max, z - s), window, first_keys, b, 1)});
      a = z;
    }
  }
  std::stable_sort(tiles.begin(), tiles.end(),
                   [](const Tile& x, const Tile& y) { return x.st.len * x.st.n > y.st.len * y.st.n; });
  const int64_t tasks = static_cast<int64_t>(tiles.size()) * KV;
  const at::Tensor hidden_keys = hidden.defined() ? hidden.contiguous() : hidden;
  const int threads = static_cast<int>(std::min<int64_t>(parallel_threads(tasks, 1), tasks));
  std::atomic<int64_t> next{0};
  SerialBlas serial;
  run_tasks(threads, [&](int) {
    at::Tensor qbuf = at::empty({rep * len_max, D}, q5.options()), obuf = at::empty_like(qbuf);
    at::Tensor sbuf = at::empty({rep * len_max * S}, q5.options());
    for (int64_t task; (task = next.fetch_add(1)) < tasks;) {
      const Tile& tile = tiles[static_cast<size_t>(task / KV)];
      const int64_t b = tile.b, g = task % KV, s = tile.s;
      const Step& st = tile.st;
      const int64_t rows = rep * st.len;
      at::Tensor qt = qbuf.narrow(0, 0, rows), ot = obuf.narrow(0, 0, rows);
      qt.view({rep, st.len, D}).copy_(q5[b][g].narrow(1, s, st.len));
      at::Tensor scores = sbuf.narrow(0, 0, rows * st.n).view({rows, st.n});
      at::mm_out(scores, qt, k[b][g].narrow(0, st.k0, st.n).t());
      cap_scores(scores, softcap);
      mask_tile(scores.data_ptr<float>(), rep, st, window, hidden_keys, b, s);
      at::_softmax_out(scores, scores, -1, false);
      at::mm_out(ot, scores, v[b][g].narrow(0, st.k0, st.n));
      out5[b][g].narrow(1, s, st.len).copy_(ot.view({rep, st.len, D}));
    }
  });
}

// Whether the fused kernel serves these options: it has no soft-capping; it knows a causal mask aligned at the first
// key (past = 0), or no mask at all (a single query sees every cached key), and, through a mask of its own, a sliding
// window.
bool fused_applies(const at::Tensor& q, const AttentionOptions& o) {
  return o.softcap == 0 && !o.hidden_keys.defined() && !o.first_keys.defined() &&
         (o.past == 0 || (q.size(2) == 1 && o.window == 0));
}

at::Tensor attend_fused(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale, int64_t window,
                        int64_t past) {
#if TORCH_VERSION_MAJOR >= 2
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3), S = k.size(2);
  std::optional<at::Tensor> mask;
  bool causal = past == 0 && T > 1;
  if (window > 0) {  // true where query i (position past + i) may see key j: i - window < j <= i
    const at::Tensor i = at::arange(past, past + T, at::TensorOptions(at::kLong).device(q.device())).unsqueeze(1);
    const at::Tensor j = at::arange(0, S, at::TensorOptions(at::kLong).device(q.device())).unsqueeze(0);
    mask = (j <= i).logical_and(j > i - window);
    causal = false;
  }
  // Query head h reads KV head h / (H / KV) with enable_gqa, as repeat_kv orders them; K and V are not copied.
  const at::Tensor o = at::scaled_dot_product_attention(q, k, v, mask, 0.0, causal, scale, k.size(1) != H);
  return o.transpose(1, 2).reshape({B, T, H * D});  // [B, T, H * D], the layout the output projection reads
#else
  (void)q, (void)k, (void)v, (void)scale, (void)window, (void)past;
  ALPS_FAIL("attention: the fused schedule needs libtorch 2.x (the CUDA build)");
#endif
}

}  // namespace

bool fused_attention_available() { return TORCH_VERSION_MAJOR >= 2; }

AttentionOptions attention_at(const Placement& at, double scale, int64_t window) {
  AttentionOptions o;
  o.scale = scale;
  o.window = window;
  o.past = at.past;
  o.hidden_keys = at.hidden_keys;
  o.first_keys = at.first_keys;
  return o;
}

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const AttentionOptions& options) {
  RECORD_USER_SCOPE("alps::causal_attention");
  const at::Tensor& hidden = options.hidden_keys;
  const at::Tensor& first_keys = options.first_keys;
  const int64_t past = options.past, chunk = options.chunk, max_scores = options.max_scores;
  int64_t window = options.window;
  AttentionSchedule schedule = options.schedule;
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3), KV = k.size(1), S = k.size(2);
  ALPS_CHECK(S == past + T, "attention: ", S, " keys for ", past, " cached and ", T, " new positions");
  ALPS_CHECK(!hidden.defined() || window == 0 || S <= window,
             "attention: a sliding window over packed sequences is not supported");
  ALPS_CHECK(
      !hidden.defined() || (hidden.dim() == 3 && hidden.size(0) == B && hidden.size(1) == T && hidden.size(2) == S),
      "attention: hidden keys of shape ", hidden.sizes(), " for ", B, " sequences of ", T, " queries and ", S, " keys");
  ALPS_CHECK(!first_keys.defined() || (first_keys.is_cpu() && first_keys.scalar_type() == at::kLong &&
                                       first_keys.dim() == 2 && first_keys.size(0) == B && first_keys.size(1) == T),
             "attention: first keys must be a host int64 tensor [", B, ", ", T, "], got ", first_keys.sizes());
  const int64_t rep = H / KV;
  // A sliding window only matters once some query has more than `window` keys before it.
  if (window >= S) window = 0;
  if (schedule == AttentionSchedule::automatic && q.is_cuda() && fused_attention_available() &&
      fused_applies(q, options))
    schedule = AttentionSchedule::fused;
  if (schedule == AttentionSchedule::fused) {
    ALPS_CHECK(fused_applies(q, options), "attention: the fused schedule takes no soft-capping, no hidden or first ",
               "keys, and cached keys only before a single query");
    return attend_fused(q, k, v, options.scale, window, past);
  }
  // Query head h = g * rep + r reads KV head g (transformers' repeat_kv order): [B, H, T, D] viewed as
  // [B, KV, rep, T, D] lines each group's queries up against its own K and V without copying K or V. The scale goes
  // on the queries (T x D products) rather than on the scores (T x S).
  const at::Tensor q5 = (q * options.scale).view({B, KV, rep, T, D});
  // The output is written in place as [B, T, H, D], the layout the output projection reads.
  at::Tensor out = at::empty({B, T, KV, rep, D}, q.options());
  const at::Tensor out5 = out.permute({0, 2, 3, 1, 4});
  // Tiles pay a handful of operator calls each: a few queries against a short cache (a decoding step) run faster
  // as one batched step.
  if (schedule == AttentionSchedule::automatic)
    schedule = q.is_cpu() && q.scalar_type() == at::kFloat && !products_in_intra_op_pool() && rep * T * S >= 16384
                   ? AttentionSchedule::tiled
                   : AttentionSchedule::batched;
  if (schedule == AttentionSchedule::tiled) {
    ALPS_CHECK(q.is_cpu() && q.scalar_type() == at::kFloat &&
                   (!hidden.defined() || (hidden.is_cpu() && hidden.scalar_type() == at::kBool)),
               "attention: tiled steps are for fp32 on the CPU, with hidden keys as a host bool tensor");
    // 1 MB of scores per tile, one core's L2 cache here: tiles of 192K-1M scores ran within 5% of each other on
    // the OPT-125M and SmolLM2 shapes, 64K and less up to 1.6x slower (alps_bench_block).
    attend_tiled(q5, k, v, out5, chunk, window, past, hidden, first_keys, options.softcap,
                 max_scores > 0 ? max_scores : int64_t{256} << 10);
  } else {
    attend_batched(q5, k.transpose(-1, -2), v, out5, chunk, window, past, hidden, first_keys, options.softcap,
                   max_scores > 0 ? max_scores : kBatchedStepScores);
  }
  return out.view({B, T, H * D});
}

std::pair<at::Tensor, at::Tensor> extend_cache(BlockCache* cache, at::Tensor keys, at::Tensor values) {
  if (cache == nullptr) return {std::move(keys), std::move(values)};
  if (cache->keys.defined()) {
    keys = at::cat({cache->keys, keys}, 2);
    values = at::cat({cache->values, values}, 2);
  }
  cache->keys = keys;
  cache->values = values;
  return {std::move(keys), std::move(values)};
}

at::Tensor apply_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return bias.defined() ? at::linear(x, weight, bias) : at::matmul(x, weight.t());
}

}  // namespace alps::model
