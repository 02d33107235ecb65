// A build without CUDA: no tensor cores, and no CUDA tensors to multiply on them.
#include "alps/core/error.h"
#include "alps/core/products.h"

namespace alps::detail {

void tf32_gemm(at::Tensor&, const at::Tensor&, const at::Tensor&, double, double) {
  ALPS_CHECK(false, "tf32_gemm: this build of alps has no CUDA");
}

bool has_tf32_products(const at::Device&) { return false; }

}  // namespace alps::detail
