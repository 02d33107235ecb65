#pragma once
// Private: the two dense kernels ALPS needs beyond at::mm. On the CPU they go to LAPACK/BLAS directly when alps
// was built with them (ALPS_HAVE_LAPACK): libtorch 1.13 sizes ssyevd's workspace through a float, so its fp32
// eigh fails from in ~ 3000 on, and ATen has no syrk. Elsewhere (CUDA, or no LAPACK at build time) ATen.
#include <ATen/core/Tensor.h>

#include <utility>

namespace alps::prune::detail {

/// A = Q diag(L) Q^T for a symmetric fp32/fp64 A [n, n]: L [n] ascending, Q [n, n] contiguous with the
/// eigenvectors as columns, both in A's dtype.
std::pair<at::Tensor, at::Tensor> symmetric_eigh(const at::Tensor& A);

/// C = A A^T for A [n, k] into the preallocated contiguous C [n, n] (both triangles written).
void gram_into(at::Tensor& C, const at::Tensor& A);

/// Whether gram_into costs half a product (syrk) for tensors on `device`, i.e. n^2 k instead of 2 n^2 k flops.
bool gram_is_syrk(const at::Device& device);

}  // namespace alps::prune::detail
