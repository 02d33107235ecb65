// Split products on the tensor cores: cuBLAS's GEMM with TF32 compute on fp32 storage. alps links libtorch, not
// cuBLAS; libtorch's CUDA library has loaded cuBLAS into the process, and the one function needed is looked up there
// (linking the toolkit's cuBLAS would also mean carrying it to every GPU machine).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <algorithm>

#include "alps/core/error.h"
#include "alps/core/products.h"

namespace alps::detail {

namespace {

using GemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                  const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                  cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

GemmEx gemm_ex() {
  static const GemmEx fn = reinterpret_cast<GemmEx>(dlsym(RTLD_DEFAULT, "cublasGemmEx"));
  return fn;
}

// cuBLAS is column-major: a row-major [r, c] X with unit column stride is, in its memory, the column-major X^T with
// leading dimension stride(0) (operation N yields X^T); a transposed view (unit row stride) is the column-major X
// (operation T yields X^T). Anything else is copied first.
struct Operand {
  at::Tensor t;
  cublasOperation_t op;
  int64_t ld;
};
Operand transposed_operand(const at::Tensor& X) {
  const int64_t r = X.size(0), c = X.size(1);
  if (X.stride(1) == 1 && X.stride(0) >= std::max<int64_t>(1, c)) return {X, CUBLAS_OP_N, X.stride(0)};
  if (X.stride(0) == 1 && X.stride(1) >= std::max<int64_t>(1, r)) return {X, CUBLAS_OP_T, X.stride(1)};
  return {X.contiguous(), CUBLAS_OP_N, std::max<int64_t>(1, c)};
}

}  // namespace

bool has_tf32_products(const at::Device& device) {
  if (!device.is_cuda() || gemm_ex() == nullptr) return false;
  return at::cuda::getDeviceProperties(device.has_index() ? device.index() : 0)->major >= 8;
}

void tf32_gemm(at::Tensor& C, const at::Tensor& A, const at::Tensor& B, double beta, double alpha) {
  ALPS_CHECK(C.is_cuda() && A.device() == C.device() && B.device() == C.device() && A.scalar_type() == at::kFloat &&
                 B.scalar_type() == at::kFloat && C.scalar_type() == at::kFloat && A.dim() == 2 && B.dim() == 2 &&
                 A.size(1) == B.size(0) && C.size(0) == A.size(0) && C.size(1) == B.size(1),
             "tf32_gemm: expected fp32 CUDA matrices C [m, n] = A [m, k] B [k, n], got ", C.sizes(), " ", A.sizes(),
             " ", B.sizes());
  const GemmEx gemm = gemm_ex();
  ALPS_CHECK(gemm != nullptr, "tf32_gemm: cuBLAS's cublasGemmEx is not loaded in this process");
  const int64_t m = C.size(0), n = C.size(1), k = A.size(1);
  if (m == 0 || n == 0) return;
  const bool direct = C.stride(1) == 1 && C.stride(0) >= std::max<int64_t>(1, n);
  at::Tensor out = direct ? C : (beta == 0 ? at::empty({m, n}, C.options()) : C.contiguous());
  if (k == 0) {  // no terms: beta C (out may be fresh memory when beta is 0)
    if (beta == 0) {
      out.zero_();
    } else {
      out.mul_(beta);
    }
  } else {
    const c10::cuda::CUDAGuard on_device(C.device().index());
    // Row-major C = A B is column-major C^T = B^T A^T.
    const Operand a = transposed_operand(B), b = transposed_operand(A);
    const float alpha_f = static_cast<float>(alpha), beta_f = static_cast<float>(beta);
    const cublasStatus_t status =
        gemm(at::cuda::getCurrentCUDABlasHandle(), a.op, b.op, static_cast<int>(n), static_cast<int>(m),
             static_cast<int>(k), &alpha_f, a.t.data_ptr<float>(), CUDA_R_32F, static_cast<int>(a.ld),
             b.t.data_ptr<float>(), CUDA_R_32F, static_cast<int>(b.ld), &beta_f, out.data_ptr<float>(), CUDA_R_32F,
             static_cast<int>(out.stride(0)), CUBLAS_COMPUTE_32F_FAST_TF32, CUBLAS_GEMM_DEFAULT);
    ALPS_CHECK(status == CUBLAS_STATUS_SUCCESS, "tf32_gemm: cublasGemmEx failed with status ", static_cast<int>(status),
               " for [", m, ", ", k, "] x [", k, ", ", n, "]");
  }
  if (!direct) C.copy_(out);
}

}  // namespace alps::detail
