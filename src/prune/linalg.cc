#include "linalg.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "alps/core/error.h"

#ifdef ALPS_HAVE_LAPACK
extern "C" {
void ssyevd_(const char* jobz, const char* uplo, const int* n, float* a, const int* lda, float* w, float* work,
             const int* lwork, int* iwork, const int* liwork, int* info);
void dsyevd_(const char* jobz, const char* uplo, const int* n, double* a, const int* lda, double* w, double* work,
             const int* lwork, int* iwork, const int* liwork, int* info);
void ssyrk_(const char* uplo, const char* trans, const int* n, const int* k, const float* alpha, const float* a,
            const int* lda, const float* beta, float* c, const int* ldc);
}
#endif

namespace alps::prune::detail {

namespace {
#ifdef ALPS_HAVE_LAPACK
bool lapack_eligible(const at::Tensor& t) {
  return t.device().is_cpu() && (t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble) &&
         t.size(0) <= 32000;  // the workspace size 1 + 6n + 2n^2 must fit LAPACK's 32-bit integers
}

template <typename T, typename Syevd>
std::pair<at::Tensor, at::Tensor> syevd(const at::Tensor& A, Syevd fn) {
  const int n = static_cast<int>(A.size(0));
  // Row-major A is column-major A^T = A; the eigenvectors come back as columns of the column-major array, i.e.
  // as rows of the row-major tensor.
  at::Tensor work_matrix = A.contiguous().clone();
  at::Tensor L = at::empty({n}, A.options());
  // Documented minimum sizes for jobz = V instead of the workspace query, which returns the size as a float.
  const int lwork = 1 + 6 * n + 2 * n * n, liwork = 3 + 5 * n;
  std::vector<T> work(static_cast<size_t>(lwork));
  std::vector<int> iwork(static_cast<size_t>(liwork));
  int info = 0;
  fn("V", "U", &n, work_matrix.data_ptr<T>(), &n, L.data_ptr<T>(), work.data(), &lwork, iwork.data(), &liwork, &info);
  ALPS_CHECK(info == 0, "eigendecomposition of a ", n, "x", n, " matrix failed (LAPACK syevd info ", info,
             info > 0 ? ": did not converge; NaN or Inf in the Gram matrix?" : "", ")");
  return {L, work_matrix.t().contiguous()};
}
#endif

// Copies the lower triangle of a row-major square matrix onto its upper one, in cache-sized tiles.
void mirror_lower_to_upper(float* c, int64_t n) {
  constexpr int64_t kTile = 64;
  for (int64_t i0 = 0; i0 < n; i0 += kTile)
    for (int64_t j0 = i0; j0 < n; j0 += kTile)
      for (int64_t i = i0; i < std::min(i0 + kTile, n); ++i)
        for (int64_t j = std::max(j0, i + 1); j < std::min(j0 + kTile, n); ++j) c[i * n + j] = c[j * n + i];
}
}  // namespace

std::pair<at::Tensor, at::Tensor> symmetric_eigh(const at::Tensor& A) {
  ALPS_CHECK(A.dim() == 2 && A.size(0) == A.size(1), "symmetric_eigh: expected a square matrix, got ", A.sizes());
#ifdef ALPS_HAVE_LAPACK
  if (lapack_eligible(A)) {
    if (A.scalar_type() == at::kFloat) return syevd<float>(A, ssyevd_);
    return syevd<double>(A, dsyevd_);
  }
#endif
  // libtorch 1.13's own fp32 CPU eigh fails from n ~ 3000 on (its workspace size passes through a float).
  if (A.device().is_cpu() && A.scalar_type() == at::kFloat) {
    auto [L, Q] = at::linalg_eigh(A.to(at::kDouble));
    return {L.to(at::kFloat), Q.to(at::kFloat).contiguous()};
  }
  auto [L, Q] = at::linalg_eigh(A);
  return {L, Q.contiguous()};
}

bool gram_is_syrk(const at::Device& device) {
#ifdef ALPS_HAVE_LAPACK
  return device.is_cpu();
#else
  return false;
#endif
}

void gram_into(at::Tensor& C, const at::Tensor& A) {
  const int64_t n = A.size(0), k = A.size(1);
  ALPS_CHECK(C.is_contiguous() && C.size(0) == n && C.size(1) == n, "gram_into: C must be a contiguous ", n, "x", n,
             " matrix");
#ifdef ALPS_HAVE_LAPACK
  if (gram_is_syrk(A.device()) && A.scalar_type() == at::kFloat && C.scalar_type() == at::kFloat &&
      A.is_contiguous() && n <= std::numeric_limits<int>::max() && k <= std::numeric_limits<int>::max()) {
    // Row-major A [n, k] is column-major A^T [k, n]: C = (A^T)^T A^T is syrk with trans = T. Column-major "U"
    // is the row-major lower triangle.
    const int ni = static_cast<int>(n), ki = static_cast<int>(k);
    const float one = 1.0f, zero = 0.0f;
    ssyrk_("U", "T", &ni, &ki, &one, A.data_ptr<float>(), &ki, &zero, C.data_ptr<float>(), &ni);
    mirror_lower_to_upper(C.data_ptr<float>(), n);
    return;
  }
#endif
  at::mm_out(C, A, A.t());
}

}  // namespace alps::prune::detail
