// Split TF32 products (include/alps/core/products.h) against fp64 products, with bounds from their arithmetic.
#include "alps/core/products.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>

#include "alps/core/error.h"
#include "alps/core/linalg.h"
#include "support.h"

namespace alps {
namespace {

constexpr double kU = 1.0 / (1 << 24);  // fp32's unit roundoff

uint32_t bits_of(float x) {
  uint32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}

// hi keeps 11 significant bits (the 13 low bits of the significand are zero) and errs by at most half a unit in its
// last place, 2^-11 of |x|; lo = round(x - hi) leaves at most 2^-22 of |x|. A carry into the exponent rounds up to
// the next power of two.
TEST(Products, RoundToTf32KeepsElevenBitsToNearest) {
  at::manual_seed(0);
  const at::Tensor x = at::cat({at::randn({4096}) * 1e3, at::randn({4096}) * 1e-30,
                                at::tensor({0.0f, -1.0f, 1.99999988f, 1.0f + 1.0f / 2048, 1.0f + 3.0f / 4096})});
  const at::Tensor hi = round_to_tf32(x), lo = round_to_tf32(x - hi);
  const float* xs = x.data_ptr<float>();
  const float* his = hi.data_ptr<float>();
  const float* los = lo.data_ptr<float>();
  for (int64_t i = 0; i < x.numel(); ++i) {
    SCOPED_TRACE(xs[i]);
    EXPECT_EQ(bits_of(his[i]) & 0x1FFFu, 0u);
    EXPECT_EQ(bits_of(los[i]) & 0x1FFFu, 0u);
    EXPECT_LE(std::abs(double(xs[i]) - his[i]), std::ldexp(std::abs(double(xs[i])), -11));
    EXPECT_LE(std::abs(double(xs[i]) - his[i] - los[i]), std::ldexp(std::abs(double(xs[i])), -22));
  }
  const int64_t n = x.numel();
  EXPECT_EQ(his[n - 5], 0.0f);
  EXPECT_EQ(his[n - 4], -1.0f);
  EXPECT_EQ(his[n - 3], 2.0f);                 // 2 - 2^-23: the carry reaches the exponent
  EXPECT_EQ(his[n - 2], 1.0f + 1.0f / 1024);   // 1 + 2^-11: a tie, away from zero
  EXPECT_EQ(his[n - 1], 1.0f + 1.0f / 1024);   // 1 + 3 * 2^-12: to the nearest
  EXPECT_THROW(round_to_tf32(x.to(at::kDouble)), Error);
}

// |C - A B| <= eps (|A||B|) elementwise, with eps = 3 * 2^-22 (the split's three terms: hi's and lo's rounding and
// the dropped lo lo) + (3k + 3) u (the sums of three products of k terms each and their accumulation, fp32's worst
// case). Checked for C = A B and C = M - A B with operands that are views (a transpose, a narrowed block) and an
// output that is one; and a single TF32 product, which a broken split would amount to, errs 50x more.
void expect_split_products_within_bound(const at::TensorOptions& on) {
  at::manual_seed(1);
  const int64_t m = 70, k = 200, n = 90;
  const double eps = 3 * std::ldexp(1.0, -22) + (3 * k + 3) * kU;
  const at::Tensor A64 = at::randn({m, k}, at::kDouble), B64 = at::randn({k, n}, at::kDouble),
                   M64 = at::randn({m, n}, at::kDouble);
  const at::Tensor bound = A64.abs().mm(B64.abs()) * eps;
  const at::Tensor A = A64.to(on.dtype(at::kFloat)), B = B64.to(on.dtype(at::kFloat)), M = M64.to(on.dtype(at::kFloat));
  // The fp64 products of the fp32 operands (the inputs' own rounding is not the products' error).
  const at::Tensor AB = A.to(at::kDouble).cpu().mm(B.to(at::kDouble).cpu());

  at::Tensor C = at::empty({m, n}, A.options());
  Fp32Matrix(A, Fp32Products::kSplitTf32).mm_out(C, B);
  EXPECT_TRUE(((C.cpu().to(at::kDouble) - AB).abs() <= bound).all().item<bool>());
  const double split_error = (C.cpu().to(at::kDouble) - AB).abs().max().item<double>();
  const double single_error =
      (round_to_tf32(A).mm(round_to_tf32(B)).cpu().to(at::kDouble) - AB).abs().max().item<double>();
  EXPECT_LT(50 * split_error, single_error);

  // A transposed view as the left operand, a narrowed block of a wider output, C = M - A B.
  const at::Tensor At = A.t().contiguous();
  at::Tensor wide = at::zeros({m, n + 7}, A.options());
  at::Tensor Cv = wide.narrow(1, 3, n);
  Fp32Matrix(At, Fp32Products::kSplitTf32).t().addmm_out(Cv, M, B, 1.0, -1.0);
  const at::Tensor expected = M.to(at::kDouble).cpu() - AB;
  EXPECT_TRUE(((Cv.cpu().to(at::kDouble) - expected).abs() <= bound + M64.abs() * kU).all().item<bool>());
  EXPECT_EQ(wide.narrow(1, 0, 3).abs().sum().item<double>(), 0.0);  // nothing outside the view
  // M may be C itself, and a transposed right operand serves as well.
  at::Tensor C2 = M.clone();
  Fp32Matrix(A, Fp32Products::kSplitTf32).addmm_out(C2, C2, B.t().contiguous().t(), 1.0, -1.0);
  EXPECT_TRUE(((C2.cpu().to(at::kDouble) - expected).abs() <= bound + M64.abs() * kU).all().item<bool>());
}

TEST(Products, SplitProductsHaveFp32Accuracy) { expect_split_products_within_bound(at::TensorOptions()); }

TEST(Products, SplitProductsOnTheTensorCores_CUDA) {
  const auto cuda = at::TensorOptions().device(at::kCUDA);
  ASSERT_TRUE(detail::has_tf32_products(cuda.device())) << "a GPU before compute capability 8.0";
  EXPECT_EQ(fp32_products_for("auto", cuda.device(), "test"), Fp32Products::kSplitTf32);
  expect_split_products_within_bound(cuda);
}

TEST(Products, NamesAndNativeProducts) {
  EXPECT_EQ(fp32_products_for("auto", at::Device(at::kCPU), "x"), Fp32Products::kNative);
  EXPECT_EQ(fp32_products_for("fp32", at::Device(at::kCPU), "x"), Fp32Products::kNative);
  EXPECT_EQ(fp32_products_for("tf32x3", at::Device(at::kCPU), "x"), Fp32Products::kSplitTf32);
  EXPECT_NE(test::error_message([] { fp32_products_for("tf32", at::Device(at::kCPU), "alps: products"); })
                .find("alps: products: expected auto, fp32 or tf32x3, got 'tf32'"),
            std::string::npos);
  // Native: ATen's own product, bit for bit; fp64 operands are never split.
  at::manual_seed(2);
  const at::Tensor A = at::randn({30, 40}), B = at::randn({40, 20});
  at::Tensor C = at::empty({30, 20});
  Fp32Matrix(A, Fp32Products::kNative).mm_out(C, B);
  EXPECT_TRUE(at::equal(C, A.mm(B)));
  const at::Tensor A64 = A.to(at::kDouble), B64 = B.to(at::kDouble);
  at::Tensor C64 = at::empty({30, 20}, at::kDouble);
  const Fp32Matrix split64(A64, Fp32Products::kSplitTf32);
  EXPECT_EQ(split64.how(), Fp32Products::kNative);
  split64.mm_out(C64, B64);
  EXPECT_TRUE(at::equal(C64, A64.mm(B64)));
}

// A matrix split rows at a time as they are made (CholeskySolver's solved blocks) is the matrix split at once: the
// products with either are the same bits.
TEST(Products, SplitRowsAsTheyAreMade) {
  at::manual_seed(4);
  const at::Tensor A = at::randn({20, 50}), X = at::randn({50, 30});
  const Fp32Matrix a(A, Fp32Products::kSplitTf32);
  Fp32Matrix rows = Fp32Matrix::rows_of(X, Fp32Products::kSplitTf32);
  rows.store_rows(X, 0, 17);
  rows.store_rows(X, 17, 33);
  at::Tensor at_once = at::empty({20, 30}), by_rows = at::empty({20, 30});
  a.mm_out(at_once, X);
  a.mm_out(by_rows, rows);
  EXPECT_TRUE(at::equal(at_once, by_rows));
  // Native: the matrix is X itself, nothing to store.
  const Fp32Matrix native = Fp32Matrix::rows_of(X, Fp32Products::kNative);
  Fp32Matrix(A, Fp32Products::kNative).mm_out(by_rows, native);
  EXPECT_TRUE(at::equal(by_rows, A.mm(X)));
  EXPECT_THROW(a.mm_out(by_rows, native), Error);  // a split operand times a native one
}

// CholeskySolver with split products: every step of its substitutions is a product with the per-product bound above,
// so the solution's relative error stays within kappa(A) times that bound's eps (first order), as the native one's
// does with its own (k + 1) u.
TEST(Products, CholeskySolverWithSplitProducts) {
  at::manual_seed(3);
  const int64_t n = 300, k = 40;
  const at::Tensor X = at::randn({n + 100, n}, at::kDouble);
  const at::Tensor A64 = X.t().mm(X) / (n + 100) + at::eye(n, at::kDouble);  // kappa ~ 5
  const at::Tensor eig = at::linalg_eigvalsh(A64);
  const double kappa = (eig.max() / eig.min()).item<double>();
  const at::Tensor R64 = at::randn({n, k}, at::kDouble);
  const at::Tensor C = at::linalg_cholesky(A64).to(at::kFloat), R = R64.to(at::kFloat);
  // The solution of the fp32 system: C's and R's own rounding is not the solver's error.
  const at::Tensor C64 = C.to(at::kDouble);
  const at::Tensor X64 = at::cholesky_solve(R.to(at::kDouble), C64, /*upper=*/false);
  for (auto products : {Fp32Products::kNative, Fp32Products::kSplitTf32}) {
    SCOPED_TRACE(products == Fp32Products::kNative ? "native" : "split");
    const double eps = products == Fp32Products::kNative ? (n + 1) * kU : 3 * std::ldexp(1.0, -22) + (3 * n + 3) * kU;
    at::Tensor got = at::empty_like(R);
    CholeskySolver(C, products, /*block=*/64).solve(R, got);
    const double rel = ((got.to(at::kDouble) - X64).norm() / X64.norm()).item<double>();
    EXPECT_LE(rel, 2 * kappa * eps);
  }
}

// The factorization by blocks (CholeskySolver::factor), with native and with split products: its factor's backward
// error is first order at most eps |C| |C^T| (every entry of C C^T is a sum of products, each within the products'
// bound), so the solution moves by at most kappa eps || |C| |C^T| || / ||A|| beyond the substitutions' own
// 2 kappa eps (the test above). Blocks that divide n, that do not, one block; and a matrix that is not positive
// definite is refused.
TEST(Products, CholeskyFactorByBlocksSolvesWithinTheProductsBound) {
  at::manual_seed(5);
  const int64_t n = 300, k = 40;
  const at::Tensor X = at::randn({n + 100, n}, at::kDouble);
  const at::Tensor A = (X.t().mm(X) / (n + 100) + at::eye(n, at::kDouble)).to(at::kFloat);
  const at::Tensor A64 = A.to(at::kDouble), R = at::randn({n, k}, at::kFloat);
  const at::Tensor eig = at::linalg_eigvalsh(A64);
  const double kappa = (eig.max() / eig.min()).item<double>();
  const at::Tensor X64 = at::linalg_solve(A64, R.to(at::kDouble));  // the fp32 system's exact solution
  const at::Tensor C64 = at::linalg_cholesky(A64);
  const double growth = (C64.abs().mm(C64.abs().t()).norm() / A64.norm()).item<double>();
  for (auto products : {Fp32Products::kNative, Fp32Products::kSplitTf32}) {
    const double eps = products == Fp32Products::kNative ? (n + 1) * kU : 3 * std::ldexp(1.0, -22) + (3 * n + 3) * kU;
    for (int64_t block : {64, 100, 300, 512}) {
      SCOPED_TRACE(std::string(products == Fp32Products::kNative ? "native" : "split") + " block " +
                   std::to_string(block));
      std::optional<CholeskySolver> f = CholeskySolver::factor(A.clone(), products, block);
      ASSERT_TRUE(f.has_value());
      at::Tensor got = at::empty_like(R);
      f->solve(R, got);
      const double rel = ((got.to(at::kDouble) - X64).norm() / X64.norm()).item<double>();
      EXPECT_LE(rel, kappa * eps * (growth + 2));
    }
  }
  at::Tensor indefinite = A.clone();
  indefinite[200][200] = -1.0f;  // a negative pivot in the third block of 64
  EXPECT_FALSE(CholeskySolver::factor(indefinite, Fp32Products::kSplitTf32, 64).has_value());
}

}  // namespace
}  // namespace alps
