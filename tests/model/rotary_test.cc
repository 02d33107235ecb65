// The fused CPU rotary embedding against its ATen form (x * cat(cos, cos) + rotate_half(x) * cat(sin, sin)): equal to
// the bit, in the layout the forwards give it (heads transposed out of [B, T, H, D]) and in a contiguous one, with
// tables per sequence (packed positions) or shared by the batch; and the other dtypes, which take the ATen form.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include "model/rotary.h"

namespace alps::model {
namespace {

at::Tensor aten_form(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  const at::Tensor rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);
  return x * at::cat({cos, cos}, -1) + rotated * at::cat({sin, sin}, -1);
}

TEST(Rotary, FusedCpuFormEqualsTheAtenFormToTheBit) {
  at::manual_seed(0);
  const int64_t B = 3, H = 5, T = 17, D = 64;
  for (int64_t table_batch : {int64_t{1}, B}) {
    const at::Tensor angles = at::rand({table_batch, 1, T, D / 2}) * 40;
    const at::Tensor cos = angles.cos(), sin = angles.sin();
    const at::Tensor transposed = at::randn({B, T, H, D}).transpose(1, 2), contiguous = at::randn({B, H, T, D});
    for (const at::Tensor& x : {transposed, contiguous}) {
      const at::Tensor got = apply_rotary(x, cos, sin), want = aten_form(x, cos, sin);
      EXPECT_TRUE(at::equal(got, want)) << "table batch " << table_batch << ", max |diff| "
                                        << (got - want).abs().max().item<double>();
      EXPECT_EQ(got.strides(), want.strides());
    }
  }
  // Rotating by zero changes nothing; by a quarter turn, (x_j, x_j+D/2) becomes (-x_j+D/2, x_j).
  const at::Tensor x = at::randn({1, 2, 3, 4});
  EXPECT_TRUE(at::equal(apply_rotary(x, at::ones({1, 1, 3, 2}), at::zeros({1, 1, 3, 2})), x));
  EXPECT_TRUE(at::equal(apply_rotary(x, at::zeros({1, 1, 3, 2}), at::ones({1, 1, 3, 2})),
                        at::cat({-x.narrow(-1, 2, 2), x.narrow(-1, 0, 2)}, -1)));
}

// Other dtypes, and tables of other shapes that broadcast (one angle row for every position), take the ATen form.
TEST(Rotary, OtherDtypesAndBroadcastTablesTakeTheAtenForm) {
  at::manual_seed(1);
  const at::Tensor x = at::randn({2, 3, 7, 8}, at::kDouble), angles = at::rand({1, 1, 7, 4}, at::kDouble);
  EXPECT_TRUE(at::equal(apply_rotary(x, angles.cos(), angles.sin()), aten_form(x, angles.cos(), angles.sin())));
  const at::Tensor xf = x.to(at::kFloat), row = at::rand({1, 1, 1, 4});
  EXPECT_TRUE(at::equal(apply_rotary(xf, row.cos(), row.sin()), aten_form(xf, row.cos(), row.sin())));
}

}  // namespace
}  // namespace alps::model
