// The dense symmetric kernels of include/alps/core/linalg.h, checked by the identities they must satisfy.
#include "alps/core/linalg.h"

#include "alps/core/error.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "support.h"

namespace alps {
namespace {

// A Q = Q diag(L), Q^T Q = I, L ascending, in both precisions; n = 3072 (fp32 only, to keep the suite fast) is
// where libtorch 1.13's own fp32 eigh fails.
TEST(Linalg, SymmetricEighIsAnEigendecomposition) {
  at::manual_seed(0);
  for (int64_t n : {1, 7, 300, 3072}) {
    at::Tensor X = at::randn({n + 50, n}, at::kDouble);
    at::Tensor A = X.t().mm(X) / (n + 50);
    for (auto dtype : {at::kFloat, at::kDouble}) {
      if (n > 1000 && dtype == at::kDouble) continue;
      SCOPED_TRACE(std::to_string(n) + (dtype == at::kFloat ? " fp32" : " fp64"));
      auto [L, Q] = symmetric_eigh(A.to(dtype));
      ASSERT_EQ(L.scalar_type(), dtype);
      ASSERT_EQ(Q.sizes(), A.sizes());
      EXPECT_TRUE(Q.is_contiguous());
      // A backward-stable eigensolver: residual and loss of orthogonality p(n) ulp (ulp = 2u, relative to |A|_1 for
      // the residual), where p(n) = c n with a constant that depends on the kernels (tridiagonal reduction, divide
      // and conquer or QR steps for n <= 25) and so on the CPU: n ulp fails at n = 7 on some. LAPACK accepts its
      // own symmetric eigensolvers' |A - Q L Q^T|_1 / (|A|_1 n ulp) and |I - Q^T Q|_1 / (n ulp) below 60; the
      // largest entries compared here are at most those 1-norms. fp64 keeps its fixed, already generous 1e-10.
      const double tol = dtype == at::kFloat ? 60 * static_cast<double>(n) * 0x1p-23 : 1e-10;
      at::Tensor Ad = A.to(dtype).to(at::kDouble), Qd = Q.to(at::kDouble), Ld = L.to(at::kDouble);
      const double scale = Ad.abs().sum(0).max().item<double>();
      EXPECT_LT((Ad.mm(Qd) - Qd * Ld.unsqueeze(0)).abs().max().item<double>(), tol * scale);
      EXPECT_LT((Qd.t().mm(Qd) - at::eye(n, Qd.options())).abs().max().item<double>(), tol);
      if (n > 1) EXPECT_TRUE((L.slice(0, 1) >= L.slice(0, 0, n - 1)).all().item<bool>());
    }
  }
}

// Lower triangle = beta C + op(A) op(A)^T in both layouts and precisions; mirror_lower makes it the full matrix.
// The upper triangle starts as NaN so that a kernel reading or writing the wrong triangle cannot pass.
TEST(Linalg, SyrkLowerAccumulatesAndMirrorCompletes) {
  at::manual_seed(1);
  for (auto dtype : {at::kFloat, at::kDouble}) {
    for (auto shape : {std::pair<int64_t, int64_t>{1, 1}, {65, 3}, {130, 200}}) {
      const int64_t n = shape.first, k = shape.second;
      for (bool transpose_a : {false, true}) {
        SCOPED_TRACE(std::to_string(n) + "x" + std::to_string(k) + (transpose_a ? " A^T A" : " A A^T"));
        at::Tensor A = transpose_a ? at::randn({k, n}, dtype) : at::randn({n, k}, dtype);
        at::Tensor opA = (transpose_a ? A.t() : A).to(at::kDouble);
        at::Tensor C0 = at::randn({n, n}, dtype);
        C0 = C0 + C0.t();
        at::Tensor C = C0.tril() + at::full({n, n}, NAN, dtype).triu(1);
        syrk_lower(C, A, transpose_a, 0.5);
        at::Tensor expected = 0.5 * C0.to(at::kDouble) + opA.mm(opA.t());
        // k-term dot products plus one scaled addition: within gamma_{k+1} of the sum of the absolute terms,
        // which the diagonal (the largest |entry| of expected, Cauchy-Schwarz) plus 0.5 |C0| bounds.
        const double tol = dtype == at::kFloat
                               ? test::rounding_bound(static_cast<double>(k + 1),
                                                      1 + expected.abs().max().item<double>() +
                                                          C0.abs().max().item<double>())
                               : 1e-10 * (1 + expected.abs().max().item<double>());
        EXPECT_LT((C.tril() - expected.tril()).abs().max().item<double>(), tol);
        mirror_lower(C);
        EXPECT_LT((C.to(at::kDouble) - expected).abs().max().item<double>(), tol);
        EXPECT_TRUE(C.equal(C.t()));
      }
    }
  }
}

// gram_update's half-precision path (a GPU): fp16 and bf16 inputs give the Gram of the upcast inputs within the
// rounding of fp32 sums alone, i.e. their products are not rounded: every entry within gamma_2T (fp32, the worst
// case: the matrix units' sums need not round to nearest) of |X|^T |X| of the exact fp64 Gram, over two batches of
// T tokens. A rounded result (what a plain half-precision matrix product gives), like rounded products, is off by
// up to 2^-11 (fp16) of that, 8 times more, and misses the bound: the check tells the two apart.
// The blocked substitution against LAPACK's (potrs) on one factor: blocks that divide n and blocks that do not, one
// block (plain products with the inverted factor). Both solves are backward stable: they differ by at most about
// cond(A) n u relative; cond(A) < 100 here (eigenvalues in [0.05, 4]), n = 37: 2e-4 in fp32 (u = 6e-8), 1e-12 is
// far above it in fp64.
TEST(Linalg, CholeskySolverIsCholeskySolve) {
  at::manual_seed(4);
  for (const auto dtype : {at::kDouble, at::kFloat}) {
    const int64_t n = 37, k = 5;
    const at::Tensor X = at::randn({n + 3, n}, at::TensorOptions().dtype(dtype));
    at::Tensor A = X.t().mm(X) / (n + 3);
    A.diagonal().add_(0.05);
    const at::Tensor C = at::linalg_cholesky(A), R = at::randn({n, k}, A.options());
    const at::Tensor want = at::cholesky_solve(R, C, /*upper=*/false);
    for (int64_t block : {1, 8, 37, 64}) {
      at::Tensor got = at::empty_like(R);
      CholeskySolver(C, Fp32Products::kNative, block).solve(R, got);
      const double tol = dtype == at::kDouble ? 1e-12 : 5e-4;
      EXPECT_LE((got - want).norm().item<double>(), tol * want.norm().item<double>())
          << at::toString(dtype) << " block " << block;
    }
  }
}

TEST(Linalg, GramUpdateFromHalfInputsIsTheFp32Gram_CUDA) {
  at::manual_seed(4);
  for (auto dtype : {at::kHalf, at::kBFloat16}) {
    SCOPED_TRACE(dtype == at::kHalf ? "fp16" : "bf16");
    const int64_t T = 256, n = 320;
    const auto cuda = at::TensorOptions().device(at::kCUDA);
    ASSERT_TRUE(gram_takes_half_inputs(dtype, cuda.device()));
    at::Tensor G = at::zeros({n, n}, cuda.dtype(at::kFloat));
    at::Tensor G64 = at::zeros({n, n}, at::kDouble), bound = at::zeros({n, n}, at::kDouble);
    for (int batch = 0; batch < 2; ++batch) {
      const at::Tensor X = (at::randn({T, n}, cuda) * (1 + batch)).to(dtype);
      gram_update(G, X);
      const at::Tensor Xd = X.cpu().to(at::kDouble);
      G64 += Xd.t().mm(Xd);
      bound += Xd.abs().t().mm(Xd.abs());
    }
    mirror_lower(G);
    const at::Tensor err = (G.cpu().to(at::kDouble) - G64).abs();
    const double u = 0x1p-24, gamma = 2 * T * u / (1 - 2 * T * u);
    EXPECT_TRUE((err <= gamma * bound).all().item<bool>()) << "worst ratio "
        << (err / (gamma * bound)).max().item<double>();
    // A half-precision result rounds every entry to 2^-11 (fp16) or 2^-8 (bf16) relative: beyond that bound.
    const at::Tensor X = at::randn({T, n}, cuda).to(dtype);
    const at::Tensor Xd = X.cpu().to(at::kDouble);
    const at::Tensor lossy = (X.t().mm(X).cpu().to(at::kDouble) - Xd.t().mm(Xd)).abs();
    EXPECT_FALSE((lossy <= gamma * Xd.abs().t().mm(Xd.abs())).all().item<bool>());
  }
}

// Elsewhere (the CPU, or fp64 statistics) half inputs are converted to G's dtype first: the syrk of the upcast X.
TEST(Linalg, GramUpdateConvertsWhereHalfInputsAreNotTaken) {
  at::manual_seed(5);
  const at::Tensor X = at::randn({200, 24}).to(at::kBFloat16);
  EXPECT_FALSE(gram_takes_half_inputs(at::kBFloat16, at::Device(at::kCPU)));
  for (auto dtype : {at::kFloat, at::kDouble}) {
    at::Tensor G = at::zeros({24, 24}, dtype), ref = at::zeros({24, 24}, dtype);
    gram_update(G, X);
    syrk_lower(ref, X.to(dtype).contiguous(), /*transpose_a=*/true, 1.0);
    EXPECT_TRUE(G.tril().equal(ref.tril()));
  }
  at::Tensor wrong = at::zeros({23, 23});
  EXPECT_THROW(gram_update(wrong, X), Error);
}

}  // namespace
}  // namespace alps
