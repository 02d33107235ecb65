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

TEST(Mask, LargeSelectionsAreExact) {
  at::manual_seed(0);
  at::Tensor heavy = at::randn({1024, 600}).pow(3).abs();  // large enough for the banded path
  for (double s : {0.001, 0.3, 0.5, 0.7, 0.9, 0.999})
    expect_exact_selection(heavy, static_cast<int64_t>(s * heavy.numel()));
  // Many ties, and a layout whose strided sample is unrepresentative (every sampled entry is 0): both exact.
  at::Tensor ties = at::randint(0, 5, {700, 512}).to(at::kFloat);
  expect_exact_selection(ties, 200000);
  at::Tensor tricky = at::ones({1 << 19});
  tricky.slice(0, 0, 1 << 19, 8).zero_();
  expect_exact_selection(tricky, 300000);
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

// The CPU N:M kernel works on strided views (ALPS passes a transposed [in, out] iterate) and keeps, per group,
// the N largest, earlier column first on ties.
TEST(Mask, GroupsOnTransposedViewsMatchTopk) {
  at::manual_seed(2);
  at::Tensor base = at::randn({64, 48}).abs();  // viewed as [48, 64] through .t()
  base.slice(1, 0, 8).fill_(0.5);              // ties in every group of the first rows of the view
  for (const auto& pattern : {Pattern::n_m(2, 4), Pattern::n_m(1, 4), Pattern::n_m(4, 8), Pattern::n_m(3, 8)}) {
    at::Tensor view = base.t();  // [48, 64], stride (1, 48)
    at::Tensor keep = keep_mask_layer(view, pattern);
    ASSERT_EQ(keep.sizes(), view.sizes());
    at::Tensor grouped = view.contiguous().reshape({48, 64 / pattern.m(), pattern.m()});
    at::Tensor order = std::get<1>(grouped.sort(/*stable=*/true, 2, /*descending=*/true));
    at::Tensor expected = at::zeros_like(grouped, at::kBool).scatter_(2, order.narrow(2, 0, pattern.n()), true);
    EXPECT_TRUE(keep.contiguous().equal(expected.reshape({48, 64}))) << pattern.str();
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
