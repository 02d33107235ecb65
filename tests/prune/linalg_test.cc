// The CPU LAPACK/BLAS kernels of src/prune/linalg.h, checked by the identities they must satisfy.
#include "../../src/prune/linalg.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

namespace alps::prune::detail {
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
      const double tol = dtype == at::kFloat ? 2e-4 : 1e-10;
      at::Tensor Ad = A.to(dtype).to(at::kDouble), Qd = Q.to(at::kDouble), Ld = L.to(at::kDouble);
      const double scale = Ld.abs().max().item<double>();
      EXPECT_LT((Ad.mm(Qd) - Qd * Ld.unsqueeze(0)).abs().max().item<double>(), tol * scale);
      EXPECT_LT((Qd.t().mm(Qd) - at::eye(n, Qd.options())).abs().max().item<double>(), tol);
      if (n > 1) EXPECT_TRUE((L.slice(0, 1) >= L.slice(0, 0, n - 1)).all().item<bool>());
    }
  }
}

TEST(Linalg, GramIntoFillsBothTriangles) {
  at::manual_seed(1);
  for (auto shape : {std::pair<int64_t, int64_t>{1, 1}, {65, 3}, {130, 200}}) {
    at::Tensor A = at::randn({shape.first, shape.second});
    at::Tensor C = at::full({shape.first, shape.first}, NAN);
    gram_into(C, A);
    at::Tensor expected = A.to(at::kDouble).mm(A.to(at::kDouble).t());
    EXPECT_LT((C.to(at::kDouble) - expected).abs().max().item<double>(), 1e-4 * (1 + expected.abs().max().item<double>()));
  }
}

}  // namespace
}  // namespace alps::prune::detail
