// RMSNorm's fused CPU form against the exact value (fp64) and against its ATen form. Each output is w * (x * r) with
// r = rsqrt(mean(x^2) + eps). The fused form sums the squares in fp64, so its fp32 roundings remain, each a relative
// error of at most u = 2^-24: the mean's conversion and the eps sum (2u in sqrt's argument, u after it), sqrt
// itself, the reciprocal (3u in r), then the two products: 5u, and eps held in fp32 moves the argument by at most
// u (u/2 in r). 6u bounds the sum with its second-order terms. The ATen form's fp32 sum of n squares adds up to
// gamma_n more.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "model/rms_norm.h"
#include "support.h"

namespace alps::model {
namespace {

TEST(RmsNorm, FusedCpuFormIsWithinItsRoundingOfTheExactValue) {
  at::manual_seed(0);
  const double eps = 1e-5, u = 0x1p-24;
  for (int64_t n : {1, 7, 576, 4096}) {
    // Rows of very different scales, one of them all zeros (r = rsqrt(eps)), and outlier features.
    at::Tensor x = at::randn({3, 5, n}) * at::logspace(-3, 3, 5).view({1, 5, 1});
    x[0][0].zero_();
    x.select(-1, 0).mul_(50);
    const at::Tensor w = at::randn({n});
    const at::Tensor got = rms_norm(x, w, eps);
    const at::Tensor xd = x.to(at::kDouble), wd = w.to(at::kDouble);
    const at::Tensor exact = wd * xd * at::rsqrt(xd.pow(2).mean(-1, true) + eps);
    EXPECT_TRUE(((got.to(at::kDouble) - exact).abs() <= 6 * u * exact.abs()).all().item<bool>()) << n;
    const at::Tensor xf = x.to(at::kFloat);
    const at::Tensor aten = w * (xf * at::rsqrt(xf.pow(2).mean(-1, true) + eps));
    EXPECT_ALL_CLOSE(got, aten, 0, test::rounding_bound(static_cast<double>(n) + 6, 1.0));
    EXPECT_EQ(got.sizes(), x.sizes());
  }
}

// Other dtypes normalise in fp32 as transformers does, cast back, then scale.
TEST(RmsNorm, OtherDtypesTakeTheAtenForm) {
  at::manual_seed(1);
  const at::Tensor x = at::randn({4, 8}, at::kDouble), w = at::randn({8}, at::kDouble);
  const at::Tensor xf = x.to(at::kFloat);
  EXPECT_TRUE(at::equal(rms_norm(x, w, 1e-6), w * (xf * at::rsqrt(xf.pow(2).mean(-1, true) + 1e-6)).to(at::kDouble)));
}

}  // namespace
}  // namespace alps::model
