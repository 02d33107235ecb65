#include "alps/core/products.h"

#include <ATen/ATen.h>

#include "alps/core/error.h"

namespace alps {

namespace {
// C = beta M + alpha A B by ATen's own product (beta = 0 ignores M, which may be C).
void aten_addmm(at::Tensor& C, const at::Tensor& M, const at::Tensor& A, const at::Tensor& B, double beta,
                double alpha) {
  if (beta == 0) {
    at::mm_out(C, A, B);
    if (alpha != 1) C.mul_(alpha);
  } else {
    at::addmm_out(C, M, A, B, beta, alpha);
  }
}

// C = beta C + alpha A B for split operands: on a GPU's tensor cores, on the CPU in fp32 (a product of two TF32
// numbers is exact there too: the same arithmetic, for checking it without a GPU).
void tf32_products_into(at::Tensor& C, const at::Tensor& A, const at::Tensor& B, double beta, double alpha) {
  if (C.is_cuda()) return detail::tf32_gemm(C, A, B, beta, alpha);
  aten_addmm(C, C, A, B, beta, alpha);
}

// fp32 keeps 24 significant bits, TF32 11: add half of the 13 dropped bits' weight to the magnitude's bit pattern (a
// carry into the exponent is the correct rounding up to the next binade), then clear them.
constexpr int32_t kHalf = 1 << 12, kKeep = ~((1 << 13) - 1);

void round_in_place(at::Tensor& x) { x.view(at::kInt).add_(kHalf).bitwise_and_(kKeep); }

// The rest of x after hi, rounded to TF32, in the memory of the difference.
at::Tensor low_part(const at::Tensor& x, const at::Tensor& hi) {
  at::Tensor lo = x - hi;  // exact (Sterbenz): hi is within a factor 2 of x
  round_in_place(lo);
  return lo;
}
}  // namespace

Fp32Products fp32_products_for(const std::string& name, const at::Device& device, const std::string& what) {
  if (name == "fp32") return Fp32Products::kNative;
  if (name == "tf32x3") return Fp32Products::kSplitTf32;
  ALPS_CHECK(name == "auto", what, ": expected auto, fp32 or tf32x3, got '", name, "'");
  return detail::has_tf32_products(device) ? Fp32Products::kSplitTf32 : Fp32Products::kNative;
}

at::Tensor round_to_tf32(const at::Tensor& x) {
  ALPS_CHECK(x.scalar_type() == at::kFloat, "round_to_tf32: expected fp32, got ", x.scalar_type());
  return x.view(at::kInt).add(kHalf).bitwise_and_(kKeep).view(at::kFloat);
}

Fp32Matrix::Fp32Matrix(const at::Tensor& A, Fp32Products how) {
  ALPS_CHECK(A.dim() == 2, "Fp32Matrix: expected a matrix, got ", A.sizes());
  if (how == Fp32Products::kNative || A.scalar_type() != at::kFloat) {
    hi_ = A;
    return;
  }
  hi_ = round_to_tf32(A);
  lo_ = low_part(A, hi_);
}

Fp32Matrix Fp32Matrix::rows_of(const at::Tensor& X, Fp32Products how) {
  ALPS_CHECK(X.dim() == 2, "Fp32Matrix: expected a matrix, got ", X.sizes());
  Fp32Matrix m;
  m.hi_ = X;
  if (how == Fp32Products::kSplitTf32 && X.scalar_type() == at::kFloat) {
    m.hi_ = at::empty_like(X);
    m.lo_ = at::empty_like(X);
  }
  return m;
}

void Fp32Matrix::store_rows(const at::Tensor& X, int64_t start, int64_t length) {
  if (!lo_.defined()) return;  // native: the matrix is X
  const at::Tensor rows = X.narrow(0, start, length);
  at::Tensor hi = hi_.narrow(0, start, length), lo = lo_.narrow(0, start, length);
  hi.copy_(rows);
  round_in_place(hi);
  at::sub_out(lo, rows, hi);
  round_in_place(lo);
}

Fp32Matrix Fp32Matrix::narrow(int64_t dim, int64_t start, int64_t length) const {
  Fp32Matrix v;
  v.hi_ = hi_.narrow(dim, start, length);
  if (lo_.defined()) v.lo_ = lo_.narrow(dim, start, length);
  return v;
}

Fp32Matrix Fp32Matrix::t() const {
  Fp32Matrix v;
  v.hi_ = hi_.t();
  if (lo_.defined()) v.lo_ = lo_.t();
  return v;
}

void Fp32Matrix::addmm_out(at::Tensor& C, const at::Tensor& M, const Fp32Matrix& B, double beta,
                           double alpha) const {
  ALPS_CHECK(how() == B.how(), "Fp32Matrix: a split operand times a native one");
  if (!lo_.defined()) return aten_addmm(C, M, hi_, B.hi_, beta, alpha);
  ALPS_CHECK(C.scalar_type() == at::kFloat, "Fp32Matrix: an fp32 result expected");
  if (beta != 0 && !M.is_same(C)) C.copy_(M);
  // The small terms first, so that the largest is added to their sum rather than they to it.
  tf32_products_into(C, lo_, B.hi_, beta, alpha);
  tf32_products_into(C, hi_, B.lo_, 1.0, alpha);
  tf32_products_into(C, hi_, B.hi_, 1.0, alpha);
}

}  // namespace alps
