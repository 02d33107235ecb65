#pragma once
// Dense symmetric kernels that ATen lacks or gets wrong, shared by the solvers (ALPS's eigendecomposition and
// per-rho inverse) and the calibration statistics (Gram accumulation). On the CPU they call LAPACK/BLAS directly
// when alps was built with them (ALPS_HAVE_LAPACK): libtorch 1.13 sizes ssyevd's workspace through a float, so
// its fp32 eigh fails from n ~ 3000 on, and ATen has no syrk, so every Gram matrix cost a full product. Elsewhere
// (CUDA, or no LAPACK at build time) ATen.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "alps/core/products.h"

namespace alps {

/// A = Q diag(L) Q^T for a symmetric fp32/fp64 A [n, n] (its upper triangle is read): L [n] ascending, Q [n, n]
/// contiguous with the eigenvectors as columns, both in A's dtype.
std::pair<at::Tensor, at::Tensor> symmetric_eigh(const at::Tensor& A);

/// The lower triangle of C = beta C + op(A) op(A)^T, with op(A) = A for A [n, k], or A^T for A [k, n] when
/// `transpose_a`. C is a contiguous [n, n] matrix of A's dtype (fp32/fp64). On the CPU this is one BLAS syrk (n^2 k
/// flops, half a product) that leaves C's upper triangle alone; elsewhere a full product. mirror_lower() completes
/// the symmetric matrix.
void syrk_lower(at::Tensor& C, const at::Tensor& A, bool transpose_a, double beta);

/// G += X^T X for X [tokens, n] in any floating dtype and G [n, n] fp32/fp64 on X's device (at least G's lower
/// triangle; mirror_lower() completes it). fp16 and bf16 X on a GPU go to the matrix units as they are, with fp32
/// products and sums: a product of two fp16 (11-bit significands) or bf16 (8-bit) numbers has at most 22 significant
/// bits and is exact in fp32, so the result is the fp32 Gram of the upcast X up to the order of its sums, at the
/// half-precision rate and without an fp32 copy of X. Otherwise X is converted to G's dtype first (syrk_lower).
void gram_update(at::Tensor& G, const at::Tensor& X);

/// Whether gram_update takes X of `dtype` on `device` without converting it (see above).
bool gram_takes_half_inputs(c10::ScalarType dtype, const at::Device& device);

/// Copies the lower triangle of a square matrix onto its upper one (in place, any device).
void mirror_lower(at::Tensor& C);

/// Whether syrk_lower costs n^2 k flops (BLAS syrk) instead of 2 n^2 k on `device`.
bool syrk_is_native(const at::Device& device);

/// Solves A X = R for many R, given the lower Cholesky factor C of A = C C^T [n, n] (fp32/fp64, any device). The
/// diagonal [block, block] blocks of C are inverted once; each solve is then a blocked forward and back substitution
/// whose every step is a matrix product (n^2 k flops each way, as two triangular solves): a GPU's triangular-solve
/// kernels run well below its product rate (an H100's cuSOLVER potrs with 4096 right-hand sides at n = 11008: 28.7
/// ms, this: 21.7 ms, one [n, n] x [n, 4096] product: 20.1 ms; docs/benchmarks.md, GPU). Those products run as
/// `products` says (core/products.h); the factor and its inverted blocks are split once.
class CholeskySolver {
 public:
  explicit CholeskySolver(const at::Tensor& C, Fp32Products products = Fp32Products::kNative, int64_t block = 1024);
  /// The solver of A = C C^T for a symmetric positive definite A [n, n] (its lower triangle is read; its storage
  /// becomes C), factored here by blocks of `block`: each diagonal block by potrf and inverted (the inverses the
  /// solves use), the panel below it as the product with that inverse, the trailing lower triangle updated block
  /// column by block column; every product runs as `products` says, so that with split TF32 products the n^3 / 3
  /// flops of the factorization run on a GPU's tensor cores as the solves' do. nullopt when A is not positive
  /// definite (a diagonal block's potrf finds a pivot <= 0).
  static std::optional<CholeskySolver> factor(at::Tensor A, Fp32Products products, int64_t block = 1024);
  /// X = A^-1 R for R [n, k]; X [n, k] contiguous, not aliasing R.
  void solve(const at::Tensor& R, at::Tensor& X) const;

 private:
  CholeskySolver() = default;
  Fp32Matrix C_;
  std::vector<int64_t> starts_;      // first row of each diagonal block
  std::vector<Fp32Matrix> inverse_;  // C_ii^-1, lower triangular
};

}  // namespace alps
