// The private top-k selection every method relies on (src/prune/mask.h).
#include "../../src/prune/mask.h"

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
  for (double s : {0.001, 0.3, 0.5, 0.7, 0.9, 0.999}) expect_exact_selection(heavy, static_cast<int64_t>(s * heavy.numel()));
  // Many ties, and a layout whose strided sample is unrepresentative (every sampled entry is 0): both exact.
  at::Tensor ties = at::randint(0, 5, {700, 512}).to(at::kFloat);
  expect_exact_selection(ties, 200000);
  at::Tensor tricky = at::ones({1 << 19});
  tricky.slice(0, 0, 1 << 19, 8).zero_();
  expect_exact_selection(tricky, 300000);
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
