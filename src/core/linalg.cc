#include "alps/core/linalg.h"

#include <ATen/ATen.h>
#include <torch/version.h>

#include <algorithm>
#include <atomic>
#include <string>
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
void dsyrk_(const char* uplo, const char* trans, const int* n, const int* k, const double* alpha, const double* a,
            const int* lda, const double* beta, double* c, const int* ldc);
}
#endif

namespace alps {

namespace {
#ifdef ALPS_HAVE_LAPACK
bool fits_int(int64_t v) { return v >= 0 && v <= std::numeric_limits<int>::max(); }

bool lapack_eligible(const at::Tensor& t) {
  return t.device().is_cpu() && (t.scalar_type() == at::kFloat || t.scalar_type() == at::kDouble);
}

template <typename T, typename Syevd>
std::pair<at::Tensor, at::Tensor> syevd(const at::Tensor& A, Syevd fn) {
  const int n = static_cast<int>(A.size(0));
  // Row-major A is column-major A^T = A, and LAPACK's "L" (column-major lower) is the row-major upper triangle.
  // The eigenvectors come back as columns of the column-major array, i.e. as rows of the row-major tensor.
  at::Tensor work_matrix = A.contiguous().clone();
  at::Tensor L = at::empty({n}, A.options());
  // Documented minimum sizes for jobz = V instead of the workspace query, which returns the size as a float.
  const int lwork = 1 + 6 * n + 2 * n * n, liwork = 3 + 5 * n;
  std::vector<T> work(static_cast<size_t>(lwork));
  std::vector<int> iwork(static_cast<size_t>(liwork));
  int info = 0;
  fn("V", "L", &n, work_matrix.data_ptr<T>(), &n, L.data_ptr<T>(), work.data(), &lwork, iwork.data(), &liwork, &info);
  ALPS_CHECK(info == 0, "eigendecomposition of a ", n, "x", n, " matrix failed (LAPACK syevd info ", info,
             info > 0 ? ": did not converge; NaN or Inf in the matrix?" : "", ")");
  return {L, work_matrix.t().contiguous()};
}

template <typename T, typename Syrk>
void syrk(at::Tensor& C, const at::Tensor& A, bool transpose_a, double beta, Syrk fn) {
  // Row-major A [n, k] is column-major A^T [k, n] (lda = k): op(A) op(A)^T = (A^T)^T A^T is trans = "T". Row-major
  // A [k, n] (transpose_a) is column-major [n, k] (lda = n): A^T A is trans = "N". Column-major "U" is the
  // row-major lower triangle.
  const int n = static_cast<int>(C.size(0));
  const int k = static_cast<int>(transpose_a ? A.size(0) : A.size(1));
  const int lda = static_cast<int>(A.size(1));
  const T one = 1, b = static_cast<T>(beta);
  fn("U", transpose_a ? "N" : "T", &n, &k, &one, A.data_ptr<T>(), &lda, &b, C.data_ptr<T>(), &n);
}
#endif

template <typename T>
void mirror_lower_cpu(T* c, int64_t n) {
  constexpr int64_t kTile = 64;  // tiles, so that the transposed reads stay in cache
  for (int64_t i0 = 0; i0 < n; i0 += kTile)
    for (int64_t j0 = i0; j0 < n; j0 += kTile)
      for (int64_t i = i0; i < std::min(i0 + kTile, n); ++i)
        for (int64_t j = std::max(j0, i + 1); j < std::min(j0 + kTile, n); ++j) c[i * n + j] = c[j * n + i];
}
}  // namespace

std::pair<at::Tensor, at::Tensor> symmetric_eigh(const at::Tensor& A) {
  ALPS_CHECK(A.dim() == 2 && A.size(0) == A.size(1), "symmetric_eigh: expected a square matrix, got ", A.sizes());
#ifdef ALPS_HAVE_LAPACK
  // The workspace size 1 + 6n + 2n^2 must fit LAPACK's 32-bit integers.
  if (lapack_eligible(A) && A.size(0) <= 32000) {
    if (A.scalar_type() == at::kFloat) return syevd<float>(A, ssyevd_);
    return syevd<double>(A, dsyevd_);
  }
#endif
  // libtorch 1.13's own fp32 CPU eigh fails from n ~ 3000 on (its workspace size passes through a float).
  if (A.device().is_cpu() && A.scalar_type() == at::kFloat) {
    auto [L, Q] = at::linalg_eigh(A.to(at::kDouble), "U");
    return {L.to(at::kFloat), Q.to(at::kFloat).contiguous()};
  }
  auto [L, Q] = at::linalg_eigh(A, "U");
  return {L, Q.contiguous()};
}

bool syrk_is_native(const at::Device& device) {
#ifdef ALPS_HAVE_LAPACK
  return device.is_cpu();
#else
  return false;
#endif
}

void syrk_lower(at::Tensor& C, const at::Tensor& A, bool transpose_a, double beta) {
  const int64_t n = transpose_a ? A.size(1) : A.size(0), k = transpose_a ? A.size(0) : A.size(1);
  ALPS_CHECK(A.dim() == 2 && C.dim() == 2 && C.is_contiguous() && C.size(0) == n && C.size(1) == n &&
                 C.scalar_type() == A.scalar_type(),
             "syrk_lower: C must be a contiguous ", n, "x", n, " matrix of A's dtype, got ", C.sizes());
#ifdef ALPS_HAVE_LAPACK
  if (syrk_is_native(A.device()) && A.is_contiguous() && fits_int(n) && fits_int(k) && fits_int(A.size(1))) {
    if (A.scalar_type() == at::kFloat) return syrk<float>(C, A, transpose_a, beta, ssyrk_);
    if (A.scalar_type() == at::kDouble) return syrk<double>(C, A, transpose_a, beta, dsyrk_);
  }
#endif
  const at::Tensor op = transpose_a ? A.t() : A;
  if (beta == 0) {
    at::mm_out(C, op, op.t());
  } else {
    C.addmm_(op, op.t(), beta);  // beta in the product itself: no separate pass over C (none at all for beta = 1)
  }
}

bool gram_takes_half_inputs(c10::ScalarType dtype, const at::Device& device) {
  // libtorch 2.x has matrix products of fp16/bf16 inputs with an fp32 result (aten::addmm.dtype), on CUDA.
  return TORCH_VERSION_MAJOR >= 2 && device.is_cuda() && (dtype == at::kHalf || dtype == at::kBFloat16);
}

void gram_update(at::Tensor& G, const at::Tensor& X) {
  ALPS_CHECK(X.dim() == 2 && G.dim() == 2 && G.size(0) == X.size(1) && G.size(1) == X.size(1) && G.is_contiguous(),
             "gram_update: G must be a contiguous ", X.size(-1), "x", X.size(-1), " matrix for X ", X.sizes(),
             ", got ", G.sizes());
#if TORCH_VERSION_MAJOR >= 2
  if (G.scalar_type() == at::kFloat && gram_takes_half_inputs(X.scalar_type(), X.device())) {
    // Older 2.x releases refuse an fp32 `self` beside half inputs in the in-place form; they take the out-of-place
    // product (one [n, n] fp32 temporary per batch).
    static std::atomic<bool> in_place{true};
    const at::Tensor Xt = X.t();
    if (in_place.load()) {
      try {
        at::addmm_out(G, G, Xt, X, at::kFloat);
        return;
      } catch (const c10::Error& e) {
        if (std::string(e.what()).find("out of memory") != std::string::npos) throw;
        in_place = false;
      }
    }
    G.add_(at::mm(Xt, X, at::kFloat));
    return;
  }
#endif
  syrk_lower(G, X.to(G.scalar_type()).contiguous(), /*transpose_a=*/true, 1.0);
}

CholeskySolver::CholeskySolver(const at::Tensor& C, Fp32Products products, int64_t block) {
  ALPS_CHECK(C.dim() == 2 && C.size(0) == C.size(1) && block >= 1, "CholeskySolver: expected a square factor, got ",
             C.sizes());
  const int64_t n = C.size(0);
  for (int64_t s = 0; s < n; s += block) {
    const int64_t len = std::min(block, n - s);
    starts_.push_back(s);
    inverse_.emplace_back(at::linalg_solve_triangular(C.narrow(0, s, len).narrow(1, s, len),
                                                      at::eye(len, C.options()), /*upper=*/false),
                          products);
  }
  C_ = Fp32Matrix(C, products);
}

std::optional<CholeskySolver> CholeskySolver::factor(at::Tensor A, Fp32Products products, int64_t block) {
  ALPS_CHECK(A.dim() == 2 && A.size(0) == A.size(1) && A.scalar_type() == at::kFloat && block >= 1,
             "CholeskySolver::factor: expected a square fp32 matrix, got ", A.sizes(), " ", A.scalar_type());
  const int64_t n = A.size(0);
  at::Tensor W = A.contiguous();  // A's storage when it is contiguous: it becomes C, block column by block column
  A.reset();
  CholeskySolver f;
  for (int64_t s = 0; s < n; s += block) {
    const int64_t len = std::min(block, n - s), e = s + len;
    // C_kk from the updated diagonal block, and its inverse (the solves' too).
    at::Tensor Wkk = W.narrow(0, s, len).narrow(1, s, len);
    auto [Ckk, info] = at::linalg_cholesky_ex(Wkk);
    if (info.item<int64_t>() != 0) return std::nullopt;
    Wkk.copy_(Ckk);
    f.starts_.push_back(s);
    f.inverse_.emplace_back(at::linalg_solve_triangular(Ckk, at::eye(len, W.options()), /*upper=*/false), products);
    if (e == n) break;
    W.narrow(0, s, len).narrow(1, e, n - e).zero_();  // C's upper triangle
    // The panel: C_>k,k = W_>k,k C_kk^-T, as (C_kk^-1 W_>k,k^T)^T.
    at::Tensor Lt = at::empty({len, n - e}, W.options());
    f.inverse_.back().mm_out(Lt, W.narrow(0, e, n - e).narrow(1, s, len).t().contiguous());
    const at::Tensor L = Lt.t().contiguous();  // [n - e, len]
    W.narrow(0, e, n - e).narrow(1, s, len).copy_(L);
    // The trailing lower triangle, block column j: W_>=j,j -= C_>=j,k C_j,k^T.
    const Fp32Matrix Ls(L, products);
    for (int64_t j = e; j < n; j += block) {
      const int64_t lj = std::min(block, n - j);
      at::Tensor update = at::empty({n - j, lj}, W.options());
      Ls.narrow(0, j - e, n - j).mm_out(update, Ls.narrow(0, j - e, lj).t());
      W.narrow(0, j, n - j).narrow(1, j, lj).sub_(update);
    }
  }
  f.C_ = Fp32Matrix(W, products);
  return f;
}

void CholeskySolver::solve(const at::Tensor& R, at::Tensor& X) const {
  const int64_t n = C_.size(0), k = R.size(1);
  ALPS_CHECK(R.dim() == 2 && R.size(0) == n && X.sizes() == R.sizes() && X.is_contiguous(),
             "CholeskySolver::solve: R and X must be [", n, ", k], X contiguous");
  const at::Tensor Y = at::empty({n, k}, R.options());
  const at::Tensor T = at::empty({inverse_.front().size(0), k}, Y.options());
  // Split products read the solved blocks of Y and X at every later step: each is split once, as it is made.
  Fp32Matrix Ys = Fp32Matrix::rows_of(Y, C_.how()), Xs = Fp32Matrix::rows_of(X, C_.how());
  // C Y = R, top down: Y_i = C_ii^-1 (R_i - C_i,<i Y_<i).
  for (size_t i = 0; i < inverse_.size(); ++i) {
    const int64_t s = starts_[i], len = inverse_[i].size(0);
    at::Tensor Yi = Y.narrow(0, s, len);
    if (s == 0) {
      inverse_[i].mm_out(Yi, R.narrow(0, 0, len));
    } else {
      at::Tensor Ti = T.narrow(0, 0, len);
      C_.narrow(0, s, len).narrow(1, 0, s).addmm_out(Ti, R.narrow(0, s, len), Ys.narrow(0, 0, s), 1, -1);
      inverse_[i].mm_out(Yi, Ti);
    }
    Ys.store_rows(Y, s, len);
  }
  // C^T X = Y, bottom up: X_i = C_ii^-T (Y_i - (C_>i,i)^T X_>i).
  for (size_t i = inverse_.size(); i-- > 0;) {
    const int64_t s = starts_[i], len = inverse_[i].size(0), e = s + len;
    at::Tensor Xi = X.narrow(0, s, len);
    if (e == n) {
      inverse_[i].t().mm_out(Xi, Ys.narrow(0, s, len));
    } else {
      at::Tensor Ti = T.narrow(0, 0, len);
      C_.narrow(0, e, n - e).narrow(1, s, len).t().addmm_out(Ti, Y.narrow(0, s, len), Xs.narrow(0, e, n - e), 1, -1);
      inverse_[i].t().mm_out(Xi, Ti);
    }
    Xs.store_rows(X, s, len);
  }
}

void mirror_lower(at::Tensor& C) {
  ALPS_CHECK(C.dim() == 2 && C.size(0) == C.size(1) && C.is_contiguous(), "mirror_lower: expected a contiguous "
             "square matrix, got ", C.sizes());
  if (C.device().is_cpu() && C.scalar_type() == at::kFloat) return mirror_lower_cpu(C.data_ptr<float>(), C.size(0));
  if (C.device().is_cpu() && C.scalar_type() == at::kDouble) return mirror_lower_cpu(C.data_ptr<double>(), C.size(0));
  at::Tensor lower = C.tril();
  C.copy_(lower + lower.tril(-1).t());
}

}  // namespace alps
