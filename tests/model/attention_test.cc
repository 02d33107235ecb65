// The chunked causal attention kernel against the textbook formula (full score matrix, -inf above the diagonal and,
// with a sliding window W, at and beyond W positions back; softmax; K/V heads repeated for GQA as transformers'
// repeat_kv does), for several chunk sizes, under both of its schedules.
#include <ATen/ATen.h>

#include <cmath>
#include <tuple>
#include <vector>

#include "model/architecture.h"
#include "support.h"

namespace alps::model {
namespace {

at::Tensor reference_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                               int64_t window = 0, const at::Tensor& hidden_keys = {}, double softcap = 0) {
  const int64_t B = q.size(0), H = q.size(1), T = q.size(2), D = q.size(3), rep = H / k.size(1);
  at::Tensor kr = k.repeat_interleave(rep, 1), vr = v.repeat_interleave(rep, 1);
  at::Tensor s = at::matmul(q.to(at::kDouble), kr.to(at::kDouble).transpose(-1, -2)) * scale;
  if (softcap > 0) s = softcap * at::tanh(s / softcap);
  s.masked_fill_(at::ones({T, T}, at::kBool).triu(1), -INFINITY);
  // Query i sees keys i - window + 1 .. i: everything on or below diagonal -window is hidden.
  if (window > 0) s.masked_fill_(at::ones({T, T}, at::kBool).tril(-window), -INFINITY);
  if (hidden_keys.defined()) s.masked_fill_(hidden_keys.view({B, 1, T, T}), -INFINITY);
  at::Tensor o = at::matmul(at::softmax(s, -1), vr.to(at::kDouble));  // [B, H, T, D]
  return o.transpose(1, 2).reshape({B, T, H * D});
}

constexpr AttentionSchedule kSchedules[] = {AttentionSchedule::batched, AttentionSchedule::tiled};

// The options in the order the cases vary them.
at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale, int64_t chunk = 0,
                  int64_t window = 0, int64_t past = 0, const at::Tensor& hidden = {}, int64_t max_scores = 0,
                  AttentionSchedule schedule = AttentionSchedule::automatic, const at::Tensor& first_keys = {}) {
  AttentionOptions o;
  o.scale = scale;
  o.chunk = chunk;
  o.window = window;
  o.past = past;
  o.hidden_keys = hidden;
  o.max_scores = max_scores;
  o.schedule = schedule;
  o.first_keys = first_keys;
  return causal_attention(q, k, v, o);
}

const char* name(AttentionSchedule s) {
  return s == AttentionSchedule::tiled ? "tiled" : s == AttentionSchedule::fused ? "fused" : "batched";
}

TEST(Attention, ChunkedCausalMatchesReference) {
  at::manual_seed(0);
  for (auto [H, KV, T] : {std::tuple{4, 4, 37}, {8, 2, 300}, {6, 3, 5}}) {
    at::Tensor q = at::randn({2, H, T, 16}), k = at::randn({2, KV, T, 16}), v = at::randn({2, KV, T, 16});
    const at::Tensor ref = reference_attention(q, k, v, 0.25);
    // fp32 against fp64. An output is a T-term convex combination of values (plus the T-term softmax sum):
    // error relative to max |v|. A score is a 16-term dot product, off by at most gamma_16 0.25 sum |q||k|;
    // through exp that is a relative error of the weights, hence of the output, of twice that.
    const double vmax = v.abs().max().item<double>();
    const double score_scale = 0.25 * 16 * q.abs().max().item<double>() * k.abs().max().item<double>();
    const double tol = test::rounding_bound(16 + 2 * T, vmax) + test::rounding_bound(16, score_scale) * vmax;
    for (AttentionSchedule schedule : kSchedules) {
      for (int64_t chunk : {0, 1, 7, 64, 1000})
        EXPECT_ALL_CLOSE(attend(q, k, v, 0.25, chunk, 0, 0, {}, 0, schedule), ref, tol, 0)
            << name(schedule) << " H " << H << " KV " << KV << " T " << T << " chunk " << chunk;
      // Score budgets that split the batch into single (sequence, KV group) steps of 7 queries, or into some groups
      // at a time (batched), or size the tiles (tiled: 16 queries and more).
      const int64_t chunk = schedule == AttentionSchedule::batched ? 7 : 0;
      for (int64_t max_scores : {int64_t{1}, int64_t{H / KV * 7 * T * 2}})
        EXPECT_ALL_CLOSE(attend(q, k, v, 0.25, chunk, 0, 0, {}, max_scores, schedule), ref, tol, 0)
            << name(schedule) << " H " << H << " KV " << KV << " T " << T << " max_scores " << max_scores;
    }
  }
}

TEST(Attention, SlidingWindowMatchesReference) {
  at::manual_seed(1);
  for (auto [H, KV, T, window] : {std::tuple{4, 2, 37, 5}, {6, 3, 100, 64}, {2, 2, 9, 1}, {4, 4, 20, 20}}) {
    at::Tensor q = at::randn({2, H, T, 16}), k = at::randn({2, KV, T, 16}), v = at::randn({2, KV, T, 16});
    const at::Tensor ref = reference_attention(q, k, v, 0.25, window);
    // As above, with at most `window` terms per softmax.
    const double vmax = v.abs().max().item<double>();
    const double score_scale = 0.25 * 16 * q.abs().max().item<double>() * k.abs().max().item<double>();
    const double tol = test::rounding_bound(16 + 2 * window, vmax) + test::rounding_bound(16, score_scale) * vmax;
    for (AttentionSchedule schedule : kSchedules)
      for (int64_t chunk : {0, 1, 4, 7, 64, 1000})
        EXPECT_ALL_CLOSE(attend(q, k, v, 0.25, chunk, window, 0, {}, 0, schedule), ref, tol, 0)
            << name(schedule) << " H " << H << " KV " << KV << " T " << T << " window " << window << " chunk " << chunk;
    // The window really hides something (except where it spans the whole sequence).
    if (window < T) EXPECT_FALSE(at::allclose(ref, reference_attention(q, k, v, 0.25), 1e-3, 1e-3));
  }
}

// Gemma 2's soft-capping, cap * tanh(s / cap) on the scaled scores before the mask, in both schedules, with and
// without a window. tanh is 1-Lipschitz, so a score carries its dot product's error plus the three roundings of the
// capping (each relative to at most the cap).
TEST(Attention, SoftCappedScoresMatchReference) {
  at::manual_seed(8);
  for (auto [H, KV, T, window] : {std::tuple{4, 2, 37, 0}, {6, 3, 100, 16}}) {
    at::Tensor q = 3 * at::randn({2, H, T, 16}), k = at::randn({2, KV, T, 16}), v = at::randn({2, KV, T, 16});
    const double cap = 2.0;
    const at::Tensor ref = reference_attention(q, k, v, 0.25, window, {}, cap);
    const double vmax = v.abs().max().item<double>();
    const double score_scale = 0.25 * 16 * q.abs().max().item<double>() * k.abs().max().item<double>();
    const double tol = test::rounding_bound(16 + 2 * T, vmax) +
                       (test::rounding_bound(16, score_scale) + test::rounding_bound(3, cap)) * vmax;
    for (AttentionSchedule schedule : kSchedules)
      for (int64_t chunk : {0, 7}) {
        AttentionOptions o;
        o.scale = 0.25;
        o.softcap = cap;
        o.window = window;
        o.chunk = chunk;
        o.schedule = schedule;
        EXPECT_ALL_CLOSE(causal_attention(q, k, v, o), ref, tol, 0)
            << name(schedule) << " H " << H << " T " << T << " window " << window << " chunk " << chunk;
      }
    // The cap binds: these scores reach well past it.
    EXPECT_FALSE(at::allclose(ref, reference_attention(q, k, v, 0.25, window), 1e-2, 1e-2));
  }
}

// On a GPU the automatic schedule cannot take the fused kernel for capped scores (it has no such step): it runs
// batched steps, and the fused schedule asked for by name is refused.
TEST(Attention, SoftCappingOnTheGpuRunsBatchedSteps_CUDA) {
  at::manual_seed(9);
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  at::Tensor q = 3 * at::randn({2, 4, 40, 16}, cuda), k = at::randn({2, 2, 40, 16}, cuda);
  at::Tensor v = at::randn({2, 2, 40, 16}, cuda);
  AttentionOptions o;
  o.scale = 0.25;
  o.softcap = 2.0;
  const at::Tensor ref = reference_attention(q.cpu(), k.cpu(), v.cpu(), 0.25, 0, {}, 2.0);
  EXPECT_ALL_CLOSE(causal_attention(q, k, v, o).cpu(), ref, 2e-3, 2e-3);  // TF32 may be on for CUDA matmuls
  o.schedule = AttentionSchedule::fused;
  EXPECT_NE(test::error_message([&] { causal_attention(q, k, v, o); }).find("soft-capping"), std::string::npos);
}

// A window at least as long as the sequence hides nothing: bit-identical to plain causal attention.
TEST(Attention, WindowCoveringTheSequenceIsPlainCausal) {
  at::manual_seed(2);
  at::Tensor q = at::randn({1, 4, 30, 8}), k = at::randn({1, 2, 30, 8}), v = at::randn({1, 2, 30, 8});
  for (AttentionSchedule schedule : kSchedules)
    for (int64_t window : {30, 31, 1000})
      EXPECT_TRUE(
          attend(q, k, v, 0.3, 0, window, 0, {}, 0, schedule).equal(attend(q, k, v, 0.3, 0, 0, 0, {}, 0, schedule)))
          << name(schedule) << " " << window;
}

// Queries that continue a sequence (positions past .. past + T - 1 against all past + T keys, as with a KV cache)
// give the last T rows of the whole sequence's attention, with and without a sliding window.
TEST(Attention, QueriesAfterCachedKeysMatchTheWholeSequence) {
  at::manual_seed(3);
  for (auto [H, KV, S, past, window] :
       {std::tuple{4, 2, 37, 30, 0}, {4, 4, 50, 49, 0}, {6, 3, 100, 60, 16}, {2, 2, 12, 11, 4}, {4, 2, 20, 0, 0}}) {
    const int64_t T = S - past;
    at::Tensor q = at::randn({2, H, S, 16}), k = at::randn({2, KV, S, 16}), v = at::randn({2, KV, S, 16});
    const at::Tensor ref = reference_attention(q, k, v, 0.25, window).narrow(1, past, T);
    const int64_t terms = window > 0 ? window : S;
    const double vmax = v.abs().max().item<double>();
    const double score_scale = 0.25 * 16 * q.abs().max().item<double>() * k.abs().max().item<double>();
    const double tol = test::rounding_bound(16 + 2 * terms, vmax) + test::rounding_bound(16, score_scale) * vmax;
    const at::Tensor tail = q.narrow(2, past, T);
    for (AttentionSchedule schedule : kSchedules)
      for (int64_t chunk : {0, 1, 7})
        EXPECT_ALL_CLOSE(attend(tail, k, v, 0.25, chunk, window, past, {}, 0, schedule), ref, tol, 0)
            << name(schedule) << " H " << H << " KV " << KV << " past " << past << " window " << window << " chunk "
            << chunk;
  }
}

// Token trees packed into one sequence (each key hidden from every query that is not the key's node or one of its
// descendants) attend as the textbook formula with that mask says, and skipping the keys before each query's tree
// (first_keys) changes nothing, whichever steps the batch is cut into.
TEST(Attention, PackedTreesSeeTheirAncestorsOnly) {
  at::manual_seed(5);
  const int64_t B = 2, H = 4, KV = 2, T = 23;
  // parent of each node (-1: a root); a node comes after its parent.
  const std::vector<std::vector<int64_t>> parents = {
      {-1, 0, 1, 2, 3, 4, 5, 4, 7, 8, -1, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21},
      {-1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, -1, 12, 13, 12, 15, 16, 16, 18, 15, 20, 21}};
  at::Tensor hidden = at::ones({B, T, T}, at::kBool), first = at::zeros({B, T}, at::kLong);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t) {
      const int64_t p = parents[b][t];
      if (p >= 0) hidden[b][t].copy_(hidden[b][p]);
      hidden[b][t][t] = false;
      first[b][t] = p >= 0 ? first[b][p].item<int64_t>() : t;
    }
  at::Tensor q = at::randn({B, H, T, 16}), k = at::randn({B, KV, T, 16}), v = at::randn({B, KV, T, 16});
  const at::Tensor ref = reference_attention(q, k, v, 0.25, 0, hidden);
  const double vmax = v.abs().max().item<double>();
  const double score_scale = 0.25 * 16 * q.abs().max().item<double>() * k.abs().max().item<double>();
  const double tol = test::rounding_bound(16 + 2 * T, vmax) + test::rounding_bound(16, score_scale) * vmax;
  for (AttentionSchedule schedule : kSchedules)
    for (int64_t max_scores : {int64_t{0}, int64_t{1}, int64_t{H / KV * 5 * T * KV * 2}}) {
      EXPECT_ALL_CLOSE(attend(q, k, v, 0.25, 5, 0, 0, hidden, max_scores, schedule), ref, tol, 0)
          << name(schedule) << " max_scores " << max_scores;
      EXPECT_ALL_CLOSE(attend(q, k, v, 0.25, 5, 0, 0, hidden, max_scores, schedule, first), ref, tol, 0)
          << name(schedule) << " max_scores " << max_scores << " with first keys";
    }
  // The mask matters: causal attention over the whole sequence differs.
  EXPECT_FALSE(at::allclose(ref, reference_attention(q, k, v, 0.25), 1e-3, 1e-3));
}

// libtorch's fused kernel (the CUDA build; on the CPU through its CPU kernels) against the same reference: whole
// sequences with and without a window, grouped-query heads, and a single decoding step after cached keys. It
// rescales running sums once per block of keys (online softmax): a third term per key in the bound.
TEST(Attention, FusedMatchesReference) {
  if (!fused_attention_available()) GTEST_SKIP() << "libtorch 1.x has no fused attention";
  at::manual_seed(6);
  for (auto [H, KV, T, window] : {std::tuple{4, 4, 37, 0}, {8, 2, 300, 0}, {4, 2, 37, 5}, {6, 3, 100, 64}}) {
    at::Tensor q = at::randn({2, H, T, 16}), k = at::randn({2, KV, T, 16}), v = at::randn({2, KV, T, 16});
    const at::Tensor ref = reference_attention(q, k, v, 0.25, window);
    const int64_t terms = window > 0 ? window : T;
    const double vmax = v.abs().max().item<double>();
    const double score_scale = 0.25 * 16 * q.abs().max().item<double>() * k.abs().max().item<double>();
    const double tol = test::rounding_bound(16 + 3 * terms, vmax) + test::rounding_bound(16, score_scale) * vmax;
    EXPECT_ALL_CLOSE(attend(q, k, v, 0.25, 0, window, 0, {}, 0, AttentionSchedule::fused), ref, tol, 0)
        << "H " << H << " KV " << KV << " T " << T << " window " << window;
    // One query after T - 1 cached keys: the last row.
    const at::Tensor last = attend(q.narrow(2, T - 1, 1), k, v, 0.25, 0, 0, T - 1, {}, 0, AttentionSchedule::fused);
    if (window == 0) EXPECT_ALL_CLOSE(last, ref.narrow(1, T - 1, 1), tol, 0) << "H " << H << " decoding step";
  }
  // What it cannot serve is refused rather than computed wrongly: queries after cached keys with a causal mask
  // (the kernel aligns it at the first key), hidden keys.
  at::Tensor q = at::randn({1, 2, 4, 8}), k = at::randn({1, 2, 6, 8}), v = at::randn({1, 2, 6, 8});
  EXPECT_NE(test::error_message([&] {
              attend(q, k, v, 0.25, 0, 0, 2, {}, 0, AttentionSchedule::fused);
            }).find("fused schedule"),
            std::string::npos);
  EXPECT_NE(test::error_message([&] {
              attend(q, k.narrow(2, 0, 4), v.narrow(2, 0, 4), 0.25, 0, 0, 0, at::zeros({1, 4, 4}, at::kBool), 0,
                     AttentionSchedule::fused);
            }).find("fused schedule"),
            std::string::npos);
}

// On a GPU the automatic schedule is the fused kernel; in half precision it equals the reference within the
// rounding of its fp16 steps: scores are 64-term fp32 sums of exact products (an fp32 bound, through exp twice that
// relative to the output), the probabilities are rounded to fp16 for the product with V (2^-11 relative, at most
// max |v| in all), and the output once more.
TEST(Attention, FusedHalfOnTheGpuMatchesReference_CUDA) {
  at::manual_seed(7);
  const auto cuda = at::TensorOptions().device(at::kCUDA).dtype(at::kHalf);
  for (auto [H, KV, T, window] : {std::tuple{8, 2, 300, 0}, {4, 4, 256, 64}}) {
    at::Tensor q = at::randn({2, H, T, 64}, cuda), k = at::randn({2, KV, T, 64}, cuda);
    at::Tensor v = at::randn({2, KV, T, 64}, cuda);
    const at::Tensor ref = reference_attention(q.cpu(), k.cpu(), v.cpu(), 0.125, window);
    const double u = std::ldexp(1.0, -11), vmax = v.abs().max().item<double>();
    const double score_scale = 0.125 * 64 * q.abs().max().item<double>() * k.abs().max().item<double>();
    const double tol = 2 * test::rounding_bound(64, score_scale) * vmax + 4 * u * vmax;
    EXPECT_ALL_CLOSE(attend(q, k, v, 0.125, 0, window).cpu().to(at::kDouble), ref, tol, 0)
        << "H " << H << " KV " << KV << " window " << window;
  }
}

// What the attention cannot honour is refused, naming what is wrong: hidden keys of another shape, and first
// keys that are not a host int64 [batch, queries] tensor (they are read on the host to size each step).
TEST(Attention, RefusesMasksOfAnotherShapeOrKind) {
  const int64_t B = 2, H = 2, T = 5;
  at::Tensor q = at::randn({B, H, T, 8}), k = at::randn({B, H, T, 8}), v = at::randn({B, H, T, 8});
  // Another batch, or one row of keys for all queries (padding, which no caller has).
  at::Tensor other_batch = at::zeros({B + 1, T, T}, at::kBool), padding = at::zeros({B, T}, at::kBool);
  for (const at::Tensor& hidden : {other_batch, padding})
    EXPECT_NE(test::error_message([&] { attend(q, k, v, 0.25, 0, 0, 0, hidden, 0); }).find("hidden keys of shape"),
              std::string::npos);
  const at::Tensor hidden = at::zeros({B, T, T}, at::kBool);
  for (const at::Tensor& first : {at::zeros({B, T}, at::kInt), at::zeros({B, T + 1}, at::kLong)})
    EXPECT_NE(test::error_message([&] {
                attend(q, k, v, 0.25, 0, 0, 0, hidden, 0, AttentionSchedule::automatic, first);
              }).find("first keys must be a host int64 tensor"),
              std::string::npos);
}

}  // namespace
}  // namespace alps::model
