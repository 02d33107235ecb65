// The private top-k selection every method relies on (src/prune/mask.h).
#include "prune/mask.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace alps::prune::detail {
namespace {

// Exactly `zeros` pruned, and no pruned score above a kept one.
void expect_exact_selection(const at::Tensor& score, int64_t zeros) {
  at::Tensor keep = keep_largest(score, zeros);
  ASSERT_EQ(keep.sizes(), score.sizes());
  EXPECT_EQ(keep.logical_not().sum().item<int64_t>(), zeros);
  if (zeros > 0 && zeros < score.numel())
    EXPECT_LE(score.masked_select(keep.logical_not()).max().item<double>(),
              score.masked_select(keep).min().item<double>());
}

// fp32 on the CPU runs the radix select; fp64 runs the ATen path a GPU runs (banded, its fallback to topk).
TEST(Mask, LargeSelectionsAreExact) {
  for (const auto dtype : {at::kFloat, at::kDouble}) {
    SCOPED_TRACE(at::toString(dtype));
    at::manual_seed(0);
    at::Tensor heavy = at::randn({1024, 600}, dtype).pow(3).abs();  // large enough for the banded path
    for (double s : {0.001, 0.3, 0.5, 0.7, 0.9, 0.999})
      expect_exact_selection(heavy, static_cast<int64_t>(s * heavy.numel()));
    // Many ties, and a layout whose strided sample (every second entry here) is unrepresentative: every sampled
    // entry is 0, so the band misses the cut and the selection falls back to a full topk. Both exact.
    at::Tensor ties = at::randint(0, 5, {700, 512}).to(dtype);
    expect_exact_selection(ties, 200000);
    at::Tensor tricky = at::ones({1 << 19}, dtype);
    tricky.slice(0, 0, 1 << 19, 2).zero_();
    expect_exact_selection(tricky, 300000);
  }
}

// The CPU radix select must pick the same set as a sort-based reference, on signed scores with many ties
// (ties: the first ones in memory order go), and on scores whose keys share their high 16 bits.
TEST(Mask, RadixSelectMatchesASortReference) {
  at::manual_seed(1);
  for (const at::Tensor& score : {at::randn({300, 200}), at::randint(-3, 4, {257, 31}).to(at::kFloat),
                                  1.0f + at::rand({1000}) * 1e-4f, at::zeros({64})}) {
    const int64_t numel = score.numel();
    for (int64_t zeros : {int64_t{1}, numel / 3, numel / 2, numel - 1}) {
      at::Tensor keep = keep_largest(score, zeros);
      // Reference: stable ascending sort; the first `zeros` positions are pruned.
      at::Tensor order = std::get<1>(score.reshape({-1}).sort(/*stable=*/true, 0, /*descending=*/false));
      at::Tensor expected = at::ones({numel}, at::kBool);
      expected.index_fill_(0, order.slice(0, 0, zeros), false);
      EXPECT_TRUE(keep.reshape({-1}).equal(expected)) << "numel " << numel << " zeros " << zeros;
    }
  }
}

// The N:M masks work on strided views (ALPS passes a transposed [in, out] iterate) and keep, per group, the N
// largest, earlier column first on ties: the CPU kernel (fp32) and the ATen rank-by-count (fp64, as on a GPU) alike.
TEST(Mask, GroupsOnTransposedViewsMatchTopk) {
  for (const auto dtype : {at::kFloat, at::kDouble}) {
    SCOPED_TRACE(at::toString(dtype));
    at::manual_seed(2);
    at::Tensor base = at::randn({64, 48}, dtype).abs();  // viewed as [48, 64] through .t()
    base.slice(1, 0, 8).fill_(0.5);                     // ties in every group of the first rows of the view
    for (const auto& pattern : {Pattern::n_m(2, 4), Pattern::n_m(1, 4), Pattern::n_m(4, 8), Pattern::n_m(3, 8),
                                Pattern::n_m(2, 16)}) {
      at::Tensor view = base.t();  // [48, 64], stride (1, 48)
      at::Tensor keep = keep_mask_layer(view, pattern);
      ASSERT_EQ(keep.sizes(), view.sizes());
      at::Tensor grouped = view.contiguous().reshape({48, 64 / pattern.m(), pattern.m()});
      at::Tensor order = std::get<1>(grouped.sort(/*stable=*/true, 2, /*descending=*/true));
      at::Tensor expected = at::zeros_like(grouped, at::kBool).scatter_(2, order.narrow(2, 0, pattern.n()), true);
      if (pattern.m() > 8) {  // topk along the group: the same set but for ties, which it may break otherwise
        EXPECT_EQ(keep.sum().item<int64_t>(), expected.sum().item<int64_t>()) << pattern.str();
        EXPECT_TRUE(keep.logical_xor(expected.reshape({48, 64})).logical_and(view.ne(0.5)).sum().item<int64_t>() ==
                    0)
            << pattern.str();
        continue;
      }
      EXPECT_TRUE(keep.contiguous().equal(expected.reshape({48, 64}))) << pattern.str();
    }
  }
}

// On a GPU the ATen paths: N:M masks identical to the CPU's, unstructured ones exact and equal where nothing ties.
TEST(Mask, TheGpuSelectsWhatTheCpuSelects_CUDA) {
  at::manual_seed(3);
  const at::Tensor score = at::randn({1024, 768}).abs();
  const at::Tensor on_gpu = score.cuda();
  for (const auto& pattern : {Pattern::n_m(2, 4), Pattern::n_m(4, 8)})
    EXPECT_TRUE(keep_mask_layer(on_gpu.t(), pattern).cpu().equal(keep_mask_layer(score.t(), pattern)))
        << pattern.str();
  for (double s : {0.001, 0.5, 0.7, 0.999}) {
    const int64_t zeros = static_cast<int64_t>(s * static_cast<double>(score.numel()));
    EXPECT_TRUE(keep_largest(on_gpu, zeros).cpu().equal(keep_largest(score, zeros))) << s;
  }
}

TEST(Mask, GroupsAndRows) {
  at::Tensor score = at::tensor({4.f, 1.f, 3.f, 2.f, 0.f, 5.f, 6.f, 7.f}).reshape({2, 4});
  EXPECT_TRUE(keep_mask_layer(score, Pattern::n_m(2, 4))
                  .equal(at::tensor({1, 0, 1, 0, 0, 0, 1, 1}).reshape({2, 4}).to(at::kBool)));
  EXPECT_TRUE(keep_mask_rows(score, Pattern::unstructured(0.5))
                  .equal(at::tensor({1, 0, 1, 0, 0, 0, 1, 1}).reshape({2, 4}).to(at::kBool)));
  EXPECT_TRUE(keep_mask_layer(score, Pattern::unstructured(0.25))
                  .equal(at::tensor({1, 0, 1, 1, 0, 1, 1, 1}).reshape({2, 4}).to(at::kBool)));
}

}  // namespace
}  // namespace alps::prune::detail
